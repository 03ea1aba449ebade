/* The kiln command: dispatches to its subcommands. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "kiln/kiln.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} commands[] = {
    {"ops", kiln_cmd_ops, "the op table: op x backend x dtype coverage (--device D, --json; --help)"},
    {"info", kiln_cmd_info, "build options, threads, BLAS, mode, devices found"},
    {"generate", kiln_cmd_generate, "text from a Hugging Face model: kiln generate MODEL_DIR --prompt TEXT (--help)"},
    {"train", kiln_cmd_train, "train a model: kiln train TASK [options] (gpt2, adder, llama, resnet18, dlrm, ...; --help)"},
    {"tokenize", kiln_cmd_tokenize, "a model's tokenizer.json: text lines -> JSON ids (--decode: back)"},
    {"cache", kiln_cmd_cache, "the compilation cache: kiln cache path | stats [--json] | clear (--help)"},
    {"demo", kiln_cmd_demo, "a tour of the runtime: modes, ops, errors, a meta-device trace"},
    {"help", NULL, "this text"},
};

static void usage(FILE *f) {
    fprintf(f, "kiln %s: a deep-learning runtime in C\n\nusage: kiln <command> [options]\n\ncommands:\n",
            kn_version());
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\nenvironment: KILN_MODE (" KILN_MODES "), KILN_DEVICE (cpu, meta), KILN_THREADS, KILN_SEED,\n"
                "             KILN_CACHE_DIR, KILN_CACHE_MAX_MB, KILN_CACHE=0, KILN_CC, KILN_GEMM (openblas, onednn, ref)\n");
}

bool kiln_wants_help(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return true;
    return false;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("kiln %s\n", kn_version());
        return 0;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (commands[i].run && strcmp(cmd, commands[i].name) == 0) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "kiln: unknown command '%s'\n\n", cmd);
    usage(stderr);
    return 2;
}
