/* `kiln train dlrm|unet|mingpt` end to end with tiny step counts: the lines they print, the
 * files they write (PNG images that libpng reads back, the loss curve), and clear errors for
 * bad input (a missing or non-UTF-8 text file, a samples directory that cannot be made or
 * written) before any training, and a killed DLRM run resuming to the same result. Every
 * training task gives strict mode's losses in compiled mode (5 steps; the GPT-2 task 20)
 * without a recompile, and a second process on a warm cache compiles nothing. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <math.h>
#include <png.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static const char *kiln;
static char tmp[256], out_path[512];

/* Runs kiln with args (NULL-terminated), stdout and stderr into out_path; the exit code. */
static int run(const char *const *args) { return run_program(kiln, args, NULL, out_path, NULL, NULL); }

static bool output_contains(const char *needle) { return file_contains(out_path, needle); }
static bool output_has(const char *needle) { return file_has(out_path, needle); }

/* The number after `label` in the output, NaN if absent. */
static double output_number(const char *label) {
    char *s = read_text_file(out_path), *at = s ? strstr(s, label) : NULL;
    double v = at ? strtod(at + strlen(label), NULL) : NAN;
    free(s);
    return v;
}

static void write_file(const char *path, const char *text, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(text, 1, n, f) == n);
    if (f) fclose(f);
}

static void test_dlrm_learns_a_held_out_auc(void) {
    const char *args[] = {"train", "dlrm", "--steps", "60", "--eval-count", "4000", "--eval-every", "30", NULL};
    CHECK(run(args) == 0);
    CHECK(output_has("held-out after 30 steps: AUC"));
    CHECK(output_has("generator (Bayes-optimal): AUC"));
    double auc = output_number("held-out AUC "), bayes = output_number("generator (Bayes-optimal): AUC ");
    CHECK_MSG(auc > 0.65 && auc < bayes, "held-out AUC %g after 60 steps (Bayes-optimal %g)", auc, bayes);
    CHECK(output_number("log loss ") > 0);
}

/* A run killed after 10 steps and resumed prints what an uninterrupted run prints. */
static void test_dlrm_resumes_exactly(void) {
    char ck[320];
    snprintf(ck, sizeof ck, "%s/dlrm-ck", tmp);
    const char *whole[] = {"train", "dlrm", "--steps", "20", "--eval-every", "0", "--quiet", NULL};
    CHECK(run(whole) == 0);
    char *expected = read_text_file(out_path);
    const char *killed[] = {"train", "dlrm", "--steps", "20", "--save", ck, "--save-every", "10", "--abort-after", "10", "--quiet", NULL};
    CHECK(run(killed) == 137);
    const char *resumed[] = {"train", "dlrm", "--steps", "20", "--eval-every", "0", "--quiet", "--resume", ck, NULL};
    CHECK(run(resumed) == 0);
    char *got = read_text_file(out_path);
    CHECK(expected && got && strstr(expected, "held-out AUC") && strcmp(expected, got) == 0);
    free(expected);
    free(got);
}

static bool png_size(const char *path, int *w, int *h) {
    png_image img = {.version = PNG_IMAGE_VERSION};
    bool ok = png_image_begin_read_from_file(&img, path);
    *w = (int)img.width, *h = (int)img.height;
    png_image_free(&img);
    return ok;
}

static void test_unet_writes_samples_and_loss_curve(void) {
    char dir[320], path[400];
    snprintf(dir, sizeof dir, "%s/samples", tmp);
    const char *args[] = {"train", "unet", "--steps", "4", "--batch", "4", "--num-samples", "4", "--samples", dir, NULL};
    CHECK(run(args) == 0);
    CHECK(output_has("loss (mean of each tenth of the run):"));
    CHECK(output_has("4 images sampled in 100 DDPM steps"));
    int w = 0, h = 0;
    snprintf(path, sizeof path, "%s/samples.png", dir);
    CHECK(png_size(path, &w, &h) && w == 2 * 17 + 1 && h == 2 * 17 + 1); /* 2x2 grid of 16x16 */
    snprintf(path, sizeof path, "%s/data.png", dir);
    CHECK(png_size(path, &w, &h) && w == 8 * 17 + 1);
    snprintf(path, sizeof path, "%s/loss.csv", dir);
    char *csv = read_text_file(path);
    CHECK(csv && strncmp(csv, "step,loss\n1,", 12) == 0 && strstr(csv, "\n4,"));
    free(csv);
}

