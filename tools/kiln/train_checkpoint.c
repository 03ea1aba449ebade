/* Training checkpoints (train_checkpoint.h). */
#include "train_checkpoint.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STATE_FORMAT "kiln-train-state"

/* dir/name into out (PATH_SIZE bytes); false if it does not fit. */
#define PATH_SIZE 4096
static bool join(char *out, const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    if (a + 1 + b >= PATH_SIZE) return false;
    memcpy(out, dir, a);
    out[a] = '/';
    memcpy(out + a + 1, name, b + 1);
    return true;
}

static kn_status io_error(const char *path, const char *what) {
    return kn_set_error(KN_ERR_IO, "%s: %s (%s)", path, what, strerror(errno));
}

/* Removes a checkpoint directory (its three files, then itself). */
static void remove_checkpoint(const char *path) {
    static const char *files[] = {"model.safetensors", "optimizer.safetensors", "state.json"};
    char file[PATH_SIZE];
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        join(file, path, files[i]);
        unlink(file);
    }
    rmdir(path);
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

/* Keeps the newest two step-* directories. */
static void prune(const char *dir, int64_t steps_done) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    long long newest_other = -1;
    while ((e = readdir(d))) {
        long long s;
        if (sscanf(e->d_name, "step-%lld", &s) == 1 && s < steps_done && s > newest_other) newest_other = s;
    }
    rewinddir(d);
    char path[PATH_SIZE];
    while ((e = readdir(d))) {
        long long s;
        if (sscanf(e->d_name, "step-%lld", &s) == 1 && s < newest_other) {
            join(path, dir, e->d_name);
            remove_checkpoint(path);
        }
    }
    closedir(d);
}

kn_status train_checkpoint_save(const char *dir, const train_job *job, kn_optimizer *opt, int64_t steps_done) {
    char tmp[PATH_SIZE], final[PATH_SIZE], file[PATH_SIZE], name[64], partial[64];
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) return io_error(dir, "cannot create the checkpoint directory");
    snprintf(name, sizeof name, "step-%08lld", (long long)steps_done);
    snprintf(partial, sizeof partial, ".partial-%ld", (long)getpid());
    if (!join(tmp, dir, partial) || !join(final, dir, name) || !join(file, tmp, "optimizer.safetensors"))
        return kn_set_error(KN_ERR_IO, "%s: the checkpoint directory's path is too long", dir);
    remove_checkpoint(tmp);
    if (mkdir(tmp, 0777) != 0) return io_error(tmp, "cannot create a temporary checkpoint directory");
    join(file, tmp, "model.safetensors");
    kn_status st = kn_safetensors_save(file, job->n_params, (const char *const *)job->names, job->params, NULL, NULL, 0);
    join(file, tmp, "optimizer.safetensors");
    if (st == KN_OK) st = transfer_optimizer(file, opt, true);
    join(file, tmp, "state.json");
    if (st == KN_OK) st = save_state(file, job, opt, steps_done);
    if (st == KN_OK) {
        remove_checkpoint(final);
        if (rename(tmp, final) != 0) st = io_error(final, "cannot move the checkpoint into place");
    }
    if (st != KN_OK) {
        remove_checkpoint(tmp);
        return st;
    }
    char latest[PATH_SIZE], text[80];
    join(latest, dir, "latest");
    snprintf(text, sizeof text, "%s\n", name);
    st = kn_write_file_atomic(latest, text, strlen(text));
    if (st == KN_OK) prune(dir, steps_done);
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

static bool u64_field(const cJSON *root, const char *key, uint64_t *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    char *end;
    if (!cJSON_IsString(v)) return false;
    errno = 0;
    *out = strtoull(v->valuestring, &end, 10);
    return !*end && !errno && end != v->valuestring;
}

static kn_status load_state(const char *path, const train_job *job, kn_optimizer *opt, int64_t *steps_done) {
    char *text = read_small_file(path, 1 << 20);
    if (!text) return kn_last_status();
    cJSON *root = cJSON_Parse(text);
    free(text);
    const cJSON *format = cJSON_GetObjectItemCaseSensitive(root, "format");
    const cJSON *task = cJSON_GetObjectItemCaseSensitive(root, "task");
    const cJSON *step = cJSON_GetObjectItemCaseSensitive(root, "step");
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(root, "param_steps");
    uint64_t seed = 0, offset = 0;
    kn_status st = KN_OK;
    if (!cJSON_IsString(format) || strcmp(format->valuestring, STATE_FORMAT) != 0)
        st = kn_set_error(KN_ERR_IO, "%s: not a kiln training state (no \"format\": \"%s\")", path, STATE_FORMAT);
    else if (!cJSON_IsString(task) || strcmp(task->valuestring, job->task) != 0)
        st = kn_set_error(KN_ERR_IO, "%s: a checkpoint of task '%s', not '%s'", path,
                          cJSON_IsString(task) ? task->valuestring : "?", job->task);
    else if (!cJSON_IsNumber(step) || step->valuedouble < 0 || !u64_field(root, "rng_seed", &seed) ||
             !u64_field(root, "rng_offset", &offset))
        st = kn_set_error(KN_ERR_IO, "%s: step, rng_seed or rng_offset is missing or malformed", path);
    else if (!cJSON_IsArray(steps) || cJSON_GetArraySize(steps) != kn_optimizer_param_count(opt))
        st = kn_set_error(KN_ERR_IO, "%s: param_steps lists %d parameters; the model has %d", path,
                          cJSON_IsArray(steps) ? cJSON_GetArraySize(steps) : 0, kn_optimizer_param_count(opt));
    for (int i = 0; st == KN_OK && i < kn_optimizer_param_count(opt); i++) {
        const cJSON *s = cJSON_GetArrayItem(steps, i);
        if (!cJSON_IsNumber(s) || s->valuedouble < 0)
            st = kn_set_error(KN_ERR_IO, "%s: param_steps[%d] is not a step count", path, i);
        else
            st = kn_optimizer_set_step(opt, i, (int64_t)s->valuedouble);
    }
    if (st == KN_OK) {
        kn_rng_set_state(seed, offset);
        *steps_done = (int64_t)step->valuedouble;
    }
    cJSON_Delete(root);
    return st;
}

kn_status train_checkpoint_load(const char *dir, const train_job *job, kn_optimizer *opt, int64_t *steps_done) {
    char path[PATH_SIZE];
    join(path, dir, "latest");
    char *name = read_small_file(path, 255);
    if (!name) return kn_set_error(KN_ERR_IO, "%s: no checkpoint to resume from (missing %s)", dir, path);
    name[strcspn(name, "\r\n")] = '\0';
    if (strncmp(name, "step-", 5) != 0 || strchr(name, '/')) {
        kn_set_error(KN_ERR_IO, "%s: does not name a checkpoint ('%s')", path, name);
        free(name);
        return KN_ERR_IO;
    }
    char base[PATH_SIZE];
    bool fits = join(base, dir, name) && join(path, base, "optimizer.safetensors");
    free(name);
    if (!fits) return kn_set_error(KN_ERR_IO, "%s: the checkpoint directory's path is too long", dir);
    join(path, base, "model.safetensors");
    kn_no_grad_push();
    kn_status st = kn_safetensors_load_into(path, job->n_params, (const char *const *)job->names, job->params, KN_LOAD_STRICT);
    kn_no_grad_pop();
    join(path, base, "optimizer.safetensors");
    if (st == KN_OK) st = transfer_optimizer(path, opt, false);
    join(path, base, "state.json");
    if (st == KN_OK) st = load_state(path, job, opt, steps_done);
    return st;
}
