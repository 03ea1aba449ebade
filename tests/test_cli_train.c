/* `kiln train` end to end: loss parity with PyTorch on the committed GPT-2 fixture
 * (tests/fixtures/gpt2_train, made by make_gpt2_train_fixture.py), kill-and-resume giving
 * identical losses and a log without repeats, the end-of-run work finished by a resume after
 * a kill at the last checkpoint, what killed saves leave removed, one trainer per save
 * directory, full disks and unusable save directories reported, bad checkpoints and options
 * refused, the model directory GPT-2 leaves for `kiln generate`, and the adder's loss falling. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#define FIXTURE KILN_SOURCE_DIR "/tests/fixtures/gpt2_train"
#define LM_FIXTURES KILN_SOURCE_DIR "/tests/fixtures/lm"
#define MAX_LOG 64

static const char *kiln;
static char tmp[256];
static char out_path[512];

static const char *const two_threads[] = {"KILN_THREADS=2", NULL};

/* Runs kiln with args (NULL-terminated), stdout and stderr into out_path; the exit code. */
static int run(const char *const *args) { return run_program(kiln, args, NULL, out_path, NULL, two_threads); }

static bool output_contains(const char *needle) { return file_contains(out_path, needle); }
static bool output_has(const char *needle) { return file_has(out_path, needle); }

/* tmp/name, in one of a few rotating buffers. */
static const char *tmp_path(const char *name) {
    static char bufs[8][600];
    static int next;
    char *b = bufs[next++ % 8];
    snprintf(b, sizeof bufs[0], "%s/%s", tmp, name);
    return b;
}

/* A GPT-2 small enough that a step and a checkpoint take milliseconds (~20 KB of weights). */
#define TINY_GPT2 "train", "gpt2", "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--vocab", "64", "--block", \
                  "32", "--data", FIXTURE "/tokens.bin", "--seq", "16", "--quiet"

/* Runs kiln with the size of the files it writes limited to `bytes`: a write past it fails with
 * EFBIG as on a full disk, or, with die set, kills kiln on the spot (SIGXFSZ) in that write. */
static int run_with_file_limit(const char *const *args, rlim_t bytes, bool die) {
    struct rlimit saved, limit;
    CHECK(getrlimit(RLIMIT_FSIZE, &saved) == 0);
    limit = saved;
    limit.rlim_cur = bytes;
    void (*old)(int) = signal(SIGXFSZ, die ? SIG_DFL : SIG_IGN); /* inherited by kiln */
    CHECK(setrlimit(RLIMIT_FSIZE, &limit) == 0);
    int rc = run(args);
    CHECK(setrlimit(RLIMIT_FSIZE, &saved) == 0);
    signal(SIGXFSZ, old);
    return rc;
}

/* How many entries of dir have a name that contains `part`. */
static int entries_named(const char *dir, const char *part) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += strstr(e->d_name, part) != NULL;
    if (d) closedir(d);
    return n;
}

/* The whole file (malloc'd; *n its size), or NULL. */
static unsigned char *file_bytes(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    unsigned char *b = NULL;
    if (f && fseek(f, 0, SEEK_END) == 0) {
        long size = ftell(f);
        rewind(f);
        b = size >= 0 ? malloc((size_t)size + 1) : NULL;
        *n = b ? fread(b, 1, (size_t)size, f) : 0;
    }
    if (f) fclose(f);
    return b;
}

/* Every tensor of the exported weights equals the checkpoint's tensor of that name (the first
 * that does not is named when `say` is set). */
static bool export_matches_checkpoint(const char *exported, const char *checkpoint, bool say) {
    kn_safetensors *e = kn_safetensors_open(exported), *c = kn_safetensors_open(checkpoint);
    bool same = e && c && kn_safetensors_count(e) > 0;
    kn_scope_push();
    for (int i = 0; same && i < kn_safetensors_count(e); i++) {
        const char *name = kn_safetensors_name(e, i);
        kn_tensor *a = kn_safetensors_get(e, name, KN_CPU), *b = kn_safetensors_get(c, name, KN_CPU);
        int64_t n = a ? kn_numel(a) : 0;
        float *x = malloc(sizeof *x * (size_t)(n + 1)), *y = malloc(sizeof *y * (size_t)(n + 1));
        same = a && b && kn_numel(b) == n && kn_to_host(kn_cast(a, KN_F32), x, sizeof *x * (size_t)n) == KN_OK &&
               kn_to_host(kn_cast(b, KN_F32), y, sizeof *y * (size_t)n) == KN_OK && memcmp(x, y, sizeof *x * (size_t)n) == 0;
        if (!same && say) fprintf(stderr, "  %s: tensor '%s' differs from %s's\n", exported, name, checkpoint);
        free(x);
        free(y);
    }
    kn_scope_pop();
    kn_safetensors_close(e);
    kn_safetensors_close(c);
    return same;
}

