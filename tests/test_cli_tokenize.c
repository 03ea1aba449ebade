/* `kiln tokenize`: lines of text to the ids the Hugging Face library gives (fixtures of
 * tests/fixtures/make_tokenizer_fixtures.py) and back with --decode; bad usage exits 2 and bad
 * input exits 1, each with a message. */
#define _GNU_SOURCE /* mkdtemp */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#define FIXTURES KILN_SOURCE_DIR "/tests/fixtures/tokenizers"

static const char *kiln;
static char tmp_dir[64], in_path[128], out_path[128], err_path[128];
static char output[1 << 16], errors[4096];

static void read_into(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = '\0';
    if (f) fclose(f);
}

/* Runs kiln with args ("tokenize", ..., NULL) and stdin from `input`; the exit code, output and errors kept. */
static int run(const char *input, const char *const *args) {
    FILE *f = fopen(in_path, "wb");
    fputs(input, f);
    fclose(f);
    int rc = run_program(kiln, args, in_path, out_path, err_path, NULL);
    read_into(out_path, output, sizeof output);
    read_into(err_path, errors, sizeof errors);
    return rc;
}

static cJSON *expected_for(const char *kind) {
    char path[512];
    snprintf(path, sizeof path, FIXTURES "/%s/expected.json", kind);
    FILE *f = fopen(path, "rb");
    static char buf[1 << 20];
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = '\0';
    if (f) fclose(f);
    return cJSON_Parse(buf);
}

/* The fixture texts that are one line each, as stdin, and the JSON field `key` of each as the
 * expected output lines (arrays printed compactly, strings as they are). */
static void one_line_cases(const cJSON *exp, const char *key, char *input, size_t in_cap, char *want, size_t want_cap) {
    size_t ni = 0, nw = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(exp, "cases")) {
        const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
        if (strpbrk(text, "\r\n")) continue;
        const cJSON *v = cJSON_GetObjectItem(c, key);
        char *printed = cJSON_IsString(v) ? NULL : cJSON_PrintUnformatted(v);
        const char *source = strcmp(key, "decoded") == 0 || strcmp(key, "decoded_skip_special") == 0
                                 ? cJSON_PrintUnformatted(cJSON_GetObjectItem(c, "ids"))
                                 : text;
        ni += (size_t)snprintf(input + ni, in_cap - ni, "%s\n", source);
        nw += (size_t)snprintf(want + nw, want_cap - nw, "%s\n", printed ? printed : v->valuestring);
        if (source != text) free((char *)source);
        free(printed);
    }
}

static void test_lines_encode_to_the_library_ids(void) {
    static const char *kinds[] = {"gpt2", "llama3", "qwen2", "llama2", "llama2_metaspace"};
    static char input[1 << 15], want[1 << 16];
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        cJSON *exp = expected_for(kinds[k]);
        CHECK(exp != NULL);
        char dir[512];
        snprintf(dir, sizeof dir, FIXTURES "/%s", kinds[k]);
        one_line_cases(exp, "ids", input, sizeof input, want, sizeof want);
        CHECK(run(input, (const char *[]){"tokenize", dir, NULL}) == 0);
        CHECK_MSG(strcmp(output, want) == 0, "%s: kiln tokenize printed\n%s\nwant\n%s", kinds[k], output, want);
        one_line_cases(exp, "ids_no_special", input, sizeof input, want, sizeof want);
        CHECK(run(input, (const char *[]){"tokenize", dir, "--no-special", NULL}) == 0);
        CHECK_MSG(strcmp(output, want) == 0, "%s --no-special printed\n%s\nwant\n%s", kinds[k], output, want);
        one_line_cases(exp, "decoded", input, sizeof input, want, sizeof want);
        CHECK(run(input, (const char *[]){"tokenize", dir, "--decode", NULL}) == 0);
        CHECK_MSG(strcmp(output, want) == 0, "%s --decode printed\n%s\nwant\n%s", kinds[k], output, want);
        one_line_cases(exp, "decoded_skip_special", input, sizeof input, want, sizeof want);
        CHECK(run(input, (const char *[]){"tokenize", dir, "--decode", "--skip-special", NULL}) == 0);
        CHECK_MSG(strcmp(output, want) == 0, "%s --decode --skip-special printed\n%s\nwant\n%s", kinds[k], output, want);
        cJSON_Delete(exp);
    }
}

