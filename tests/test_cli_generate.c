/* `kiln generate` and `kiln train llama` end to end on the tiny models of tests/fixtures/lm/:
 * transformers' greedy ids (generate.json), batches, stop strings, the closing line, bad input,
 * and a fine-tuned checkpoint that `kiln generate` loads. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define FIXTURES KILN_SOURCE_DIR "/tests/fixtures"

static const char *kiln;
static cJSON *fixture;
static char tmp[256];
static char out_path[512], err_path[512];

static const char *const two_threads[] = {"KILN_THREADS=2", NULL};

/* Runs kiln with args (NULL-terminated), stdout and stderr into their files; the exit code. */
static int run(const char *const *args) { return run_program(kiln, args, NULL, out_path, err_path, two_threads); }

/* "[1, 2, 3]" as a fixture array prints it. */
static void ids_text(const cJSON *a, char *out, size_t cap) {
    size_t n = (size_t)snprintf(out, cap, "[");
    const cJSON *v;
    cJSON_ArrayForEach(v, a) n += (size_t)snprintf(out + n, cap - n, "%s%d", n > 1 ? ", " : "", v->valueint);
    snprintf(out + n, cap - n, "]");
}

static void ids_arg(const cJSON *a, char *out, size_t cap) {
    size_t n = 0;
    const cJSON *v;
    out[0] = '\0';
    cJSON_ArrayForEach(v, a) n += (size_t)snprintf(out + n, cap - n, "%s%d", n ? "," : "", v->valueint);
}

