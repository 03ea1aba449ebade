/* Training checkpoints (train_checkpoint.h). */
#include "train_checkpoint.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train_save_dir.h"

#define STATE_FORMAT "kiln-train-state"

static kn_status io_error(const char *path, const char *what) {
    return kn_set_error(KN_ERR_IO, "%s: %s (%s)", path, what, strerror(errno));
}

/* The optimizer's state tensors (moments) saved to, or restored from, a safetensors file. */
static kn_status transfer_optimizer(const char *path, kn_optimizer *opt, bool save) {
    int n = kn_optimizer_state_count(opt);
    const char **names = calloc((size_t)n + 1, sizeof *names);
    kn_tensor **tensors = calloc((size_t)n + 1, sizeof *tensors);
    kn_status st = names && tensors ? KN_OK : kn_set_error(KN_ERR_OOM, "checkpoint: out of host memory");
    kn_scope_push();
    for (int i = 0; st == KN_OK && i < n; i++)
        if (!(tensors[i] = kn_optimizer_state_tensor(opt, i, &names[i]))) st = kn_last_status();
    if (st == KN_OK)
        st = save ? kn_safetensors_save(path, n, names, tensors, NULL, NULL, 0)
                  : kn_safetensors_load_into(path, n, names, tensors, KN_LOAD_STRICT);
    kn_scope_pop();
    free(names);
    free(tensors);
    return st;
}

static kn_status save_state(const char *path, const train_job *job, kn_optimizer *opt, int64_t steps_done) {
    uint64_t seed, offset;
    kn_rng_get_state(&seed, &offset);
    char text[64];
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", STATE_FORMAT);
    cJSON_AddNumberToObject(root, "version", 1);
    cJSON_AddStringToObject(root, "task", job->task);
    cJSON_AddNumberToObject(root, "step", (double)steps_done);
    /* 64-bit values as strings: JSON numbers are doubles. */
    snprintf(text, sizeof text, "%" PRIu64, seed);
    cJSON_AddStringToObject(root, "rng_seed", text);
    snprintf(text, sizeof text, "%" PRIu64, offset);
    cJSON_AddStringToObject(root, "rng_offset", text);
    cJSON *steps = cJSON_AddArrayToObject(root, "param_steps");
    for (int i = 0; i < kn_optimizer_param_count(opt); i++)
        cJSON_AddItemToArray(steps, cJSON_CreateNumber((double)kn_optimizer_get_step(opt, i)));
    char *json = cJSON_Print(root);
    cJSON_Delete(root);
    kn_status st = json ? kn_write_file_atomic(path, json, strlen(json)) : kn_set_error(KN_ERR_OOM, "checkpoint: out of memory");
    free(json);
    return st;
}

typedef struct checkpoint_dir {
    long long step;
    char name[64];
} checkpoint_dir;

static int newest_first(const void *a, const void *b) {
    long long x = ((const checkpoint_dir *)a)->step, y = ((const checkpoint_dir *)b)->step;
    return (x < y) - (x > y);
}

/* Keeps the newest keep_last step-N directories of steps up to steps_done (later ones belong to
 * a run this one was resumed before; they are left alone) and says which it removes. */
static void prune(const char *dir, int64_t steps_done, int64_t keep_last, bool quiet) {
    DIR *d = keep_last > 0 ? opendir(dir) : NULL;
    if (!d) return;
    checkpoint_dir *found = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        long long step;
        int end = 0;
        if (sscanf(e->d_name, "step-%lld%n", &step, &end) != 1 || e->d_name[end] || step > steps_done ||
            strlen(e->d_name) >= sizeof found->name)
            continue;
        if (n == cap) {
            checkpoint_dir *grown = realloc(found, (cap = cap ? 2 * cap : 16) * sizeof *found);
            if (!grown) break; /* out of memory: prune less this time */
            found = grown;
        }
        found[n].step = step;
        strcpy(found[n++].name, e->d_name);
    }
    closedir(d);
    qsort(found, n, sizeof *found, newest_first);
    char path[TRAIN_PATH_SIZE];
    for (size_t i = (size_t)keep_last; i < n; i++) {
        if (!train_path(path, dir, found[i].name)) continue;
        train_remove_dir(path);
        if (!quiet)
            fprintf(stderr, "%sremoved the older checkpoint %s (--keep-last %lld)\n", isatty(STDERR_FILENO) ? "\n" : "",
                    path, (long long)keep_last);
    }
    free(found);
}