static void test_bad_usage_and_input_exit_with_a_message(void) {
    CHECK(run("", (const char *[]){"tokenize", NULL}) == 2 && strstr(errors, "usage: kiln tokenize"));
    CHECK(run("", (const char *[]){"tokenize", FIXTURES "/gpt2", "--bogus", NULL}) == 2 && strstr(errors, "'--bogus'"));
    CHECK(run("", (const char *[]){"tokenize", FIXTURES "/gpt2", "--skip-special", NULL}) == 2);
    CHECK(run("hi\n", (const char *[]){"tokenize", "/nonexistent/model", NULL}) == 1 &&
          strstr(errors, "/nonexistent/model: cannot open"));
    CHECK(run("[1,2]\nnot json\n", (const char *[]){"tokenize", FIXTURES "/gpt2", "--decode", NULL}) == 1 &&
          strstr(errors, "line 2: not a JSON array of integer ids"));
    CHECK(run("[1,-9]\n", (const char *[]){"tokenize", FIXTURES "/gpt2", "--decode", NULL}) == 1 &&
          strstr(errors, "id -9 at position 1 is negative"));
    CHECK(run("[1,1e10]\n", (const char *[]){"tokenize", FIXTURES "/gpt2", "--decode", NULL}) == 1 &&
          strstr(errors, "not a JSON array of integer ids"));
    /* An id past the vocabulary (a padded embedding's) decodes to nothing, as in the library. */
    CHECK(run("[300,99999,301]\n[300,301]\n", (const char *[]){"tokenize", FIXTURES "/gpt2", "--decode", NULL}) == 0);
    char *nl = strchr(output, '\n');
    CHECK(nl && strncmp(output, nl + 1, (size_t)(nl - output)) == 0);
    CHECK(run("ok\nbad \xC3(\n", (const char *[]){"tokenize", FIXTURES "/gpt2", NULL}) == 1 &&
          strstr(errors, "line 2: kn_tokenizer_encode: the text is not valid UTF-8"));
}

/* The issue 11 repros that made kiln loop forever, through the command, bounded by timeout(1). */
static void test_invalid_utf8_files_are_refused_promptly(void) {
    static const char *files[] = {"tok-lowercase-invalid-added-token.json", "tok-raw-added-token-splits-utf8.json",
                                  "tok-replace-breaks-utf8-then-lowercase.json"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char path[512];
        snprintf(path, sizeof path, FIXTURES "/bad/%s", files[i]);
        FILE *f = fopen(in_path, "wb");
        fputs("ab caf\xC3\xA9 \xC2\xA9\n", f);
        fclose(f);
        int rc = run_program("/usr/bin/timeout", (const char *[]){"-s", "KILL", "120", kiln, "tokenize", path, NULL},
                             in_path, out_path, err_path, NULL);
        read_into(err_path, errors, sizeof errors);
        CHECK_MSG(rc == 1 && strstr(errors, "is not valid UTF-8"), "%s: exit %d, %s", files[i], rc, errors);
    }
}

/* A line of a million ids decodes (indexing each id from the list's start took minutes). */
static void test_decode_of_a_long_line_is_linear(void) {
    enum { N = 1000000 };
    char *line = malloc(N * 4 + 8);
    size_t n = 0;
    line[n++] = '[';
    for (int i = 0; i < N; i++) n += (size_t)sprintf(line + n, i ? ",%d" : "%d", 300 + i % 100);
    strcpy(line + n, "]\n");
    FILE *f = fopen(in_path, "wb");
    fputs(line, f);
    fclose(f);
    int rc = run_program("/usr/bin/timeout", (const char *[]){"-s", "KILL", "120", kiln, "tokenize", FIXTURES "/gpt2",
                                                              "--decode", NULL},
                         in_path, out_path, err_path, NULL);
    CHECK_MSG(rc == 0, "exit %d", rc);
    free(line);
}

/* The ids of a token file (format by the tokenizer's size, as kiln train reads it); NULL if refused. */
static int32_t *read_tokens(const char *path, int64_t vocab, size_t *n) {
    kn_token_file *f = kn_token_file_open(path, vocab > 65536 ? KN_TOKENS_U32 : KN_TOKENS_AUTO, vocab);
    if (!f) return NULL;
    *n = (size_t)kn_token_file_count(f);
    int64_t *wide = malloc(*n * sizeof *wide);
    int32_t *ids = malloc(*n * sizeof *ids);
    if (kn_token_file_read(f, 0, (int64_t)*n, wide) == KN_OK)
        for (size_t i = 0; i < *n; i++) ids[i] = (int32_t)wide[i];
    free(wide);
    kn_token_file_close(f);
    return ids;
}

