/* `kiln tokenize MODEL_DIR`: a model's tokenizer.json as a filter. Each line of stdin becomes
 * its ids as a JSON array; with --decode, each line is a JSON array of ids and becomes text.
 * With --input FILE --output TOKENS.bin, a whole file becomes a token file (tokenize_file.c). */
#define _POSIX_C_SOURCE 200809L /* getline */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "kiln/kiln.h"
#include "tokenize_file.h"

static int usage(FILE *f, int code) {
    fprintf(f, "usage: kiln tokenize MODEL_DIR [--no-special] [--decode [--skip-special]]\n"
               "       kiln tokenize MODEL_DIR --input FILE --output TOKENS.bin [--format F] [--no-special]\n"
               "                     [--eos-between-docs [--doc-separator STR] [--eos-token TOKEN]]\n"
               "  MODEL_DIR           a directory holding tokenizer.json, or the file itself\n"
               "  (default)           each line of stdin -> its ids as a JSON array, one line each\n"
               "  --no-special        do not add the post-processor's special tokens (BOS...)\n"
               "  --decode            each line of stdin is a JSON array of ids -> the text it decodes to\n"
               "  --skip-special      with --decode: leave special tokens out of the text\n"
               "  --input FILE        tokenize FILE whole, newlines kept, into the token file --output names\n"
               "                      (for kiln train --data); read in blocks, never whole\n"
               "  --output FILE       the token file, written atomically\n"
               "  --format F          auto | u16 | u32 [auto: u16 when every id fits 16 bits, else u32, as kiln\n"
               "                      train --tokens auto reads them]\n"
               "  --eos-between-docs  FILE holds documents separated by --doc-separator: each is tokenized on its\n"
               "                      own, the EOS token between them [off: FILE is one text]\n"
               "  --doc-separator STR what separates documents, dropped from the text; \\n, \\t and \\\\ are\n"
               "                      understood [\\n\\n: a blank line]\n"
               "  --eos-token TOKEN   the EOS token [MODEL_DIR's tokenizer_config.json eos_token, else its\n"
               "                      config.json eos_token_id]\n");
    return code;
}

static int encode_line(const kn_tokenizer *t, const char *line, size_t len, bool add_special, size_t line_no) {
    int32_t *ids = NULL;
    size_t n = 0;
    if (kn_tokenizer_encode(t, line, len, add_special, &ids, &n) != KN_OK) {
        fprintf(stderr, "kiln tokenize: stdin line %zu: %s\n", line_no, kn_last_error());
        return 1;
    }
    putchar('[');
    for (size_t i = 0; i < n; i++) printf(i ? ",%d" : "%d", ids[i]);
    puts("]");
    free(ids);
    return 0;
}

static int decode_line(const kn_tokenizer *t, const char *line, size_t len, bool skip_special, size_t line_no) {
    cJSON *arr = cJSON_ParseWithLength(line, len);
    int n = cJSON_IsArray(arr) ? cJSON_GetArraySize(arr) : -1;
    int32_t *ids = malloc(((size_t)(n > 0 ? n : 0) + 1) * sizeof *ids);
    bool ok = n >= 0 && ids;
    const cJSON *v;
    size_t i = 0;
    cJSON_ArrayForEach(v, arr) { /* in one walk: indexing each element walks the list from its start */
        /* In range before the cast; a negative id is the decoder's to refuse. */
        ok = ok && cJSON_IsNumber(v) && v->valuedouble >= INT32_MIN && v->valuedouble <= INT32_MAX &&
             v->valuedouble == (double)(int32_t)v->valuedouble;
        if (ok) ids[i++] = (int32_t)v->valuedouble;
    }
    cJSON_Delete(arr);
    if (!ok) {
        free(ids);
        fprintf(stderr, "kiln tokenize: stdin line %zu: not a JSON array of integer ids\n", line_no);
        return 1;
    }
    char *text = NULL;
    size_t text_len = 0;
    kn_status st = kn_tokenizer_decode(t, ids, (size_t)n, skip_special, &text, &text_len);
    free(ids);
    if (st != KN_OK) {
        fprintf(stderr, "kiln tokenize: stdin line %zu: %s\n", line_no, kn_last_error());
        return 1;
    }
    fwrite(text, 1, text_len, stdout);
    putchar('\n');
    free(text);
    return 0;
}

/* A usage error: the message, then the usage; 2. */
static int misuse(const char *what, const char *arg) {
    fprintf(stderr, "kiln tokenize: %s%s%s\n", arg ? arg : "", arg ? ": " : "", what);
    return usage(stderr, 2);
}

int kiln_cmd_tokenize(int argc, char **argv) {
    tokenize_file_options f = {.format = "auto", .add_special = true, .doc_separator = "\\n\\n"};
    bool decode = false, skip_special = false, separator_set = false, format_set = false;
    static const char *const valued[] = {"--input", "--output", "--format", "--doc-separator", "--eos-token"};
    const char **values[] = {&f.input, &f.output, &f.format, &f.doc_separator, &f.eos_token};
    for (int i = 1; i < argc; i++) {
        size_t v = 0;
        while (v < sizeof valued / sizeof *valued && strcmp(argv[i], valued[v]) != 0) v++;
        if (v < sizeof valued / sizeof *valued) {
            if (i + 1 == argc) return misuse("needs a value", argv[i]);
            *values[v] = argv[++i];
            separator_set |= values[v] == &f.doc_separator;
            format_set |= values[v] == &f.format;
        } else if (strcmp(argv[i], "--no-special") == 0)
            f.add_special = false;
        else if (strcmp(argv[i], "--decode") == 0)
            decode = true;
        else if (strcmp(argv[i], "--skip-special") == 0)
            skip_special = true;
        else if (strcmp(argv[i], "--eos-between-docs") == 0)
            f.eos_between_docs = true;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return usage(stdout, 0);
        else if (argv[i][0] == '-' || f.model_dir) {
            fprintf(stderr, "kiln tokenize: unexpected argument '%s'\n", argv[i]);
            return usage(stderr, 2);
        } else
            f.model_dir = argv[i];
    }
    if (!f.model_dir) return usage(stderr, 2);
    if (skip_special && !decode) return misuse("goes with --decode", "--skip-special");
    if (!f.input != !f.output) return misuse("--input and --output go together", NULL);
    if (f.input && decode) return misuse("--decode reads lines of stdin, not --input", NULL);
    if (!f.input && (format_set || f.eos_between_docs)) return misuse("goes with --input", format_set ? "--format" : "--eos-between-docs");
    if (!f.eos_between_docs && (separator_set || f.eos_token))
        return misuse("goes with --eos-between-docs", separator_set ? "--doc-separator" : "--eos-token");
    kn_tokenizer *t = kn_tokenizer_load(f.model_dir);
    if (!t) {
        fprintf(stderr, "kiln tokenize: %s\n", kn_last_error());
        return 1;
    }
    if (f.input) {
        int rc = tokenize_file(t, &f);
        kn_tokenizer_free(t);
        return rc;
    }
    char *line = NULL;
    size_t cap = 0, line_no = 0;
    ssize_t got;
    int rc = 0;
    while (rc == 0 && (got = getline(&line, &cap, stdin)) >= 0) {
        line_no++;
        size_t len = (size_t)got;
        if (len && line[len - 1] == '\n') len--;
        rc = decode ? decode_line(t, line, len, skip_special, line_no) : encode_line(t, line, len, f.add_special, line_no);
    }
    free(line);
    kn_tokenizer_free(t);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "kiln tokenize: cannot write to stdout\n");
        rc = 1;
    }
    return rc;
}