/* The steps of a JSONL log in file order; returns how many lines it has. */
static int log_steps(const char *path, int *steps, int cap) {
    char *text = read_text_file(path);
    int n = 0;
    for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        cJSON *o = cJSON_Parse(line);
        const cJSON *step = cJSON_GetObjectItem(o, "step");
        if (n < cap) steps[n] = cJSON_IsNumber(step) ? step->valueint : -1;
        n++;
        cJSON_Delete(o);
    }
    free(text);
    return n;
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
    FILE *f = fopen(cut, "a"); /* and a line the kill cut short */
    if (f) fputs("{\"step\": 12, \"loss\": 4.", f), fclose(f);
    CHECK(run_fixture("cut.jsonl", (const char *[]){"--save", dir_b, "--save-every", "5", "--resume", dir_b, NULL}) == 0);
    CHECK(output_has("resumed from"));
    double a[MAX_LOG] = {0}, b[MAX_LOG] = {0};
    CHECK(read_log(full, a, NULL) == 20 && read_log(cut, b, NULL) == 20);
    for (int i = 0; i < 20; i++) CHECK_MSG(a[i] == b[i], "step %d: %.9g uninterrupted, %.9g resumed", i, a[i], b[i]);
    /* The resumed run's log holds each step once, in order: steps 10 and 11 were cut away. */
    int steps[MAX_LOG], n = log_steps(cut, steps, MAX_LOG);
    CHECK_MSG(n == 20, "the resumed log has %d lines for 20 steps", n);
    for (int i = 0; i < n && i < MAX_LOG; i++) CHECK_MSG(steps[i] == i, "line %d of the resumed log is step %d", i, steps[i]);
}

/* Killed right after its last checkpoint, before the export and the end-of-run work: the
 * resume trains nothing and does that work, so DIR/model.safetensors holds the last weights
 * (not the previous checkpoint's), with a config.json that `kiln generate` loads. */
static void test_a_kill_after_the_last_checkpoint_is_finished_on_resume(void) {
    char dir[600], exported[700], last[700];
    snprintf(dir, sizeof dir, "%s/ckpt-last", tmp);
    snprintf(exported, sizeof exported, "%s/model.safetensors", dir);
    snprintf(last, sizeof last, "%s/step-00000020/model.safetensors", dir);
    const char *save[] = {"--save", dir, "--save-every", "5", "--abort-after", "20", NULL};
    CHECK(run_fixture("last.jsonl", save) == 137);
    size_t n_export = 0, n_last = 0;
    unsigned char *before = file_bytes(exported, &n_export), *want = file_bytes(last, &n_last);
    CHECK(before && want && (n_export != n_last || memcmp(before, want, n_last) != 0)); /* step 15's weights */
    free(before);
    CHECK(run_fixture("last.jsonl", (const char *[]){"--save", dir, "--save-every", "5", "--resume", dir, NULL}) == 0);
    CHECK(output_has("nothing to train"));
    CHECK(export_matches_checkpoint(exported, last, true));
    unsigned char *after = file_bytes(exported, &n_export);
    CHECK(after && n_export == n_last && memcmp(after, want, n_last) == 0);
    free(after);
    free(want);
    /* The directory has no tokenizer (none beside the fixture's files): the output says how to
     * use it, and generation from token ids works. */
    CHECK(output_has("--prompt-ids"));
    CHECK(run((const char *[]){"generate", dir, "--prompt-ids", "1,2,3", "--max-new-tokens", "4", "--print-ids", NULL}) == 0);
    CHECK(output_has("["));
}

/* kiln train lm (fine-tuning) killed after its last checkpoint: the resume exports the last
 * weights, which the killed run had left at the previous checkpoint's. */