static const char *model_dir(const char *name) {
    static char dir[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(dir[k], sizeof dir[k], FIXTURES "/lm/%s", name);
    return dir[k];
}

/* In every mode: the same ids as transformers' greedy search. */
static void test_greedy_ids_match_transformers(void) {
    const cJSON *model, *prompts = cJSON_GetObjectItem(fixture, "prompts");
    const char *modes[] = {"strict", "fused", "compiled"};
    for (int k = 0; k < 3; k++) cJSON_ArrayForEach(model, cJSON_GetObjectItem(fixture, "models")) {
        char p0[256], p1[256], want[512];
        ids_arg(cJSON_GetArrayItem(prompts, 0), p0, sizeof p0);
        ids_arg(cJSON_GetArrayItem(prompts, 2), p1, sizeof p1);
        const char *args[] = {"generate", model_dir(model->string), "--prompt-ids", p0, "--prompt-ids", p1,
                              "--temperature", "0", "--max-new-tokens", "10", "--print-ids", "--mode", modes[k], NULL};
        /* compiled mode: the prefill and decode programs never recompile (the KV length grows
         * inside them) */
        if (k == 2) setenv("KILN_RECOMPILE", "error", 1);
        CHECK_MSG(run(args) == 0, "%s, %s mode: kiln generate failed", model->string, modes[k]);
        unsetenv("KILN_RECOMPILE");
        /* one line per prompt, in order */
        char *out = read_text_file(out_path);
        char *second = out ? strchr(out, '\n') : NULL;
        if (second) *second++ = '\0';
        ids_text(cJSON_GetArrayItem(cJSON_GetObjectItem(model, "greedy"), 0), want, sizeof want);
        CHECK_MSG(out && strcmp(out, want) == 0, "%s, %s mode: row 0 %s, transformers %s", model->string, modes[k],
                  out ? out : "", want);
        ids_text(cJSON_GetArrayItem(cJSON_GetObjectItem(model, "greedy"), 2), want, sizeof want);
        CHECK_MSG(second && strncmp(second, want, strlen(want)) == 0, "%s, %s mode: row 1 %s, transformers %s",
                  model->string, modes[k], second ? second : "", want);
        free(out);
        CHECK(file_has(err_path, "prefill: 16 tokens in"));
        CHECK(file_has(err_path, "tok/s); decode: 18 tokens in"));
    }
}

/* A copy of a fixture model without its tokenizer (links in tmp). */
static const char *without_tokenizer(const char *name) {
    static char dir[512];
    char link[700], target[700];
    snprintf(dir, sizeof dir, "%s/%s", tmp, name);
    mkdir(dir, 0777);
    const char *files[] = {"config.json", "model.safetensors", "generation_config.json"};
    for (int i = 0; i < 3; i++) {
        snprintf(link, sizeof link, "%s/%s", dir, files[i]);
        snprintf(target, sizeof target, FIXTURES "/lm/%s/%s", name, files[i]);
        unlink(link);
        CHECK(symlink(target, link) == 0);
    }
    return dir;
}

static void test_text_is_streamed_and_cut_at_a_stop_string(void) {
    const cJSON *ref = cJSON_GetObjectItem(cJSON_GetObjectItem(fixture, "models"), "qwen2");
    const cJSON *t = cJSON_GetObjectItem(ref, "text");
    const char *dir = model_dir("qwen2");
    const char *prompt = cJSON_GetObjectItem(t, "prompt_text")->valuestring;
    char want[512];
    const char *plain[] = {"generate", dir, "--prompt", prompt, "--max-new-tokens", "12", NULL};
    CHECK(run(plain) == 0);
    snprintf(want, sizeof want, "%s\n", cJSON_GetObjectItem(t, "text")->valuestring);
    char *out = read_text_file(out_path);
    CHECK_MSG(out && strcmp(out, want) == 0, "stdout \"%s\", transformers \"%s\"", out ? out : "", want);
    free(out);
    const char *stop = cJSON_GetObjectItem(t, "stop")->valuestring;
    const char *stopped[] = {"generate", dir, "--prompt", prompt, "--max-new-tokens", "12", "--stop", stop, "--stop", "never",
                             NULL};
    CHECK(run(stopped) == 0);
    snprintf(want, sizeof want, "%s\n", cJSON_GetObjectItem(t, "before_stop")->valuestring);
    out = read_text_file(out_path);
    CHECK_MSG(out && strcmp(out, want) == 0, "stop \"%s\": stdout \"%s\", want \"%s\"", stop, out ? out : "", want);
    free(out);

    /* --prompt-file: one batch, each row labelled */
    char file[600];
    snprintf(file, sizeof file, "%s/prompts.txt", tmp);
    FILE *f = fopen(file, "w");
    fprintf(f, "%s\n\nkiln\n", prompt);
    fclose(f);
    const char *batch[] = {"generate", dir, "--prompt-file", file, "--max-new-tokens", "12", NULL};
    CHECK(run(batch) == 0);
    snprintf(want, sizeof want, "--- 1: %s ---\n%s\n--- 2: kiln ---\n", prompt, cJSON_GetObjectItem(t, "text")->valuestring);
    out = read_text_file(out_path);
    CHECK_MSG(out && strncmp(out, want, strlen(want)) == 0, "stdout \"%s\", want it to start \"%s\"", out ? out : "", want);
    free(out);
    CHECK(file_has(err_path, "prefill: "));
}

static void test_bad_input_is_a_clear_error(void) {
    char long_ids[1024] = "0";
    for (int i = 1; i < 65; i++) strcat(long_ids, ",1");
    const char *too_long[] = {"generate", model_dir("gpt2"), "--prompt-ids", long_ids, NULL};
    CHECK(run(too_long) == 1);
    CHECK(file_has(err_path, "65 tokens"));
    CHECK(file_has(err_path, "64"));
    const char *missing[] = {"generate", "/nonexistent/model", "--prompt-ids", "1,2", NULL};
    CHECK(run(missing) == 1);
    CHECK(file_has(err_path, "/nonexistent/model"));
    const char *no_tokenizer[] = {"generate", without_tokenizer("gpt2"), "--prompt", "hello", NULL};
    CHECK(run(no_tokenizer) == 1);
    CHECK(file_has(err_path, "tokenizer.json"));
    const char *cuda[] = {"generate", model_dir("gpt2"), "--prompt-ids", "1,2", "--device", "cuda", NULL};
    CHECK(run(cuda) == 2);
    CHECK(file_has(err_path, "no CUDA backend"));
    const char *bad_ids[] = {"generate", model_dir("gpt2"), "--prompt-ids", "1,x", NULL};
    CHECK(run(bad_ids) == 1);
    CHECK(file_has(err_path, "--prompt-ids 1,x"));
    const char *two_sources[] = {"generate", model_dir("gpt2"), "--prompt-ids", "1", "--prompt", "a", NULL};
    CHECK(run(two_sources) == 2);
    const char *help[] = {"help", NULL};
    CHECK(run(help) == 0);
    CHECK(file_has(out_path, "generate"));
}

/* Weights are read in place (mmap): a file cut short under a running generate faults with
 * SIGBUS at the next read of a lost page. kiln names the model directory, then dies of the
 * signal as before. The signal is sent once kiln waits on its prompt file (a FIFO), by which
 * time its handler is set. */
static void test_sigbus_is_explained_naming_the_model_directory(void) {
    char fifo[600];
    snprintf(fifo, sizeof fifo, "%s/prompts.fifo", tmp);
    unlink(fifo);
    CHECK(mkfifo(fifo, 0600) == 0);
    const char *dir = model_dir("llama2");
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644), out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (err < 0 || out < 0 || dup2(err, 2) < 0 || dup2(out, 1) < 0 || putenv((char *)two_threads[0]) != 0) _exit(127);
        execl(kiln, kiln, "generate", dir, "--prompt-file", fifo, (char *)NULL);
        _exit(127);
    }
    /* a writer opens without blocking once kiln holds the FIFO for reading (a minute at most) */
    int writer = -1, status = 0;
    for (int tries = 0; pid > 0 && writer < 0 && tries < 6000 && waitpid(pid, &status, WNOHANG) == 0; tries++) {
        writer = open(fifo, O_WRONLY | O_NONBLOCK);
        if (writer < 0) nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
    }
    CHECK_MSG(writer >= 0, "kiln generate never opened its prompt file");
    if (pid > 0 && writer >= 0) {
        kill(pid, SIGBUS);
        waitpid(pid, &status, 0);
    }
    if (writer >= 0) close(writer);
    CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS, "kiln generate did not end by SIGBUS (status %d)", status);
    CHECK(file_has(err_path, "kiln generate: SIGBUS: a file it reads in place (memory-mapped) shrank or was replaced"));
    CHECK(file_has(err_path, dir));
    unlink(fifo);
}

