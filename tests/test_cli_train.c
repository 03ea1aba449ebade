/* `kiln train` end to end: loss parity with PyTorch on the committed GPT-2 fixture
 * (tests/fixtures/gpt2_train, made by make_gpt2_train_fixture.py), kill-and-resume giving
 * identical losses, bad checkpoints and options refused, and the adder's loss falling. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#define FIXTURE KILN_SOURCE_DIR "/tests/fixtures/gpt2_train"
#define MAX_LOG 64

static const char *kiln;
static char tmp[256];
static char out_path[512];

static const char *const two_threads[] = {"KILN_THREADS=2", NULL};

/* Runs kiln with args (NULL-terminated), stdout and stderr into out_path; the exit code. */
static int run(const char *const *args) { return run_program(kiln, args, NULL, out_path, NULL, two_threads); }

static bool output_has(const char *needle) {
    char *s = read_text_file(out_path);
    bool ok = s && strstr(s, needle);
    if (!ok) fprintf(stderr, "  expected \"%s\" in the output:\n%s\n", needle, s ? s : "(none)");
    free(s);
    return ok;
}

/* The loss (and grad_norm) of each step of a JSONL log, indexed by step; returns the count. */
static int read_log(const char *path, double *loss, double *grad_norm) {
    char *text = read_text_file(path);
    int n = 0;
    for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        cJSON *o = cJSON_Parse(line);
        const cJSON *step = cJSON_GetObjectItem(o, "step");
        if (cJSON_IsNumber(step) && step->valueint < MAX_LOG) {
            loss[step->valueint] = cJSON_GetObjectItem(o, "loss")->valuedouble;
            if (grad_norm) grad_norm[step->valueint] = cJSON_GetObjectItem(o, "grad_norm")->valuedouble;
            if (step->valueint + 1 > n) n = step->valueint + 1;
        }
        cJSON_Delete(o);
    }
    free(text);
    return n;
}

/* The fixture's command with its files resolved, extra args appended. */
static int run_fixture(const char *log, const char *const *extra) {
    char *text = read_text_file(FIXTURE "/expected.json");
    cJSON *e = cJSON_Parse(text);
    free(text);
    static char paths[8][600];
    const char *args[96];
    int n = 0, np = 0;
    const cJSON *a;
    cJSON_ArrayForEach(a, cJSON_GetObjectItem(e, "kiln_args")) {
        const char *s = a->valuestring;
        if (strstr(s, ".json") || strstr(s, ".safetensors") || strstr(s, ".bin")) {
            snprintf(paths[np], sizeof paths[np], "%s/%s", strstr(s, "log.") ? tmp : FIXTURE, strstr(s, "log.") ? log : s);
            s = paths[np++];
        }
        args[n++] = s; /* lives until e is deleted, after the run */
    }
    for (int i = 0; extra && extra[i]; i++) args[n++] = extra[i];
    args[n] = NULL;
    int rc = run(args);
    cJSON_Delete(e);
    return rc;
}

static void test_loss_parity_with_pytorch(void) {
    CHECK(run_fixture("parity.jsonl", NULL) == 0);
    char log[600];
    snprintf(log, sizeof log, "%s/parity.jsonl", tmp);
    double loss[MAX_LOG] = {0}, gnorm[MAX_LOG] = {0};
    int n = read_log(log, loss, gnorm);
    char *text = read_text_file(FIXTURE "/expected.json");
    cJSON *e = cJSON_Parse(text);
    free(text);
    const cJSON *steps = cJSON_GetObjectItem(e, "steps");
    CHECK_MSG(n == cJSON_GetArraySize(steps), "the log has %d steps, the fixture %d", n, cJSON_GetArraySize(steps));
    for (int i = 0; i < n && i < cJSON_GetArraySize(steps); i++) {
        const cJSON *s = cJSON_GetArrayItem(steps, i);
        double want = cJSON_GetObjectItem(s, "loss")->valuedouble;
        double want_norm = cJSON_GetObjectItem(s, "grad_norm")->valuedouble;
        double tol = i == 0 ? 1e-5 : 1e-3; /* the targets: step 1, then 20 AdamW steps */
        CHECK_MSG(fabs(loss[i] - want) <= tol * fabs(want), "step %d: loss %.9g, PyTorch %.9g", i, loss[i], want);
        CHECK_MSG(fabs(gnorm[i] - want_norm) <= 10 * tol * want_norm, "step %d: grad norm %.9g, PyTorch %.9g", i,
                  gnorm[i], want_norm);
    }
    cJSON_Delete(e);
}