static void test_fine_tuning_exports_the_last_weights_after_a_kill(void) {
    char dir[600], exported[700], last[700];
    snprintf(dir, sizeof dir, "%s/tuned", tmp);
    snprintf(exported, sizeof exported, "%s/model.safetensors", dir);
    snprintf(last, sizeof last, "%s/step-00000004/model.safetensors", dir);
    const char *args[] = {"train", "lm", "--init", LM_FIXTURES "/llama2", "--data", FIXTURE "/tokens.bin", "--seq", "16",
                          "--steps", "4", "--save", dir, "--save-every", "2", "--lr", "1e-2", "--quiet", NULL, NULL, NULL};
    args[17] = "--abort-after", args[18] = "4";
    CHECK(run(args) == 137);
    CHECK(!export_matches_checkpoint(exported, last, false)); /* step 2's weights */
    args[17] = "--resume", args[18] = dir;
    CHECK(run(args) == 0);
    CHECK(export_matches_checkpoint(exported, last, true));
}

/* The adder killed after its last checkpoint printed no accuracy; resuming prints it, and
 * resuming a finished run prints it again (how a finished run is re-evaluated). */
static void test_resuming_at_the_last_step_redoes_the_evaluation(void) {
    const char *dir = tmp_path("adder-ckpt");
    const char *args[] = {"train", "adder", "--steps", "20", "--batch", "16", "--eval-count", "50", "--save", dir, "--quiet",
                          NULL, NULL, NULL};
    args[11] = "--abort-after", args[12] = "20";
    CHECK(run(args) == 137);
    CHECK(!output_contains("accuracy"));
    args[11] = "--resume", args[12] = dir;
    CHECK(run(args) == 0);
    CHECK(output_has("accuracy"));
    char *first = read_text_file(out_path);
    CHECK(run(args) == 0);
    char *again = read_text_file(out_path);
    CHECK(first && again && strcmp(first, again) == 0);
    free(first);
    free(again);
    /* A checkpoint past --steps belongs to a longer run: an error naming both. */
    args[3] = "10";
    CHECK(run(args) == 1);
    CHECK(output_has("step 20, past --steps 10"));
}

/* A save killed midway leaves its temporary directory (a whole checkpoint, at 7B ~84 GB):
 * the next run into the directory removes it and says so. */
static void test_what_a_killed_save_leaves_is_removed(void) {
    const char *dir = tmp_path("ckpt-killed");
    CHECK(run((const char *[]){TINY_GPT2, "--steps", "2", "--save", dir, NULL}) == 0);
    const char *resume[] = {TINY_GPT2, "--steps", "4", "--save", dir, "--save-every", "2", "--resume", dir, NULL};
    /* Killed while it writes the step-4 checkpoint (its weights outgrow the limit). */
    CHECK(run_with_file_limit(resume, 8 << 10, true) == 128 + SIGXFSZ);
    CHECK(entries_named(dir, ".partial-") == 1);
    CHECK(run(resume) == 0);
    CHECK(entries_named(dir, ".partial-") == 0 && entries_named(dir, ".tmp.") == 0);
    CHECK(entries_named(dir, "step-00000004") == 1);
}

/* One trainer per save directory: a second one is refused before it trains, naming the first,
 * and the first one's unfinished checkpoint is left alone. */
static void test_a_second_trainer_is_refused_a_busy_save_dir(void) {
    const char *dir = tmp_path("ckpt-busy");
    char lock_path[700], partial[700], pid[32];
    CHECK(mkdir(dir, 0777) == 0);
    snprintf(lock_path, sizeof lock_path, "%s/.kiln-train.lock", dir);
    snprintf(partial, sizeof partial, "%s/.partial-%ld", dir, (long)getpid());
    int lock = open(lock_path, O_RDWR | O_CREAT, 0666); /* this process plays the live trainer */
    CHECK(lock >= 0 && flock(lock, LOCK_EX) == 0);
    snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    CHECK(write(lock, pid, strlen(pid)) == (ssize_t)strlen(pid));
    CHECK(mkdir(partial, 0777) == 0);
    CHECK(run((const char *[]){TINY_GPT2, "--steps", "2", "--save", dir, NULL}) == 1);
    CHECK(output_has("another kiln train (pid "));
    CHECK(output_has(dir));
    struct stat sb;
    CHECK(stat(partial, &sb) == 0 && S_ISDIR(sb.st_mode));
    close(lock); /* the trainer is gone: its leftovers are stale now */
    CHECK(run((const char *[]){TINY_GPT2, "--steps", "2", "--save", dir, NULL}) == 0);
    CHECK(stat(partial, &sb) != 0);
}