/* Resuming a finished run redoes its end-of-run work only: new samples, the same loss curve
 * (the resumed run trained no step of its own to put in it). */
static void test_unet_resumed_at_its_end_keeps_its_loss_curve(void) {
    char dir[320], ck[340], csv[340];
    snprintf(dir, sizeof dir, "%s/samples-resumed", tmp);
    snprintf(ck, sizeof ck, "%s/ck", dir);
    snprintf(csv, sizeof csv, "%s/loss.csv", dir);
    const char *args[] = {"train", "unet", "--steps", "3", "--batch", "4", "--num-samples", "4", "--samples", dir,
                          "--save", ck, "--quiet", NULL, NULL, NULL};
    CHECK(run(args) == 0);
    char *before = read_text_file(csv), *printed = read_text_file(out_path);
    args[13] = "--resume", args[14] = ck;
    CHECK(run(args) == 0);
    char *after = read_text_file(csv), *again = read_text_file(out_path);
    CHECK(before && after && strncmp(before, "step,loss\n1,", 12) == 0 && strcmp(before, after) == 0);
    CHECK(printed && again && strcmp(printed, again) == 0); /* the curve's tenths, the samples line */
    free(before);
    free(after);
    free(printed);
    free(again);
}

static void test_unet_refuses_a_directory_it_cannot_use(void) {
    char file[320], dir[400];
    snprintf(file, sizeof file, "%s/not-a-dir", tmp);
    write_file(file, "x", 1);
    snprintf(dir, sizeof dir, "%s/sub", file);
    const char *args[] = {"train", "unet", "--steps", "2", "--samples", dir, NULL};
    CHECK(run(args) == 1);
    CHECK(output_has("cannot create the samples directory"));
    CHECK(output_has("not-a-dir/sub"));
    CHECK(!output_contains("step 1/")); /* refused before training */
    /* A directory that exists but takes no files. */
    const char *proc[] = {"train", "unet", "--steps", "2", "--samples", "/proc", NULL};
    CHECK(run(proc) == 1);
    CHECK(output_has("/proc/data.png"));
}

static void test_mingpt_trains_and_samples(void) {
    char text[320];
    snprintf(text, sizeof text, "%s/text.txt", tmp);
    /* A small text with a pattern to learn, and one non-ASCII character. */
    static char buf[8192];
    size_t n = 0;
    for (int i = 0; n + 64 < sizeof buf; i++) n += (size_t)snprintf(buf + n, sizeof buf - n, "the cat sat on mat %d. café\n", i % 10);
    write_file(text, buf, n);
    const char *args[] = {"train", "mingpt", "--data", text, "--steps", "20", "--n-layer", "1", "--n-head", "2",
                          "--n-embd", "32", "--seq", "32", "--batch", "8", "--eval-every", "10", "--num-samples", "40", NULL};
    CHECK(run(args) == 0);
    CHECK(output_has("step 10: train loss"));
    CHECK(output_has("step 20: train loss"));
    CHECK(output_has("sample (temperature 0.8):"));
    double train = output_number("step 20: train loss "), val = output_number("val loss ");
    double vocab = output_number(" characters, ");
    CHECK(vocab == 24); /* "the cat sat on mat. caf\n", ten digits and e-acute */
    CHECK_MSG(train > 0 && train < log(vocab) - 0.5 && val > 0, "train loss %g, val loss %g (uniform over %g characters: %g)",
              train, val, vocab, log(vocab));
}