/* A token file that repeats a short cycle: easy to learn, so the loss falls in a few steps. */
static void write_tokens(const char *path) {
    uint32_t tokens[2048];
    for (int i = 0; i < 2048; i++) tokens[i] = (uint32_t)(10 + (i * 7) % 23);
    CHECK(kn_token_file_write(path, tokens, 2048, KN_TOKENS_U16) == KN_OK);
}

static double log_loss(const char *path, bool last) {
    char *text = read_text_file(path);
    double loss = NAN;
    for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        cJSON *o = cJSON_Parse(line);
        loss = cJSON_GetObjectItem(o, "loss")->valuedouble;
        cJSON_Delete(o);
        if (!last) break;
    }
    free(text);
    return loss;
}

static void test_fine_tuning_lowers_the_loss_and_saves_a_model_generate_loads(void) {
    char data[600], save[600], log[600];
    snprintf(data, sizeof data, "%s/tokens.bin", tmp);
    snprintf(save, sizeof save, "%s/tuned", tmp);
    snprintf(log, sizeof log, "%s/train.jsonl", tmp);
    write_tokens(data);
    const char *dir = model_dir("llama2");
    const char *train[] = {"train", "llama", "--init", dir, "--data", data, "--steps", "12", "--batch", "4", "--seq", "32",
                           "--lr", "3e-3", "--log", log, "--save", save, "--quiet", NULL};
    CHECK(run(train) == 0);
    double first = log_loss(log, false), last = log_loss(log, true);
    CHECK_MSG(last < 0.7 * first, "loss %g -> %g: fine-tuning did not lower it", first, last);
    const char *gen[] = {"generate", save, "--prompt-ids", "10,17,24", "--max-new-tokens", "6", "--print-ids", NULL};
    CHECK(run(gen) == 0);
    /* the file steps through 10 + (7 i mod 23): 10 17 24 31 15 22 29 ... and the model learned it */
    CHECK(file_has(out_path, "[31, 15, 22, 29"));
    const char *text[] = {"generate", save, "--prompt", "kiln", "--max-new-tokens", "4", NULL};
    CHECK(run(text) == 0); /* the tokenizer was copied beside the weights */

    const char *wrong[] = {"train", "qwen2", "--init", dir, "--data", data, "--steps", "1", NULL};
    CHECK(run(wrong) == 2);
    CHECK(file_has(err_path, "llama"));
    const char *no_init[] = {"train", "llama", "--data", data, NULL};
    CHECK(run(no_init) == 2);
    CHECK(file_has(err_path, "--init"));
}

/* A copy of the GPT-2 fixture whose tokenizer lacks the ids from `from` up (dropped from the
 * vocabulary, the merges that make them and the added tokens), as a real checkpoint's embedding
 * has rows past its tokenizer (Qwen2.5: 151936 for 151665 ids). */