/* A --save that cannot hold checkpoints fails before any training, not at the first save. */
static void test_an_unusable_save_dir_fails_before_training(void) {
    const char *file = tmp_path("not-a-dir");
    FILE *f = fopen(file, "w");
    if (f) fclose(f);
    const char *args[] = {"train", "gpt2", "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--vocab", "64",
                          "--block", "32", "--data", FIXTURE "/tokens.bin", "--seq", "16", "--steps", "2", "--save", file, NULL};
    CHECK(run(args) == 1);
    CHECK(output_has("not-a-dir: not a directory"));
    CHECK(!output_contains("step 1/"));
    args[19] = tmp_path("not-a-dir/sub");
    CHECK(run(args) == 1);
    CHECK(output_has("not-a-dir/sub"));
    CHECK(!output_contains("step 1/"));
    /* Missing parents are made, as os.makedirs does. */
    args[19] = tmp_path("new/nested/dir");
    CHECK(run(args) == 0);
    CHECK(entries_named(tmp_path("new/nested/dir"), "step-00000002") == 1);
}

/* A full disk is reported with its cause and the file, and `latest` keeps naming the last
 * complete checkpoint, from which the run resumes. */
static void test_a_full_disk_is_reported_with_its_cause(void) {
    if (access("/dev/full", W_OK) == 0) {
        CHECK(run((const char *[]){TINY_GPT2, "--steps", "2", "--log", "/dev/full", NULL}) == 1);
        CHECK(output_has("/dev/full: writing failed (No space left on device)"));
    }
    const char *dir = tmp_path("ckpt-full");
    char latest[700];
    snprintf(latest, sizeof latest, "%s/latest", dir);
    CHECK(run((const char *[]){TINY_GPT2, "--steps", "2", "--save", dir, NULL}) == 0);
    char *before = read_text_file(latest);
    const char *args[] = {TINY_GPT2, "--steps", "4", "--save", dir, "--resume", dir, NULL};
    /* A file size limit fails the write as a full disk does (EFBIG instead of ENOSPC). */
    CHECK(run_with_file_limit(args, 8 << 10, false) == 1);
    CHECK(output_has("/.partial-"));
    CHECK(output_has("/model.safetensors: writing the temporary file failed: File too large"));
    char *after = read_text_file(latest);
    CHECK(before && after && strcmp(before, after) == 0);
    free(before);
    free(after);
    CHECK(entries_named(dir, ".partial-") == 0 && entries_named(dir, ".tmp.") == 0);
    CHECK(run(args) == 0);
}

/* --keep-last N keeps the newest N checkpoints and says which it removes; 0 keeps them all. */
static void test_keep_last(void) {
    const char *dir = tmp_path("ckpt-keep");
    const char *args[] = {"train", "gpt2", "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--vocab", "64",
                          "--block", "32", "--data", FIXTURE "/tokens.bin", "--seq", "16", "--steps", "5", "--save", dir,
                          "--save-every", "1", "--keep-last", "3", NULL};
    CHECK(run(args) == 0);
    CHECK(entries_named(dir, "step-") == 3 && entries_named(dir, "step-00000003") == 1);
    CHECK(output_has("removed the older checkpoint"));
    CHECK(output_has("step-00000002 (--keep-last 3)"));
    args[19] = tmp_path("ckpt-keep-all"), args[23] = "0";
    CHECK(run(args) == 0);
    CHECK(entries_named(args[19], "step-") == 5);
    CHECK(!output_contains("removed"));
    CHECK(run((const char *[]){"train", "gpt2", "--help", NULL}) == 0);
    CHECK(output_has("--keep-last") && output_has("(0: all) [default: 2]"));
}

