/* `kiln tokenize`: lines of text to the ids the Hugging Face library gives (fixtures of
 * tests/fixtures/make_tokenizer_fixtures.py) and back with --decode; bad usage exits 2 and bad
 * input exits 1, each with a message. */
#define _GNU_SOURCE /* mkdtemp */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

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
    CHECK(run("[1,99999]\n", (const char *[]){"tokenize", FIXTURES "/gpt2", "--decode", NULL}) == 1 &&
          strstr(errors, "id 99999 at position 1 is out of range"));
    CHECK(run("ok\nbad \xC3(\n", (const char *[]){"tokenize", FIXTURES "/gpt2", NULL}) == 1 &&
          strstr(errors, "line 2: kn_tokenizer_encode: the text is not valid UTF-8"));
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
    remove_tree(tmp_dir);
    return test_summary();
}