static void test_mingpt_bad_text_files(void) {
    char path[320];
    snprintf(path, sizeof path, "%s/missing.txt", tmp);
    const char *no_data[] = {"train", "mingpt", "--steps", "1", NULL}; /* no default text outside the repository */
    CHECK(run(no_data) == 2);
    CHECK(output_has("--data FILE.txt is required"));
    const char *missing[] = {"train", "mingpt", "--data", path, "--steps", "1", NULL};
    CHECK(run(missing) == 1);
    CHECK(output_has("cannot read the text file"));
    CHECK(output_has("missing.txt"));
    snprintf(path, sizeof path, "%s/latin1.txt", tmp);
    static char bad[4000];
    memset(bad, 'a', sizeof bad);
    bad[1234] = (char)0xE9; /* Latin-1 e-acute: not UTF-8 */
    write_file(path, bad, sizeof bad);
    const char *latin1[] = {"train", "mingpt", "--data", path, "--steps", "1", NULL};
    CHECK(run(latin1) == 1);
    CHECK(output_has("not UTF-8 text (bad byte 0xe9 at offset 1234)"));
    snprintf(path, sizeof path, "%s/short.txt", tmp);
    write_file(path, "too short", 9);
    const char *short_text[] = {"train", "mingpt", "--data", path, "--steps", "1", NULL};
    CHECK(run(short_text) == 1);
    CHECK(output_has("too short"));
}

/* The weights file of dir's newest checkpoint (DIR/latest names it), into out. */
static bool checkpoint_weights(const char *dir, char *out, size_t n) {
    char latest[400];
    snprintf(latest, sizeof latest, "%s/latest", dir);
    char *name = read_text_file(latest);
    if (name) name[strcspn(name, "\n")] = 0;
    bool ok = name && (size_t)snprintf(out, n, "%s/%s/model.safetensors", dir, name) < n;
    free(name);
    CHECK_MSG(ok, "no checkpoint in %s", dir);
    return ok;
}

/* --init is honoured, not ignored: a missing file is an error naming it, a checkpoint's
 * weights of the same model load, and weights of another shape are refused. */
