/* `kiln tokenize MODEL_DIR`: a model's tokenizer.json as a filter. Each line of stdin becomes
 * its ids as a JSON array; with --decode, each line is a JSON array of ids and becomes text. */
#define _POSIX_C_SOURCE 200809L /* getline */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "kiln/kiln.h"

static int usage(FILE *f, int code) {
    fprintf(f, "usage: kiln tokenize MODEL_DIR [--no-special] [--decode [--skip-special]]\n"
               "  MODEL_DIR       a directory holding tokenizer.json, or the file itself\n"
               "  (default)       each line of stdin -> its ids as a JSON array, one line each\n"
               "  --no-special    do not add the post-processor's special tokens (BOS...)\n"
               "  --decode        each line of stdin is a JSON array of ids -> the text it decodes to\n"
               "  --skip-special  with --decode: leave special tokens out of the text\n");
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
    for (int i = 0; ok && i < n; i++) {
        const cJSON *v = cJSON_GetArrayItem(arr, i);
        ok = cJSON_IsNumber(v) && v->valuedouble == (double)(int32_t)v->valuedouble;
        if (ok) ids[i] = (int32_t)v->valuedouble;
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

int kiln_cmd_tokenize(int argc, char **argv) {
    const char *dir = NULL;
    bool add_special = true, decode = false, skip_special = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--no-special") == 0)
            add_special = false;
        else if (strcmp(argv[i], "--decode") == 0)
            decode = true;
        else if (strcmp(argv[i], "--skip-special") == 0)
            skip_special = true;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return usage(stdout, 0);
        else if (argv[i][0] == '-' || dir) {
            fprintf(stderr, "kiln tokenize: unexpected argument '%s'\n", argv[i]);
            return usage(stderr, 2);
        } else
            dir = argv[i];
    }
    if (!dir) return usage(stderr, 2);
    if (skip_special && !decode) {
        fprintf(stderr, "kiln tokenize: --skip-special goes with --decode\n");
        return usage(stderr, 2);
    }
    kn_tokenizer *t = kn_tokenizer_load(dir);
    if (!t) {
        fprintf(stderr, "kiln tokenize: %s\n", kn_last_error());
        return 1;
    }
    char *line = NULL;
    size_t cap = 0, line_no = 0;
    ssize_t got;
    int rc = 0;
    while (rc == 0 && (got = getline(&line, &cap, stdin)) >= 0) {
        line_no++;
        size_t len = (size_t)got;
        if (len && line[len - 1] == '\n') len--;
        rc = decode ? decode_line(t, line, len, skip_special, line_no) : encode_line(t, line, len, add_special, line_no);
    }
    free(line);
    kn_tokenizer_free(t);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "kiln tokenize: cannot write to stdout\n");
        rc = 1;
    }
    return rc;
}