/* Whether the library's decode gives text back from its ids (not so for every text: Unicode
 * normalization, a special token's name, a leading space SentencePiece drops). */
static bool round_trips(const kn_tokenizer *t, const char *text) {
    int32_t *ids = NULL;
    size_t n = 0;
    bool same = kn_tokenizer_encode(t, text, strlen(text), false, &ids, &n) == KN_OK;
    for (int skip = 0; skip < 2 && same; skip++) {
        char *back = NULL;
        size_t len = 0;
        same = kn_tokenizer_decode(t, ids, n, skip, &back, &len) == KN_OK && strcmp(back, text) == 0;
        free(back);
    }
    free(ids);
    return same;
}

/* The fixture texts that round-trip, lines apart, with blank lines, until the text has `want` bytes. */
static char *corpus(const kn_tokenizer *t, const char *kind, size_t want, size_t *len) {
    cJSON *exp = expected_for(kind);
    size_t cap = want + 8192, n = 0;
    char *s = malloc(cap);
    while (n < want) {
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(exp, "cases")) {
            const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
            if (!round_trips(t, text)) continue;
            size_t k = strlen(text);
            if (n + k + 3 > cap) s = realloc(s, cap *= 2);
            memcpy(s + n, text, k);
            n += k;
            s[n++] = '\n';
        }
        s[n++] = '\n';
    }
    s[n] = '\0';
    *len = n;
    cJSON_Delete(exp);
    return s;
}

static void write_file(const char *path, const char *s, size_t n) {
    FILE *f = fopen(path, "wb");
    fwrite(s, 1, n, f);
    fclose(f);
}

/* kiln tokenize --input: the token file holds the ids of the whole text (as kn_tokenizer_encode
 * gives them), in a format kiln train's reader takes, and decodes back to the text. */
static void test_input_file_becomes_a_token_file_that_decodes_back(void) {
    static const char *kinds[] = {"gpt2", "llama3", "qwen2", "llama2", "llama2_metaspace"};
    char text_path[256], tokens_path[256];
    snprintf(text_path, sizeof text_path, "%s/corpus.txt", tmp_dir);
    snprintf(tokens_path, sizeof tokens_path, "%s/tokens.bin", tmp_dir);
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        char dir[512];
        snprintf(dir, sizeof dir, FIXTURES "/%s", kinds[k]);
        kn_tokenizer *t = kn_tokenizer_load(dir);
        size_t len;
        char *text = corpus(t, kinds[k], 1500000, &len); /* more than a block of input and many segments */
        write_file(text_path, text, len);
        for (int special = 0; special < 2; special++) {
            const char *args[] = {"tokenize", dir, "--input", text_path, "--output", tokens_path,
                                  special ? NULL : "--no-special", NULL};
            remove(tokens_path);
            CHECK_MSG(run("", args) == 0, "%s: %s", kinds[k], errors);
            int32_t *want = NULL, *got = NULL;
            size_t n_want = 0, n_got = 0;
            CHECK(t && kn_tokenizer_encode(t, text, len, special, &want, &n_want) == KN_OK);
            got = t ? read_tokens(tokens_path, kn_tokenizer_vocab_size(t), &n_got) : NULL;
            CHECK_MSG(got && n_got == n_want && memcmp(got, want, n_want * sizeof *got) == 0,
                      "%s: the file holds %zu ids, the whole text encodes to %zu (%s)", kinds[k], n_got, n_want,
                      got ? "" : kn_last_error());
            char *back = NULL;
            size_t back_len = 0;
            CHECK_MSG(got && kn_tokenizer_decode(t, got, n_got, true, &back, &back_len) == KN_OK && back_len == len &&
                          memcmp(back, text, len) == 0,
                      "%s: the token file does not decode back to the text", kinds[k]);
            free(back);
            free(want);
            free(got);
        }
        free(text);
        kn_tokenizer_free(t);
    }
}

/* The ids of text (with the post-processor's tokens) then `then` (none if negative), appended at out[n]. */
static size_t append_encoded(const kn_tokenizer *t, const char *text, int32_t *out, size_t n, int32_t then) {
    int32_t *ids;
    size_t k;
    if (kn_tokenizer_encode(t, text, strlen(text), true, &ids, &k) != KN_OK) return n;
    memcpy(out + n, ids, k * sizeof *ids);
    free(ids);
    n += k;
    if (then >= 0) out[n++] = then;
    return n;
}

