/* ResNet against torchvision: state_dict names, shapes and dtypes of resnet18 and resnet50,
 * ResNet-50's parameter count on the meta device, resnet18 logits in eval and train mode,
 * running statistics and one SGD step on the committed fixture (tests/fixtures/
 * make_resnet_fixture.py), and clear errors for files that do not fit. */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "resnet/resnet.h"

#define FIXTURE KILN_SOURCE_DIR "/tests/fixtures/resnet"
/* Logits and statistics agree with torchvision's to this fraction of their largest magnitude
 * (f32 throughout; the sums run in other orders). */
#define RTOL 1e-4

/* ---- the fixture's weight formula (make_resnet_fixture.py: formula) ------------------------- */
static uint64_t fnv1a64(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* Writes the formula's values of state_dict entry `name` into t (f32, or i64 zeros). */
static kn_status fill_formula(const char *name, kn_tensor *t) {
    kn_shape s = kn_shape_of(t);
    int64_t n = kn_numel(t);
    if (kn_dtype_of(t) == KN_I64) {
        int64_t zero = 0;
        kn_scope_push();
        kn_status st = kn_copy_(t, kn_from_host(&zero, KN_I64, s, KN_CPU));
        kn_scope_pop();
        return st;
    }
    float *v = malloc(sizeof *v * (size_t)n);
    if (!v) return kn_set_error(KN_ERR_OOM, "out of memory");
    const char *leaf = strrchr(name, '.') + 1;
    uint64_t h = fnv1a64(name);
    float conv_scale = s.n == 4 ? (float)sqrt(6.0 / (double)(s.v[0] * s.v[2] * s.v[3])) : 0;
    float fc_scale = (float)(1.0 / sqrt(512.0));
    for (int64_t i = 0; i < n; i++) {
        double u = (double)(kn_mix64(h + (uint64_t)i) >> 40) / 8388608.0 - 1.0;
        if (s.n == 4) v[i] = (float)u * conv_scale;
        else if (strncmp(name, "fc.", 3) == 0) v[i] = (float)u * fc_scale;
        else if (strcmp(leaf, "weight") == 0) v[i] = (float)(1.0 + 0.25 * u);
        else if (strcmp(leaf, "running_var") == 0) v[i] = (float)(1.0 + 0.25 * (u + 1.0));
        else v[i] = (float)(0.125 * u);
    }
    kn_scope_push();
    kn_status st = kn_copy_(t, kn_from_host(v, KN_F32, s, KN_CPU));
    kn_scope_pop();
    free(v);
    return st;
}

/* resnet18(num_classes=10) with the fixture's weights: conv1, bn1, layer1 and fc read from the
 * file torchvision wrote, the rest from the formula. */
static resnet *fixture_model(void) {
    resnet *m = resnet_new(18, 10, KN_F32);
    kn_named_tensors state = {0};
    kn_safetensors *stem = kn_safetensors_open(FIXTURE "/resnet18_stem.safetensors");
    CHECK(m && stem && kn_module_named(m, KN_STATE, &state) == KN_OK);
    int from_file = 0;
    kn_no_grad_push();
    for (int i = 0; i < state.count; i++) {
        bool in_file = kn_safetensors_find(stem, state.names[i]) >= 0;
        kn_status st = in_file ? kn_safetensors_read_into(stem, state.names[i], state.tensors[i], 0)
                               : fill_formula(state.names[i], state.tensors[i]);
        CHECK_MSG(st == KN_OK, "%s: %s", state.names[i], kn_last_error());
        from_file += in_file;
    }
    kn_no_grad_pop();
    CHECK(from_file == kn_safetensors_count(stem));
    kn_named_tensors_free(&state);
    kn_safetensors_close(stem);
    return m;
}

static kn_safetensors *reference(void) {
    kn_safetensors *f = kn_safetensors_open(FIXTURE "/resnet18_ref.safetensors");
    CHECK(f != NULL);
    return f;
}

/* max |got - want| <= RTOL * max |want| (and the shapes agree). */
static void check_rel(kn_tensor *got, kn_safetensors *ref, const char *name) {
    kn_scope_push();
    kn_tensor *want = kn_safetensors_get(ref, name, KN_CPU);
    CHECK_MSG(got && want && kn_numel(got) == kn_numel(want), "%s: missing or of another size", name);
    if (got && want && kn_numel(got) == kn_numel(want)) {
        double *g = read_f64(got), *w = read_f64(want), diff = 0, scale = 0;
        for (int64_t i = 0; g && w && i < kn_numel(want); i++) {
            diff = fmax(diff, fabs(g[i] - w[i]));
            scale = fmax(scale, fabs(w[i]));
        }
        CHECK_MSG(g && w && diff <= RTOL * scale, "%s: max difference %.3g, largest reference value %.3g", name,
                  diff, scale);
        free(g), free(w);
    }
    kn_scope_pop();
}

/* ---- tests ---------------------------------------------------------------------------------- */

/* Every entry of torchvision's state_dict, in order, with its dtype and shape. */
static void check_state_dict(resnet *m, const char *label) {
    kn_named_tensors state = {0};
    CHECK(m && kn_module_named(m, KN_STATE, &state) == KN_OK);
    FILE *f = fopen(FIXTURE "/state_dicts.txt", "r");
    CHECK(f != NULL);
    char line[512], model[32], name[256], dtype[8], dims[128];
    int i = 0;
    while (f && fgets(line, sizeof line, f)) {
        int fields = line[0] == '#' ? 0 : sscanf(line, "%31s %255s %7s %127s", model, name, dtype, dims);
        if (fields < 3 || strcmp(model, label) != 0) continue;
        if (fields == 3) dims[0] = '\0'; /* 0-d: no dims */
        CHECK_MSG(i < state.count && strcmp(state.names[i], name) == 0, "%s entry %d: kiln has %s, torchvision %s",
                  label, i, i < state.count ? state.names[i] : "nothing", name);
        if (i < state.count) {
            char have[128] = "";
            kn_shape s = kn_shape_of(state.tensors[i]);
            for (int d = 0; d < s.n; d++)
                snprintf(have + strlen(have), sizeof have - strlen(have), d ? ",%lld" : "%lld", (long long)s.v[d]);
            kn_dtype want = strcmp(dtype, "I64") == 0 ? KN_I64 : KN_F32;
            CHECK_MSG(strcmp(have, dims) == 0 && kn_dtype_of(state.tensors[i]) == want,
                      "%s %s: kiln [%s] %s, torchvision [%s] %s", label, name, have,
                      kn_dtype_name(kn_dtype_of(state.tensors[i])), dims, dtype);
        }
        i++;
    }
    CHECK_MSG(i == state.count && i > 0, "%s: torchvision has %d entries, kiln %d", label, i, state.count);
    if (f) fclose(f);
    kn_named_tensors_free(&state);
}

static void test_state_dicts_match_torchvision(void) {
    CHECK(kn_set_default_device(KN_META) == KN_OK); /* shapes only: nothing allocated */
    resnet *r18 = resnet_new(18, 10, KN_F32), *r50 = resnet_new(50, 1000, KN_F32);
    kn_set_default_device(KN_CPU);
    check_state_dict(r18, "resnet18");
    check_state_dict(r50, "resnet50");
    CHECK(kn_module_num_params(r18) == 11181642);
    CHECK(kn_module_num_params(r50) == 25557032);
    resnet_free(r18);
    resnet_free(r50);
}

static void test_resnet50_traces_on_meta_device(void) {
    CHECK(kn_set_default_device(KN_META) == KN_OK);
    kn_scope_push();
    resnet *m = resnet_new(50, 1000, KN_F32);
    kn_tensor *logits = resnet_forward(m, kn_zeros(KN_SHAPE(2, 3, 224, 224), KN_F32));
    CHECK(logits && CHECK_SHAPE(logits, KN_SHAPE(2, 1000)));
    kn_scope_pop();
    resnet_free(m);
    kn_set_default_device(KN_CPU);
}

/* The fixture model, built once (drawing torchvision's init for 11M weights takes a while),
 * and a copy of its state_dict that the tests reload and spoil. */
static resnet *model;
static char dir[] = "/tmp/kiln_resnet_XXXXXX", saved_path[64];

static void check_eval_logits(resnet *m, kn_safetensors *ref, const char *name) {
    kn_module_train(m, false);
    kn_no_grad_push();
    check_rel(resnet_forward(m, kn_safetensors_get(ref, "input", KN_CPU)), ref, name);
    kn_no_grad_pop();
}

static void test_logits_running_stats_and_sgd_step_match_torchvision(void) {
    kn_scope_push();
    kn_safetensors *ref = reference();
    kn_tensor *x = kn_safetensors_get(ref, "input", KN_CPU), *labels = kn_safetensors_get(ref, "labels", KN_CPU);
    check_eval_logits(model, ref, "logits_eval");

    kn_module_train(model, true);
    kn_tensor *logits = resnet_forward(model, x);
    check_rel(logits, ref, "logits_train");
    kn_tensor *loss = kn_cross_entropy(logits, labels, KN_CE_OPTS_DEFAULT);
    check_rel(loss, ref, "loss");
    kn_named_tensors buffers = {0}, params = {0};
    CHECK(kn_module_named(model, KN_BUFFERS, &buffers) == KN_OK && buffers.count == 3 * 20);
    for (int i = 0; i < buffers.count; i++) {
        char name[256];
        snprintf(name, sizeof name, "train.%s", buffers.names[i]);
        check_rel(buffers.tensors[i], ref, name);
    }

    CHECK(kn_backward(loss) == KN_OK);
    CHECK(kn_module_named(model, KN_PARAMS, &params) == KN_OK);
    kn_param_group g = kn_sgd_group(params.tensors, params.count, 0.05, 0.9, 1e-4);
    kn_optimizer *opt = kn_sgd_new(&g, 1);
    CHECK(opt && kn_optimizer_step(opt) == KN_OK);
    check_eval_logits(model, ref, "logits_after_step");

    kn_optimizer_free(opt);
    kn_named_tensors_free(&buffers);
    kn_named_tensors_free(&params);
    kn_safetensors_close(ref);
    kn_scope_pop();
}

/* After the step above changed weights and running statistics, the saved state_dict puts
 * every one of them back. */
static void test_saved_state_dict_loads_back(void) {
    kn_scope_push();
    kn_safetensors *ref = reference();
    CHECK(resnet_load(model, saved_path) == KN_OK);
    check_eval_logits(model, ref, "logits_eval");
    kn_safetensors_close(ref);
    kn_scope_pop();
}

/* The saved state_dict with entry `name` replaced by `value`, written to path. */
static void save_spoiled(const char *path, const char *name, kn_tensor *value) {
    kn_named_tensors state = {0};
    CHECK(kn_module_named(model, KN_STATE, &state) == KN_OK);
    for (int i = 0; i < state.count; i++)
        if (strcmp(state.names[i], name) == 0) state.tensors[i] = value;
    CHECK(kn_safetensors_save(path, state.count, (const char *const *)state.names, state.tensors, NULL, NULL, 0) == KN_OK);
    kn_named_tensors_free(&state);
}

static void test_bad_files_give_clear_errors(void) {
    kn_scope_push();
    char path[96];
    snprintf(path, sizeof path, "%s/spoiled.safetensors", dir);
    CHECK(kn_set_default_device(KN_META) == KN_OK); /* loading into it only checks */
    resnet *m = resnet_new(18, 10, KN_F32);
    kn_set_default_device(KN_CPU);
    save_spoiled(path, "fc.weight", kn_zeros(KN_SHAPE(5, 512), KN_F32));
    CHECK_ERROR(resnet_load(m, path) == KN_OK, KN_ERR_SHAPE, "fc.weight");
    CHECK_ERROR(resnet_load(m, path) == KN_OK, KN_ERR_SHAPE, "spoiled.safetensors");
    save_spoiled(path, "bn1.num_batches_tracked", kn_zeros(KN_SHAPE0, KN_F32));
    CHECK_ERROR(resnet_load(m, path) == KN_OK, KN_ERR_DTYPE, "bn1.num_batches_tracked");
    /* torchvision's own file with only the stem, layer1 and fc */
    CHECK_ERROR(resnet_load(m, FIXTURE "/resnet18_stem.safetensors") == KN_OK, KN_ERR_ARG, "layer2.0.conv1.weight");
    CHECK_ERROR(resnet_load(m, FIXTURE "/no_such_file.safetensors") == KN_OK, KN_ERR_IO, "no_such_file");
    CHECK_ERROR(resnet_new(19, 10, KN_F32) != NULL, KN_ERR_ARG, "depth 19");
    CHECK_ERROR(resnet_new(18, 0, KN_F32) != NULL, KN_ERR_ARG, "num_classes");
    resnet_free(m);
    unlink(path);
    kn_scope_pop();
}

int main(void) {
    model = fixture_model();
    CHECK(mkdtemp(dir) != NULL);
    snprintf(saved_path, sizeof saved_path, "%s/resnet18.safetensors", dir);
    CHECK(resnet_save(model, saved_path) == KN_OK);
    RUN(test_state_dicts_match_torchvision);
    RUN(test_resnet50_traces_on_meta_device);
    RUN(test_logits_running_stats_and_sgd_step_match_torchvision);
    RUN(test_saved_state_dict_loads_back);
    RUN(test_bad_files_give_clear_errors);
    resnet_free(model);
    unlink(saved_path);
    rmdir(dir);
    return test_summary();
}