kn_status train_checkpoint_save(const train_options *o, const train_job *job, kn_optimizer *opt, int64_t steps_done) {
    const char *dir = o->save_dir;
    char tmp[TRAIN_PATH_SIZE], final[TRAIN_PATH_SIZE], file[TRAIN_PATH_SIZE], name[64], partial[64];
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) return io_error(dir, "cannot create the checkpoint directory");
    snprintf(name, sizeof name, "step-%08lld", (long long)steps_done);
    snprintf(partial, sizeof partial, ".partial-%ld", (long)getpid());
    if (!train_path(tmp, dir, partial) || !train_path(final, dir, name) || !train_path(file, tmp, "optimizer.safetensors"))
        return kn_set_error(KN_ERR_IO, "%s: the checkpoint directory's path is too long", dir);
    train_remove_dir(tmp);
    if (mkdir(tmp, 0777) != 0) return io_error(tmp, "cannot create a temporary checkpoint directory");
    train_path(file, tmp, "model.safetensors");
    kn_status st = kn_safetensors_save(file, job->n_params, (const char *const *)job->names, job->params, NULL, NULL, 0);
    train_path(file, tmp, "optimizer.safetensors");
    if (st == KN_OK) st = transfer_optimizer(file, opt, true);
    train_path(file, tmp, "state.json");
    if (st == KN_OK) st = save_state(file, job, opt, steps_done);
    if (st == KN_OK) {
        train_remove_dir(final);
        if (rename(tmp, final) != 0) st = io_error(final, "cannot move the checkpoint into place");
    }
    if (st != KN_OK) {
        train_remove_dir(tmp);
        return st;
    }
    char latest[TRAIN_PATH_SIZE], text[80];
    train_path(latest, dir, "latest");
    snprintf(text, sizeof text, "%s\n", name);
    st = kn_write_file_atomic(latest, text, strlen(text));
    if (st == KN_OK) prune(dir, steps_done, o->keep_last, o->quiet);
    return st;
}

/* ---- loading -------------------------------------------------------------------------------- */

static char *read_small_file(const char *path, size_t limit) {
    FILE *f = fopen(path, "rb");
    if (!f) return io_error(path, "cannot open"), NULL;
    char *buf = malloc(limit + 1);
    size_t n = buf ? fread(buf, 1, limit, f) : 0;
    fclose(f);
    if (!buf) return kn_set_error(KN_ERR_OOM, "out of host memory"), NULL;
    buf[n] = '\0';
    return buf;
}

/* A 64-bit value, written as a string of decimal digits. */
static bool u64_field(const cJSON *root, const char *key, uint64_t *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    char *end;
    if (!cJSON_IsString(v) || !isdigit((unsigned char)v->valuestring[0])) return false;
    errno = 0;
    *out = strtoull(v->valuestring, &end, 10);
    return !*end && !errno;
}

/* A step count: a whole number from 0 to 2^53 (beyond, doubles skip integers). */
static bool count_value(const cJSON *v, int64_t *out) {
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= 0x1p53) || v->valuedouble != floor(v->valuedouble))
        return false;
    *out = (int64_t)v->valuedouble;
    return true;
}

static kn_status bad_count(const char *path, const char *key, int index, const cJSON *v) {
    char where[64] = "", value[40];
    if (index >= 0) snprintf(where, sizeof where, "[%d]", index);
    if (cJSON_IsNumber(v)) snprintf(value, sizeof value, "%.17g", v->valuedouble);
    else snprintf(value, sizeof value, "%s", v ? "not a number" : "missing");
    return kn_set_error(KN_ERR_IO, "%s: \"%s\"%s is %s; it must be a whole number from 0 to 2^53", path, key, where,
                        value);
}