/* --eos-between-docs: documents (cut at the separator, which goes) are tokenized one by one with
 * EOS between them (not after the last; an empty document is left out), EOS named by
 * --eos-token, tokenizer_config.json or config.json. */
static void test_documents_get_eos_between_them(void) {
    char model[256], text_path[256], tokens_path[256], path[512];
    snprintf(model, sizeof model, "%s/model", tmp_dir);
    mkdir(model, 0755);
    snprintf(path, sizeof path, "%s/tokenizer.json", model);
    char *json = read_text_file(FIXTURES "/llama2/tokenizer.json");
    write_file(path, json, strlen(json));
    free(json);
    snprintf(text_path, sizeof text_path, "%s/docs.txt", tmp_dir);
    snprintf(tokens_path, sizeof tokens_path, "%s/docs.bin", tmp_dir);
    static const char docs[] = "Hello world\nsecond line\n\nThe next one\n\n\n\nLast, with caf\xC3\xA9";
    write_file(text_path, docs, sizeof docs - 1);
    kn_tokenizer *t = kn_tokenizer_load(model);
    int32_t eos = kn_tokenizer_token_to_id(t, "</s>"), want[256];
    size_t n = append_encoded(t, "Hello world\nsecond line", want, 0, eos);
    n = append_encoded(t, "The next one", want, n, eos);
    n = append_encoded(t, "Last, with caf\xC3\xA9", want, n, -1);
    /* Llama 2 adds BOS to each document: the stream reads <s> doc </s> <s> doc ... */
    CHECK(eos > 0 && want[0] == kn_tokenizer_token_to_id(t, "<s>"));
    const char *sources[] = {"--eos-token", "tokenizer_config.json", "config.json"};
    for (int s = 0; s < 3; s++) {
        if (s == 1) {
            snprintf(path, sizeof path, "%s/tokenizer_config.json", model);
            const char *config = "{\"eos_token\": {\"content\": \"</s>\"}}";
            write_file(path, config, strlen(config));
        }
        if (s == 2) {
            remove(path);
            snprintf(path, sizeof path, "%s/config.json", model);
            const char *config = "{\"eos_token_id\": [2, 7]}";
            write_file(path, config, strlen(config));
        }
        const char *args[] = {"tokenize", model, "--input", text_path, "--output", tokens_path, "--eos-between-docs",
                              s == 0 ? "--eos-token" : NULL, "</s>", NULL};
        CHECK_MSG(run("", args) == 0, "%s: %s", sources[s], errors);
        CHECK_MSG(strstr(errors, "in 3 documents"), "%s: %s", sources[s], errors);
        size_t got_n = 0;
        int32_t *got = read_tokens(tokens_path, kn_tokenizer_vocab_size(t), &got_n);
        CHECK_MSG(got && got_n == n && memcmp(got, want, n * sizeof *got) == 0, "EOS from %s: %zu ids, want %zu",
                  sources[s], got_n, n);
        free(got);
    }
    /* One document a line, by --doc-separator. */
    write_file(text_path, "a b\nc\n", 6);
    CHECK(run("", (const char *[]){"tokenize", model, "--input", text_path, "--output", tokens_path, "--no-special",
                                   "--eos-between-docs", "--doc-separator", "\\n", NULL}) == 0 &&
          strstr(errors, "in 2 documents"));
    kn_tokenizer_free(t);
}

static bool exists(const char *path) { return access(path, F_OK) == 0; }