static const char *with_short_tokenizer(int from) {
    static char dir[512];
    char link[700], target[700];
    snprintf(dir, sizeof dir, "%s/gpt2_padded", tmp);
    mkdir(dir, 0777);
    const char *files[] = {"config.json", "model.safetensors", "generation_config.json"};
    for (int i = 0; i < 3; i++) {
        snprintf(link, sizeof link, "%s/%s", dir, files[i]);
        snprintf(target, sizeof target, FIXTURES "/lm/gpt2/%s", files[i]);
        unlink(link);
        CHECK(symlink(target, link) == 0);
    }
    char *text = read_text_file(FIXTURES "/lm/gpt2/tokenizer.json");
    cJSON *j = cJSON_Parse(text), *model = cJSON_GetObjectItem(j, "model");
    cJSON *vocab = cJSON_GetObjectItem(model, "vocab"), *merges = cJSON_GetObjectItem(model, "merges");
    cJSON *added = cJSON_GetObjectItem(j, "added_tokens");
    free(text);
    for (cJSON *v = vocab->child, *next; v; v = next) {
        next = v->next;
        if (v->valueint >= from) cJSON_Delete(cJSON_DetachItemViaPointer(vocab, v));
    }
    for (cJSON *m = merges->child, *next; m; m = next) {
        next = m->next;
        char joined[256];
        snprintf(joined, sizeof joined, "%s%s", cJSON_GetArrayItem(m, 0)->valuestring, cJSON_GetArrayItem(m, 1)->valuestring);
        if (!cJSON_GetObjectItemCaseSensitive(vocab, joined)) cJSON_Delete(cJSON_DetachItemViaPointer(merges, m));
    }
    for (cJSON *a = added->child, *next; a; a = next) {
        next = a->next;
        if (cJSON_GetObjectItem(a, "id")->valueint >= from) cJSON_Delete(cJSON_DetachItemViaPointer(added, a));
    }
    char path[700], *json = cJSON_PrintUnformatted(j);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *f = fopen(path, "w");
    fputs(json, f);
    fclose(f);
    free(json);
    cJSON_Delete(j);
    return dir;
}

/* Greedy generation from this prompt picks ids 406 and 470 (generation used to abort on them):
 * they print as nothing, as the library decodes them, streamed or not. */
static void test_ids_past_the_tokenizer_print_as_nothing(void) {
    const char *dir = with_short_tokenizer(400);
    const char *ids[] = {"generate", dir, "--prompt", "hello world", "--temperature", "0", "--max-new-tokens", "24",
                         "--ignore-eos", "--print-ids", NULL};
    CHECK(run(ids) == 0);
    char *printed = read_text_file(out_path);
    cJSON *got = printed ? cJSON_Parse(printed) : NULL;
    free(printed);
    int32_t v[64];
    size_t n = 0, past = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, got) if (n < 64) past += (v[n++] = it->valueint) >= 400;
    cJSON_Delete(got);
    CHECK_MSG(past > 0, "the generated ids have none past the tokenizer: the test shows nothing");
    kn_tokenizer *t = kn_tokenizer_load(dir);
    char *want = NULL;
    size_t len = 0;
    CHECK(t && kn_tokenizer_decode(t, v, n, true, &want, &len) == KN_OK);
    for (int stream = 0; stream < 2; stream++) {
        const char *text[] = {"generate", dir, "--prompt", "hello world", "--temperature", "0", "--max-new-tokens",
                              "24", "--ignore-eos", stream ? NULL : "--no-stream", NULL};
        CHECK_MSG(run(text) == 0, "streamed %d: kiln generate failed", stream);
        char *out = read_text_file(out_path);
        CHECK_MSG(out && want && strncmp(out, want, len) == 0 && strcmp(out + len, "\n") == 0,
                  "streamed %d: printed \"%s\", want \"%s\"", stream, out ? out : "", want ? want : "");
        free(out);
    }
    free(want);
    kn_tokenizer_free(t);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_cli_generate PATH_TO_KILN\n");
        return 2;
    }
    kiln = argv[1];
    char *text = read_text_file(FIXTURES "/lm/generate.json");
    fixture = cJSON_Parse(text);
    free(text);
    snprintf(tmp, sizeof tmp, "/tmp/kiln_test_cli_generate_XXXXXX");
    if (!fixture || !mkdtemp(tmp)) return 1;
    snprintf(out_path, sizeof out_path, "%s/stdout", tmp);
    snprintf(err_path, sizeof err_path, "%s/stderr", tmp);
    RUN(test_greedy_ids_match_transformers);
    RUN(test_text_is_streamed_and_cut_at_a_stop_string);
    RUN(test_bad_input_is_a_clear_error);
    RUN(test_sigbus_is_explained_naming_the_model_directory);
    RUN(test_ids_past_the_tokenizer_print_as_nothing);
    RUN(test_fine_tuning_lowers_the_loss_and_saves_a_model_generate_loads);
    cJSON_Delete(fixture);
    remove_tree(tmp);
    return test_summary();
}