static void test_init_loads_weights_or_fails(void) {
    char text[320];
    snprintf(text, sizeof text, "%s/init.txt", tmp);
    static char buf[4096];
    size_t n = 0;
    for (int i = 0; n + 64 < sizeof buf; i++) n += (size_t)snprintf(buf + n, sizeof buf - n, "one two three %d\n", i % 7);
    write_file(text, buf, n);
    struct { const char *task; const char *args[12], *other_shape[6]; } cases[] = {
        {"adder", {"--batch", "8", "--eval-count", "10", NULL}, {"--n-embd", "32", NULL}},
        {"mingpt", {"--data", text, "--batch", "2", "--seq", "16", "--num-samples", "0", NULL}, {"--n-embd", "48", NULL}},
        {"dlrm", {"--batch", "16", "--eval-count", "100", NULL}, {NULL}},
        {"unet", {"--batch", "2", "--num-samples", "1", "--samples", tmp, NULL}, {NULL}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char dir[320], weights[600];
        snprintf(dir, sizeof dir, "%s/init-%s", tmp, cases[c].task);
        const char *args[32] = {"train", cases[c].task, "--steps", "1", "--quiet"};
        int base = 5, k = base;
        for (int i = 0; cases[c].args[i]; i++) args[k++] = cases[c].args[i];
        base = k;
        args[k++] = "--init", args[k++] = "/nonexistent/w.safetensors", args[k] = NULL;
        CHECK_MSG(run(args) == 1, "kiln train %s --init /nonexistent/w.safetensors", cases[c].task);
        CHECK(output_has("/nonexistent/w.safetensors"));
        CHECK(!output_contains("accuracy") && !output_contains("AUC") && !output_contains("sampled"));
        k = base;
        args[k++] = "--save", args[k++] = dir, args[k] = NULL;
        CHECK_MSG(run(args) == 0, "kiln train %s --save", cases[c].task);
        if (!checkpoint_weights(dir, weights, sizeof weights)) continue;
        k = base;
        args[k++] = "--init", args[k++] = weights, args[k] = NULL;
        CHECK_MSG(run(args) == 0, "kiln train %s --init %s", cases[c].task, weights);
        if (!cases[c].other_shape[0]) continue;
        for (int i = 0; cases[c].other_shape[i]; i++) args[k++] = cases[c].other_shape[i];
        args[k] = NULL;
        CHECK_MSG(run(args) == 1, "kiln train %s --init (another shape)", cases[c].task);
        CHECK(output_has(weights));
    }
}

/* The "loss" of each line of a --log file, up to cap; how many. */
static int logged_losses(const char *path, double *loss, int cap) {
    char *text = read_text_file(path);
    int n = 0;
    for (char *line = text ? strtok(text, "\n") : NULL; line && n < cap; line = strtok(NULL, "\n")) {
        cJSON *o = cJSON_Parse(line);
        const cJSON *v = cJSON_GetObjectItem(o, "loss");
        if (cJSON_IsNumber(v)) loss[n++] = v->valuedouble;
        cJSON_Delete(o);
    }
    free(text);
    return n;
}

/* A file of n GPT-2 token ids (uint16, a fixed pattern) at path. */
static void write_tokens(const char *path, int n) {
    uint16_t ids[4096];
    for (int i = 0; i < n && i < 4096; i++) ids[i] = (uint16_t)(i * 7919 % 50257);
    write_file(path, (const char *)ids, (size_t)(n < 4096 ? n : 4096) * sizeof *ids);
}

/* `kiln train TASK...` (task: a NULL-ended list) for `steps` steps in `mode`, its losses logged
 * to log (replaced); the losses read back into loss (at most steps). Returns how many. */
static int train_logged(const char *const *task, const char *steps, const char *mode, const char *log, double *loss) {
    const char *args[32] = {"train"};
    int a = 1;
    for (int i = 0; task[i]; i++) args[a++] = task[i];
    const char *more[] = {"--steps", steps, "--quiet", "--log", log, "--mode", mode, NULL};
    for (int i = 0; more[i]; i++) args[a++] = more[i];
    remove(log);
    if (run(args) != 0) return -1;
    return logged_losses(log, loss, atoi(steps));
}

static void test_every_task_gives_strict_losses_in_compiled_mode(void) {
    char text[320], tokens[320], log[320];
    snprintf(text, sizeof text, "%s/compiled.txt", tmp);
    snprintf(tokens, sizeof tokens, "%s/tokens.bin", tmp);
    snprintf(log, sizeof log, "%s/compiled.jsonl", tmp);
    static char buf[4096];
    size_t n = 0;
    for (int i = 0; n + 64 < sizeof buf; i++) n += (size_t)snprintf(buf + n, sizeof buf - n, "a mat, a cat %d\n", i % 7);
    write_file(text, buf, n);
    write_tokens(tokens, 4096);
    const char *tasks[][14] = {
        {"adder", "--batch", "16", "--n-layer", "1", "--n-embd", "32", NULL},
        {"gpt2", "--data", tokens, "--batch", "2", "--seq", "16", "--n-layer", "1", "--n-head", "2", "--n-embd", "32", NULL},
        {"dlrm", NULL},
        {"unet", "--batch", "2", "--num-samples", "1", NULL},
        {"mingpt", "--data", text, "--n-layer", "1", "--n-head", "2", "--n-embd", "32", "--seq", "16", "--num-samples", "0", NULL},
        {"resnet18", "--batch", "4", "--image-size", "32", NULL},
    };
    for (size_t t = 0; t < sizeof tasks / sizeof tasks[0]; t++) {
        const int steps = t == 1 ? 20 : 5; /* the GPT-2 fixture 20 steps, every other task 5 */
        char steps_arg[8];
        snprintf(steps_arg, sizeof steps_arg, "%d", steps);
        double loss[2][20];
        int got[2];
        for (int k = 0; k < 2; k++) {
            if (k) setenv("KILN_RECOMPILE", "error", 1); /* every step is the first one's program */
            got[k] = train_logged(tasks[t], steps_arg, k ? "compiled" : "strict", log, loss[k]);
            unsetenv("KILN_RECOMPILE");
            CHECK_MSG(got[k] >= 0, "kiln train %s in %s mode failed", tasks[t][0], k ? "compiled" : "strict");
        }
        CHECK_MSG(got[0] == steps && got[1] == steps, "%s: %d and %d losses logged", tasks[t][0], got[0], got[1]);
        for (int s = 0; s < steps && s < got[0] && s < got[1]; s++)
            CHECK_MSG(fabs(loss[1][s] - loss[0][s]) <= 1e-5 * fabs(loss[0][s]), "%s step %d: compiled %.9g, strict %.9g",
                      tasks[t][0], s, loss[1][s], loss[0][s]);
    }
}

/* A second process on a warm compilation cache compiles nothing in compiled mode: its
 * programs' kernels all load from the cache, and its losses are the first process's. */
static void test_a_warm_cache_compiles_nothing_in_compiled_mode(void) {
    char cache[320], log[320];
    snprintf(cache, sizeof cache, "%s/warm-cache", tmp);
    snprintf(log, sizeof log, "%s/warm.jsonl", tmp);
    setenv("KILN_CACHE_DIR", cache, 1);
    setenv("KILN_STATS", "1", 1);
    const char *args[] = {"train", "adder", "--batch", "16", "--n-layer", "1", "--n-embd", "32", "--steps", "2",
                          "--quiet", "--mode", "compiled", "--log", log, NULL};
    double compiles[2], loss[2][2];
    for (int k = 0; k < 2; k++) {
        remove(log);
        CHECK_MSG(run(args) == 0, "run %d failed", k);
        compiles[k] = output_number("\"compiles\":");
        CHECK(logged_losses(log, loss[k], 2) == 2);
    }
    unsetenv("KILN_STATS");
    unsetenv("KILN_CACHE_DIR");
    CHECK_MSG(compiles[0] > 0 && compiles[1] == 0, "compiles: %g cold, %g warm", compiles[0], compiles[1]);
    CHECK(loss[0][0] == loss[1][0] && loss[0][1] == loss[1][1]);
}

/* The float64 shadow on compiled programs (KILN_SHADOW=cpu) passes whole training steps,
 * forward, backward and AdamW, and changes no loss. */
static void test_compiled_training_passes_the_shadow(void) {
    char tokens[320], log[320];
    snprintf(tokens, sizeof tokens, "%s/shadow-tokens.bin", tmp);
    snprintf(log, sizeof log, "%s/shadow.jsonl", tmp);
    write_tokens(tokens, 2048);
    const char *tasks[][14] = {
        {"adder", "--batch", "8", "--n-layer", "1", "--n-embd", "32", NULL},
        {"gpt2", "--data", tokens, "--batch", "2", "--seq", "16", "--n-layer", "1", "--n-head", "2", "--n-embd", "32", NULL},
    };
    for (size_t t = 0; t < sizeof tasks / sizeof tasks[0]; t++) {
        double loss[2][2];
        for (int k = 0; k < 2; k++) {
            if (k) setenv("KILN_SHADOW", "cpu", 1);
            CHECK_MSG(train_logged(tasks[t], "2", "compiled", log, loss[k]) == 2, "kiln train %s in compiled mode%s failed",
                      tasks[t][0], k ? " under the shadow" : "");
            unsetenv("KILN_SHADOW");
        }
        CHECK_MSG(loss[0][0] == loss[1][0] && loss[0][1] == loss[1][1], "%s: losses %.9g %.9g, under the shadow %.9g %.9g",
                  tasks[t][0], loss[0][0], loss[0][1], loss[1][0], loss[1][1]);
    }
}

static void test_train_lists_the_tasks(void) {
    const char *args[] = {"train", "--help", NULL};
    CHECK(run(args) == 0);
    CHECK(output_has("dlrm") && output_has("unet") && output_has("mingpt"));
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH_TO_KILN\n", argv[0]);
        return 2;
    }
    kiln = argv[1];
    snprintf(tmp, sizeof tmp, "/tmp/kiln_cli_zoo_XXXXXX");
    if (!mkdtemp(tmp)) return 1;
    snprintf(out_path, sizeof out_path, "%s/out.txt", tmp);
    setenv("KILN_THREADS", "1", 1); /* tiny models: threads only add synchronization */
    RUN(test_train_lists_the_tasks);
    RUN(test_dlrm_learns_a_held_out_auc);
    RUN(test_dlrm_resumes_exactly);
    RUN(test_unet_writes_samples_and_loss_curve);
    RUN(test_unet_resumed_at_its_end_keeps_its_loss_curve);
    RUN(test_unet_refuses_a_directory_it_cannot_use);
    RUN(test_mingpt_trains_and_samples);
    RUN(test_mingpt_bad_text_files);
    RUN(test_init_loads_weights_or_fails);
    RUN(test_every_task_gives_strict_losses_in_compiled_mode);
    RUN(test_a_warm_cache_compiles_nothing_in_compiled_mode);
    RUN(test_compiled_training_passes_the_shadow);
    remove_tree(tmp);
    return test_summary();
}