static void test_token_file_formats_and_errors(void) {
    char text_path[256], tokens_path[256], big[256];
    snprintf(text_path, sizeof text_path, "%s/small.txt", tmp_dir);
    snprintf(tokens_path, sizeof tokens_path, "%s/small.bin", tmp_dir);
    write_file(text_path, "Hello world\n", 12);
    const char *gpt2 = FIXTURES "/gpt2";
    CHECK(run("", (const char *[]){"tokenize", gpt2, "--input", text_path, "--output", tokens_path, "--format", "u32",
                                   NULL}) == 0 && strstr(errors, "(u32)"));
    kn_token_file *f = kn_token_file_open(tokens_path, KN_TOKENS_U32, 512);
    CHECK(f && kn_token_file_count(f) > 1);
    kn_token_file_close(f);
    /* A vocabulary beyond uint16: auto writes u32, and u16 is refused. */
    snprintf(big, sizeof big, "%s/big.json", tmp_dir);
    static const char big_json[] = "{\"added_tokens\": [{\"id\": 70000, \"content\": \"<eos>\", \"special\": true}], "
                                   "\"model\": {\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[[\"a\",\"b\"]]}}";
    write_file(big, big_json, sizeof big_json - 1);
    write_file(text_path, "ab<eos>a", 8);
    CHECK(run("", (const char *[]){"tokenize", big, "--input", text_path, "--output", tokens_path, NULL}) == 0 &&
          strstr(errors, "3 tokens -> ") && strstr(errors, "(u32)"));
    CHECK(run("", (const char *[]){"tokenize", big, "--input", text_path, "--output", tokens_path, "--format", "u16",
                                   NULL}) == 2 && strstr(errors, "use --format u32"));
    /* Bad input: a clear error, and neither the token file nor a temporary left behind. */
    remove(tokens_path);
    write_file(text_path, "fine\nnot \xC3(", 11);
    CHECK(run("", (const char *[]){"tokenize", gpt2, "--input", text_path, "--output", tokens_path, NULL}) == 1 &&
          strstr(errors, "small.txt: kn_encoder_finish: the text is not valid UTF-8 (byte 9)"));
    CHECK(!exists(tokens_path));
    DIR *d = opendir(tmp_dir);
    for (struct dirent *e; d && (e = readdir(d));)
        CHECK_MSG(!strstr(e->d_name, ".tmp"), "temporary file %s left behind", e->d_name);
    if (d) closedir(d);
    write_file(text_path, "", 0);
    CHECK(run("", (const char *[]){"tokenize", gpt2, "--input", text_path, "--output", tokens_path, NULL}) == 1 &&
          strstr(errors, "holds no text"));
    CHECK(run("", (const char *[]){"tokenize", gpt2, "--input", "/nonexistent/x.txt", "--output", tokens_path, NULL}) == 1 &&
          strstr(errors, "--input /nonexistent/x.txt: cannot read it"));
    CHECK(run("", (const char *[]){"tokenize", gpt2, "--input", text_path, NULL}) == 2 && strstr(errors, "go together"));
    CHECK(run("", (const char *[]){"tokenize", gpt2, "--input", tmp_dir, "--output", tokens_path, NULL}) == 1 &&
          strstr(errors, "cannot read it"));
    CHECK(run("", (const char *[]){"tokenize", gpt2, "--input", text_path, "--output", tokens_path, "--eos-between-docs",
                                   "--doc-separator", "", NULL}) == 2 && strstr(errors, "--doc-separator is empty"));
    CHECK(run("", (const char *[]){"tokenize", gpt2, "--doc-separator", "x", NULL}) == 2 &&
          strstr(errors, "--doc-separator: goes with --eos-between-docs"));
    CHECK(run("", (const char *[]){"tokenize", gpt2, "--input", text_path, "--output", tokens_path, "--format", "u8",
                                   NULL}) == 2 && strstr(errors, "--format u8: not a token file format"));
    CHECK(run("", (const char *[]){"tokenize", gpt2, "--input", text_path, "--output", tokens_path, "--eos-between-docs",
                                   NULL}) == 1 && strstr(errors, "name it with --eos-token"));
    CHECK(run("", (const char *[]){"tokenize", gpt2, "--input", text_path, "--output", tokens_path, "--eos-between-docs",
                                   "--eos-token", "<nope>", NULL}) == 1 && strstr(errors, "\"<nope>\" (--eos-token) is not a token"));
    CHECK(run("", (const char *[]){"tokenize", "--help", NULL}) == 0 && strstr(output, "--eos-between-docs") &&
          strstr(output, "[auto:"));
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_cli_tokenize /path/to/kiln\n");
        return 2;
    }
    kiln = argv[1];
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/kiln_cli_tok_XXXXXX");
    if (!mkdtemp(tmp_dir)) return 1;
    snprintf(in_path, sizeof in_path, "%s/in", tmp_dir);
    snprintf(out_path, sizeof out_path, "%s/out", tmp_dir);
    snprintf(err_path, sizeof err_path, "%s/err", tmp_dir);
    RUN(test_lines_encode_to_the_library_ids);
    RUN(test_bad_usage_and_input_exit_with_a_message);
    RUN(test_invalid_utf8_files_are_refused_promptly);
    RUN(test_decode_of_a_long_line_is_linear);
    RUN(test_input_file_becomes_a_token_file_that_decodes_back);
    RUN(test_documents_get_eos_between_them);
    RUN(test_token_file_formats_and_errors);
    remove_tree(tmp_dir);
    return test_summary();
}