/* state.json values that do not fit a step count are refused, naming the file and the key. */
static void test_bad_state_values_are_refused(void) {
    const char *dir = tmp_path("ckpt-state");
    char state[700];
    snprintf(state, sizeof state, "%s/step-00000001/state.json", dir);
    CHECK(run((const char *[]){TINY_GPT2, "--steps", "1", "--save", dir, NULL}) == 0);
    char *good = read_text_file(state);
    static const struct {
        const char *key, *value, *message;
    } cases[] = {{"step", "2.5", "\"step\" is 2.5"},
                 {"step", "1e30", "\"step\" is 1e+30"},
                 {"step", "-3", "\"step\" is -3"},
                 {"step", "\"1\"", "\"step\" is not a number"},
                 {"param_steps", "[2.5]", "\"param_steps\"[0] is 2.5"},
                 {"rng_seed", "\"-1\"", "\"rng_seed\" is missing or not a string of decimal digits"}};
    for (size_t i = 0; good && i < sizeof cases / sizeof *cases; i++) {
        cJSON *root = cJSON_Parse(good);
        cJSON *value = cJSON_Parse(cases[i].value);
        if (strcmp(cases[i].key, "param_steps") == 0) { /* the first of the list */
            cJSON *list = cJSON_GetObjectItem(root, "param_steps");
            cJSON_ReplaceItemInArray(list, 0, cJSON_DetachItemFromArray(value, 0));
            cJSON_Delete(value);
        } else {
            cJSON_ReplaceItemInObject(root, cases[i].key, value);
        }
        char *text = cJSON_Print(root);
        FILE *f = fopen(state, "w");
        if (f) fputs(text, f), fclose(f);
        free(text);
        cJSON_Delete(root);
        CHECK(run((const char *[]){TINY_GPT2, "--steps", "3", "--resume", dir, NULL}) == 1);
        CHECK(output_has("state.json: "));
        CHECK(output_has(cases[i].message));
    }
    /* One JSON object and nothing after it, as every JSON file kiln reads. */
    FILE *f = good ? fopen(state, "w") : NULL;
    if (f) fprintf(f, "%s{}", good), fclose(f);
    CHECK(run((const char *[]){TINY_GPT2, "--steps", "3", "--resume", dir, NULL}) == 1);
    CHECK(output_has("state.json: ") && output_has("bytes after the value"));
    free(good);
}

/* kiln train gpt2 from a Hugging Face directory leaves a model directory with its config.json
 * (the source's keys kept) and tokenizer, which `kiln generate` runs on text. */
static void test_gpt2_leaves_a_model_directory_generate_runs(void) {
    const char *dir = tmp_path("gpt2-out");
    CHECK(run((const char *[]){"train", "gpt2", "--config", LM_FIXTURES "/gpt2/config.json", "--init",
                               LM_FIXTURES "/gpt2/model.safetensors", "--data", FIXTURE "/tokens.bin", "--seq", "16",
                               "--steps", "2", "--save", dir, NULL}) == 0);
    CHECK(output_has("is a model directory (tokenizer from"));
    CHECK(entries_named(dir, "tokenizer.json") == 1 && entries_named(dir, "generation_config.json") == 1);
    char config[700];
    snprintf(config, sizeof config, "%s/config.json", dir);
    char *text = read_text_file(config);
    cJSON *c = cJSON_Parse(text);
    free(text);
    CHECK(cJSON_GetObjectItem(c, "eos_token_id") && cJSON_GetObjectItem(c, "eos_token_id")->valueint == 2);
    CHECK(cJSON_GetObjectItem(c, "n_embd") && cJSON_GetObjectItem(c, "n_embd")->valueint == 64);
    cJSON_Delete(c);
    CHECK(run((const char *[]){"generate", dir, "--prompt", "hello", "--max-new-tokens", "3", NULL}) == 0);
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
    double loss[MAX_LOG * 4] = {0}, min_peak = INFINITY;
    int n = 0;
    char *text = read_text_file(log);
    for (char *line = text ? strtok(text, "\n") : NULL; line && n < MAX_LOG * 4; line = strtok(NULL, "\n")) {
        cJSON *o = cJSON_Parse(line);
        loss[n++] = cJSON_GetObjectItem(o, "loss")->valuedouble;
        const cJSON *peak = cJSON_GetObjectItem(o, "peak_mib");
        min_peak = fmin(min_peak, cJSON_IsNumber(peak) ? peak->valuedouble : -1);
        cJSON_Delete(o);
    }
    free(text);
    CHECK_MSG(n == 250 && loss[n - 1] < 0.5 * loss[0], "loss %.4f -> %.4f over %d steps", loss[0], loss[n - 1], n);
    /* every step holds its activations: a peak of zero (or none) would mean it was not measured */
    CHECK_MSG(min_peak > 0, "a step logged peak_mib %.3f", min_peak);
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
    RUN(test_a_kill_after_the_last_checkpoint_is_finished_on_resume);
    RUN(test_fine_tuning_exports_the_last_weights_after_a_kill);
    RUN(test_resuming_at_the_last_step_redoes_the_evaluation);
    RUN(test_what_a_killed_save_leaves_is_removed);
    RUN(test_a_second_trainer_is_refused_a_busy_save_dir);
    RUN(test_an_unusable_save_dir_fails_before_training);
    RUN(test_a_full_disk_is_reported_with_its_cause);
    RUN(test_keep_last);
    RUN(test_bad_state_values_are_refused);
    RUN(test_gpt2_leaves_a_model_directory_generate_runs);
    RUN(test_bad_checkpoints_and_options);
    RUN(test_adder_learns);
    remove_tree(tmp);
    return test_summary();
}
