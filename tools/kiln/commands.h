/* The kiln command's subcommands; each returns the process exit code. */
#ifndef KILN_TOOLS_COMMANDS_H
#define KILN_TOOLS_COMMANDS_H

#include <stdbool.h>

/* The execution modes this build runs, as every help text and message lists them. */
#define KILN_MODES "strict, debug, fused, compiled"

/* Whether argv[1..argc) asks for help (--help or -h). */
bool kiln_wants_help(int argc, char **argv);

int kiln_cmd_ops(int argc, char **argv);
int kiln_cmd_info(int argc, char **argv);
int kiln_cmd_demo(int argc, char **argv);
int kiln_cmd_train(int argc, char **argv);
int kiln_cmd_cache(int argc, char **argv);
int kiln_cmd_generate(int argc, char **argv);
int kiln_cmd_tokenize(int argc, char **argv);

#endif