static kn_status load_state(const char *path, const train_job *job, kn_optimizer *opt, int64_t *steps_done) {
    cJSON *root = kn_hf_read_json(path, 1 << 20); /* strict: one JSON object, nothing after it */
    if (!root) return kn_last_status();
    const cJSON *format = cJSON_GetObjectItemCaseSensitive(root, "format");
    const cJSON *task = cJSON_GetObjectItemCaseSensitive(root, "task");
    const cJSON *step = cJSON_GetObjectItemCaseSensitive(root, "step");
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(root, "param_steps");
    uint64_t seed = 0, offset = 0;
    int64_t step_count = 0, count = 0;
    kn_status st = KN_OK;
    if (!cJSON_IsString(format) || strcmp(format->valuestring, STATE_FORMAT) != 0)
        st = kn_set_error(KN_ERR_IO, "%s: not a kiln training state (no \"format\": \"%s\")", path, STATE_FORMAT);
    else if (!cJSON_IsString(task) || strcmp(task->valuestring, job->task) != 0)
        st = kn_set_error(KN_ERR_IO, "%s: a checkpoint of task '%s', not '%s'", path,
                          cJSON_IsString(task) ? task->valuestring : "?", job->task);
    else if (!count_value(step, &step_count))
        st = bad_count(path, "step", -1, step);
    else if (!u64_field(root, "rng_seed", &seed) || !u64_field(root, "rng_offset", &offset))
        st = kn_set_error(KN_ERR_IO, "%s: \"%s\" is missing or not a string of decimal digits", path,
                          u64_field(root, "rng_seed", &seed) ? "rng_offset" : "rng_seed");
    else if (!cJSON_IsArray(steps) || cJSON_GetArraySize(steps) != kn_optimizer_param_count(opt))
        st = kn_set_error(KN_ERR_IO, "%s: param_steps lists %d parameters; the model has %d", path,
                          cJSON_IsArray(steps) ? cJSON_GetArraySize(steps) : 0, kn_optimizer_param_count(opt));
    for (int i = 0; st == KN_OK && i < kn_optimizer_param_count(opt); i++) {
        const cJSON *s = cJSON_GetArrayItem(steps, i);
        st = count_value(s, &count) ? kn_optimizer_set_step(opt, i, count) : bad_count(path, "param_steps", i, s);
    }
    if (st == KN_OK) {
        kn_rng_set_state(seed, offset);
        *steps_done = step_count;
    }
    cJSON_Delete(root);
    return st;
}

kn_status train_checkpoint_load(const char *dir, const train_job *job, kn_optimizer *opt, int64_t *steps_done) {
    char path[TRAIN_PATH_SIZE];
    train_path(path, dir, "latest");
    char *name = read_small_file(path, 255);
    if (!name) return kn_set_error(KN_ERR_IO, "%s: no checkpoint to resume from (missing %s)", dir, path);
    name[strcspn(name, "\r\n")] = '\0';
    if (strncmp(name, "step-", 5) != 0 || strchr(name, '/')) {
        kn_set_error(KN_ERR_IO, "%s: does not name a checkpoint ('%s')", path, name);
        free(name);
        return KN_ERR_IO;
    }
    char base[TRAIN_PATH_SIZE];
    bool fits = train_path(base, dir, name) && train_path(path, base, "optimizer.safetensors");
    free(name);
    if (!fits) return kn_set_error(KN_ERR_IO, "%s: the checkpoint directory's path is too long", dir);
    train_path(path, base, "model.safetensors");
    kn_no_grad_push();
    kn_status st = kn_safetensors_load_into(path, job->n_params, (const char *const *)job->names, job->params, KN_LOAD_STRICT);
    kn_no_grad_pop();
    train_path(path, base, "optimizer.safetensors");
    if (st == KN_OK) st = transfer_optimizer(path, opt, false);
    train_path(path, base, "state.json");
    if (st == KN_OK) st = load_state(path, job, opt, steps_done);
    return st;
}