static void test_kill_and_resume_is_exact(void) {
    char full[600], cut[600], dir_a[600], dir_b[600];
    snprintf(full, sizeof full, "%s/full.jsonl", tmp);
    snprintf(cut, sizeof cut, "%s/cut.jsonl", tmp);
    snprintf(dir_a, sizeof dir_a, "%s/ckpt-a", tmp);
    snprintf(dir_b, sizeof dir_b, "%s/ckpt-b", tmp);
    CHECK(run_fixture("full.jsonl", (const char *[]){"--save", dir_a, "--save-every", "5", NULL}) == 0);
    /* Killed after step 12 (its newest checkpoint is at 10), then resumed. */
    CHECK(run_fixture("cut.jsonl", (const char *[]){"--save", dir_b, "--save-every", "5", "--abort-after", "12", NULL}) == 137);
    CHECK(run_fixture("cut.jsonl", (const char *[]){"--save", dir_b, "--save-every", "5", "--resume", dir_b, NULL}) == 0);
    CHECK(output_has("resumed from"));
    double a[MAX_LOG] = {0}, b[MAX_LOG] = {0};
    CHECK(read_log(full, a, NULL) == 20 && read_log(cut, b, NULL) == 20);
    for (int i = 0; i < 20; i++) CHECK_MSG(a[i] == b[i], "step %d: %.9g uninterrupted, %.9g resumed", i, a[i], b[i]);
}

static void test_bad_checkpoints_and_options(void) {
    char dir[600], file[700];
    snprintf(dir, sizeof dir, "%s/ckpt-a", tmp);
    /* A different model shape: the first mismatching tensor is named. */
    CHECK(run((const char *[]){"train", "gpt2", "--n-layer", "2", "--n-head", "2", "--n-embd", "16", "--vocab", "64",
                               "--block", "32", "--data", FIXTURE "/tokens.bin", "--seq", "16", "--steps", "21",
                               "--resume", dir, NULL}) == 1);
    CHECK(output_has("transformer.wte.weight"));
    /* A truncated weights file. */
    snprintf(file, sizeof file, "%s/step-00000020/model.safetensors", dir);
    CHECK(truncate(file, 100) == 0);
    CHECK(run_fixture("bad.jsonl", (const char *[]){"--resume", dir, NULL}) == 1);
    CHECK(output_has("model.safetensors"));
    snprintf(file, sizeof file, "%s/nothing-here", tmp);
    CHECK(run_fixture("bad.jsonl", (const char *[]){"--resume", file, NULL}) == 1);
    CHECK(output_has("no checkpoint"));
    CHECK(run((const char *[]){"train", "gpt2", "--data", "/nonexistent.bin", NULL}) != 0);
    CHECK(output_has("/nonexistent.bin"));
    CHECK(run((const char *[]){"train", "gpt2", "--bogus", NULL}) == 2 && output_has("--bogus"));
    CHECK(run((const char *[]){"train", "gpt2", "--lr", "fast", NULL}) == 2 && output_has("--lr fast"));
    CHECK(run((const char *[]){"train", "gpt2", "--config", FIXTURE "/tokens.bin", "--data", FIXTURE "/tokens.bin", NULL}) == 2);
    CHECK(output_has("not valid JSON"));
    CHECK(run((const char *[]){"train", "nosuch", NULL}) == 2 && output_has("unknown task"));
}

static void test_adder_learns(void) {
    char log[600];
    snprintf(log, sizeof log, "%s/adder.jsonl", tmp);
    CHECK(run((const char *[]){"train", "adder", "--steps", "250", "--log", log, NULL}) == 0);
    CHECK(output_has("accuracy"));
    double loss[MAX_LOG * 4] = {0};
    int n = 0;
    char *text = read_text_file(log);
    for (char *line = text ? strtok(text, "\n") : NULL; line && n < MAX_LOG * 4; line = strtok(NULL, "\n")) {
        cJSON *o = cJSON_Parse(line);
        loss[n++] = cJSON_GetObjectItem(o, "loss")->valuedouble;
        cJSON_Delete(o);
    }
    free(text);
    CHECK_MSG(n == 250 && loss[n - 1] < 0.5 * loss[0], "loss %.4f -> %.4f over %d steps", loss[0], loss[n - 1], n);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_cli_train PATH/TO/kiln\n");
        return 2;
    }
    kiln = argv[1];
    snprintf(tmp, sizeof tmp, "/tmp/kiln-train-XXXXXX");
    if (!mkdtemp(tmp)) return 1;
    snprintf(out_path, sizeof out_path, "%s/output.txt", tmp);
    RUN(test_loss_parity_with_pytorch);
    RUN(test_kill_and_resume_is_exact);
    RUN(test_bad_checkpoints_and_options);
    RUN(test_adder_learns);
    remove_tree(tmp);
    return test_summary();
}
