/* Fuzz target: the state.json of a `kiln train` checkpoint, through train_checkpoint_load
 * (tools/kiln/train_checkpoint.c, compiled into the target). A checkpoint of a job with two
 * parameters and their AdamW moments is written once; each input is its state.json. A state
 * that loads gives exactly the step and per-parameter step counts the file holds. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <sys/stat.h>

#include "fuzz.h"
#include "train_checkpoint.h"

#define STEP_DIR "step-00000001"

static char *names[] = {"w", "b"};
static kn_tensor *params[2];
static kn_optimizer *opt;
static train_job job;
static char ckpt[4200];

static void save(const char *file, int n, const char *const *tensor_names, kn_tensor *const *tensors) {
    char path[4300];
    snprintf(path, sizeof path, "%s/" STEP_DIR "/%s", ckpt, file);
    kn_clear_error();
    fuzz_require(kn_safetensors_save(path, n, tensor_names, tensors, NULL, NULL, 0) == KN_OK,
                 "cannot write the checkpoint: %s", kn_last_error());
}

/* The checkpoint but its state.json: `latest`, the weights and the optimizer's moments. */
static void make_checkpoint(void) {
    params[0] = kn_zeros(KN_SHAPE(2, 3), KN_F32);
    params[1] = kn_zeros(KN_SHAPE(3), KN_F32);
    kn_param_group group = kn_adamw_group(params, 2, 1e-3, 0);
    opt = kn_adamw_new(&group, 1);
    fuzz_require(params[0] && params[1] && opt, "cannot make the job: %s", kn_last_error());
    job = (train_job){.task = "fuzz", .n_params = 2, .names = names, .params = params};
    snprintf(ckpt, sizeof ckpt, "%s/checkpoints", fuzz_dir());
    char step_dir[4300];
    snprintf(step_dir, sizeof step_dir, "%s/" STEP_DIR, ckpt);
    fuzz_require(mkdir(ckpt, 0700) == 0 && mkdir(step_dir, 0700) == 0, "cannot make %s", step_dir);
    fuzz_write("checkpoints/latest", STEP_DIR "\n", sizeof STEP_DIR);
    save("model.safetensors", 2, (const char *const *)names, params);
    int n = kn_optimizer_state_count(opt);
    const char *state_names[8];
    kn_tensor *state[8];
    fuzz_require(n <= 8, "AdamW has %d state tensors for 2 parameters", n);
    for (int i = 0; i < n; i++) state[i] = kn_optimizer_state_tensor(opt, i, &state_names[i]);
    save("optimizer.safetensors", n, state_names, state);
    for (int i = 0; i < n; i++) kn_release(state[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!opt) make_checkpoint();
    fuzz_write("checkpoints/" STEP_DIR "/state.json", data, size);
    int64_t steps = -1;
    kn_clear_error();
    if (fuzz_failed(train_checkpoint_load(ckpt, &job, opt, &steps) != KN_OK, "train_checkpoint_load")) return 0;
    /* the loader read the file: it is one JSON value with these members */
    fuzz_require(fuzz_is_json(data, size), "train_checkpoint_load accepts a state that is not one JSON value");
    cJSON *root = cJSON_ParseWithLength((const char *)data, size);
    const cJSON *step = fuzz_json_member(root, "step");
    const cJSON *counts = fuzz_json_member(root, "param_steps");
    fuzz_require(cJSON_IsNumber(step) && cJSON_GetArraySize(counts) == 2, "a state without step or param_steps loads");
    fuzz_require(steps >= 0 && (double)steps == step->valuedouble, "\"step\": %.17g loads as step %lld",
                 step->valuedouble, (long long)steps);
    for (int i = 0; i < 2; i++) {
        const cJSON *count = cJSON_GetArrayItem(counts, i);
        int64_t got = kn_optimizer_get_step(opt, i);
        fuzz_require(cJSON_IsNumber(count) && got >= 0 && (double)got == count->valuedouble,
                     "\"param_steps\"[%d]: %.17g loads as %lld", i, cJSON_IsNumber(count) ? count->valuedouble : 0.0,
                     (long long)got);
    }
    cJSON_Delete(root);
    return 0;
}
