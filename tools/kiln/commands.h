/* The kiln command's subcommands; each returns the process exit code. */
#ifndef KILN_TOOLS_COMMANDS_H
#define KILN_TOOLS_COMMANDS_H

int kiln_cmd_ops(int argc, char **argv);
int kiln_cmd_info(int argc, char **argv);
int kiln_cmd_demo(int argc, char **argv);
int kiln_cmd_train(int argc, char **argv);
int kiln_cmd_cache(int argc, char **argv);
int kiln_cmd_generate(int argc, char **argv);
int kiln_cmd_tokenize(int argc, char **argv);

#endif
