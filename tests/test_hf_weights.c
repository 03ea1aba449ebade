/* Hugging Face weight directories (kiln/hf.h): single files and shards behind an index,
 * zero-copy views of the mapping that outlive the open file and never write to it, dtype
 * conversion and the meta device, loading a module tree (tied weights, optional names, checks
 * before any assignment), kn_tensor_assign_, and every damaged directory refused with a message. */
#define _GNU_SOURCE /* mkdtemp */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static char tmp_dir[64];

static const char *path_in(const char *dir, const char *name) {
    static char bufs[8][512];
    static int next;
    char *b = bufs[next++ % 8];
    snprintf(b, sizeof bufs[0], "%s/%s%s%s", tmp_dir, dir, *name ? "/" : "", name);
    return b;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f || fputs(text, f) < 0) test_fail(__FILE__, __LINE__, "cannot write %s", path);
    if (f) fclose(f);
}

static const char *make_dir(const char *name) {
    const char *p = path_in(name, "");
    mkdir(p, 0755);
    return p;
}

static kn_tensor *arange_f32(int64_t rows, int64_t cols, double start) {
    return kn_reshape(kn_arange(start, start + (double)(rows * cols), 1, KN_F32), KN_SHAPE(rows, cols));
}

/* dir/model.safetensors with "a" f32[2, 3] = 0..5 and "b" f32[4] = 10..13. */
static void write_single(const char *dir) {
    make_dir(dir);
    kn_scope_push();
    kn_tensor *t[2] = {arange_f32(2, 3, 0), kn_arange(10, 14, 1, KN_F32)};
    CHECK(kn_safetensors_save(path_in(dir, "model.safetensors"), 2, (const char *[]){"a", "b"}, t, NULL, NULL, 0) ==
          KN_OK);
    kn_scope_pop();
}

/* Two shards and their index: "a" in the first, "b" and "c" (i64) in the second. */
static void write_sharded(const char *dir, const char *index) {
    make_dir(dir);
    kn_scope_push();
    kn_tensor *first[1] = {arange_f32(2, 3, 0)};
    kn_tensor *second[2] = {kn_arange(10, 14, 1, KN_F32), kn_arange(0, 3, 1, KN_I64)};
    CHECK(kn_safetensors_save(path_in(dir, "model-00001-of-00002.safetensors"), 1, (const char *[]){"a"}, first, NULL,
                              NULL, 0) == KN_OK);
    CHECK(kn_safetensors_save(path_in(dir, "model-00002-of-00002.safetensors"), 2, (const char *[]){"b", "c"}, second,
                              NULL, NULL, 0) == KN_OK);
    kn_scope_pop();
    write_text(path_in(dir, "model.safetensors.index.json"), index);
}

static const char *good_index = "{\"metadata\": {\"total_size\": 64}, \"weight_map\": {"
                                "\"a\": \"model-00001-of-00002.safetensors\", "
                                "\"b\": \"model-00002-of-00002.safetensors\", "
                                "\"c\": \"model-00002-of-00002.safetensors\"}}";

static double value_at(kn_tensor *t, int64_t i) {
    double *v = read_f64(t);
    double x = v ? v[i] : NAN;
    free(v);
    return x;
}

static void test_single_file_is_mapped_not_copied(void) {
    write_single("single");
    kn_hf_weights *w = kn_hf_weights_open(path_in("single", ""));
    CHECK(w && kn_hf_weights_count(w) == 2);
    int a = kn_hf_weights_find(w, "a");
    CHECK(a >= 0 && kn_hf_weights_dtype(w, a) == KN_F32 && kn_hf_weights_shape(w, a).n == 2);
    CHECK(kn_hf_weights_find(w, "nope") == -1);
    CHECK(kn_hf_weights_bytes(w) == 40);
    kn_memory_stats before, after;
    kn_memory_stats_get(KN_CPU, &before);
    kn_tensor *t = kn_hf_weights_get(w, "a", KN_CPU, KN_DTYPE_COUNT);
    kn_memory_stats_get(KN_CPU, &after);
    CHECK(t && after.allocated_bytes == before.allocated_bytes); /* a view of the mapping */
    kn_hf_weights_close(w);                                       /* the tensor keeps the mapping */
    CHECK(value_at(t, 5) == 5);
    /* Writing in place (training) changes the process's copy, never the file. */
    CHECK(kn_copy_(t, kn_full(KN_SHAPE(2, 3), -1, KN_F32)) == KN_OK);
    CHECK(value_at(t, 0) == -1);
    kn_release(t);
    w = kn_hf_weights_open(path_in("single", "model.safetensors"));
    t = kn_hf_weights_get(w, "a", KN_CPU, KN_DTYPE_COUNT);
    CHECK(value_at(t, 0) == 0);
    kn_release(t);
    kn_hf_weights_close(w);
}

static void test_dtypes_and_meta(void) {
    write_single("dtypes");
    kn_hf_weights *w = kn_hf_weights_open(path_in("dtypes", ""));
    kn_tensor *h = kn_hf_weights_get(w, "a", KN_CPU, KN_BF16);
    CHECK(h && kn_dtype_of(h) == KN_BF16 && value_at(h, 5) == 5);
    kn_tensor *m = kn_hf_weights_get(w, "b", KN_META, KN_F16);
    CHECK(m && kn_device_of(m).type == KN_DEVICE_META && kn_dtype_of(m) == KN_F16 && kn_numel(m) == 4);
    CHECK_ERROR(kn_hf_weights_get(w, "a", KN_CPU, KN_I32) != NULL, KN_ERR_DTYPE, "cannot become i32");
    CHECK_ERROR(kn_hf_weights_get(w, "zz", KN_CPU, KN_F32) != NULL, KN_ERR_ARG, "no tensor named 'zz'");
    kn_release(h);
    kn_release(m);
    kn_hf_weights_close(w);
}

static void test_sharded(void) {
    write_sharded("sharded", good_index);
    const char *paths[] = {path_in("sharded", ""), path_in("sharded", "model.safetensors.index.json")};
    for (int p = 0; p < 2; p++) {
        kn_hf_weights *w = kn_hf_weights_open(paths[p]);
        CHECK(w && kn_hf_weights_count(w) == 3);
        int c = kn_hf_weights_find(w, "c");
        CHECK(c >= 0 && kn_hf_weights_dtype(w, c) == KN_I64 && strstr(kn_hf_weights_file(w, c), "00002"));
        kn_tensor *b = kn_hf_weights_get(w, "b", KN_CPU, KN_F64);
        CHECK(b && value_at(b, 3) == 13);
        kn_release(b);
        kn_hf_weights_close(w);
    }
}

static void test_bad_directories(void) {
    CHECK_ERROR(kn_hf_weights_open(path_in("absent", "")) != NULL, KN_ERR_IO, "no such file");
    make_dir("empty");
    CHECK_ERROR(kn_hf_weights_open(path_in("empty", "")) != NULL, KN_ERR_IO, "no model.safetensors");
    write_sharded("noindex", good_index);
    unlink(path_in("noindex", "model.safetensors.index.json"));
    CHECK_ERROR(kn_hf_weights_open(path_in("noindex", "")) != NULL, KN_ERR_IO, "no model.safetensors.index.json");
    write_sharded("missing", good_index);
    unlink(path_in("missing", "model-00002-of-00002.safetensors"));
    CHECK_ERROR(kn_hf_weights_open(path_in("missing", "")) != NULL, KN_ERR_IO, "is missing");
    write_sharded("unlisted", "{\"weight_map\": {\"a\": \"model-00001-of-00002.safetensors\", "
                              "\"b\": \"model-00002-of-00002.safetensors\"}}");
    CHECK_ERROR(kn_hf_weights_open(path_in("unlisted", "")) != NULL, KN_ERR_IO, "holds 'c', which the index does not list");
    write_sharded("wrongshard", "{\"weight_map\": {\"a\": \"model-00002-of-00002.safetensors\", "
                                "\"b\": \"model-00002-of-00002.safetensors\", \"c\": \"model-00002-of-00002.safetensors\"}}");
    CHECK_ERROR(kn_hf_weights_open(path_in("wrongshard", "")) != NULL, KN_ERR_IO, "'a' is listed in");
    write_sharded("ghost", "{\"weight_map\": {\"a\": \"model-00001-of-00002.safetensors\", \"b\": "
                           "\"model-00002-of-00002.safetensors\", \"c\": \"model-00002-of-00002.safetensors\", "
                           "\"d\": \"model-00001-of-00002.safetensors\"}}");
    CHECK_ERROR(kn_hf_weights_open(path_in("ghost", "")) != NULL, KN_ERR_IO, "no shard holds it");
    write_sharded("badjson", "{\"weight_map\": {\"a\": ");
    CHECK_ERROR(kn_hf_weights_open(path_in("badjson", "")) != NULL, KN_ERR_IO, "not valid JSON");
    /* the index is read as Python's json reads it: nothing after the value; a repeated key
     * keeps its last value (here the right shard) */
    write_sharded("trailing", "{\"weight_map\": {\"a\": \"model-00001-of-00002.safetensors\", \"b\": "
                              "\"model-00002-of-00002.safetensors\", \"c\": \"model-00002-of-00002.safetensors\"}} x");
    CHECK_ERROR(kn_hf_weights_open(path_in("trailing", "")) != NULL, KN_ERR_IO,
                "model.safetensors.index.json: not valid JSON (bytes after the value, line 1)");
    write_sharded("repeated", "{\"weight_map\": {\"a\": \"model-00002-of-00002.safetensors\", \"b\": "
                              "\"model-00002-of-00002.safetensors\", \"c\": \"model-00002-of-00002.safetensors\", "
                              "\"a\": \"model-00001-of-00002.safetensors\"}}");
    kn_hf_weights *repeated = kn_hf_weights_open(path_in("repeated", ""));
    CHECK_MSG(repeated && kn_hf_weights_count(repeated) == 3, "%s", kn_last_error());
    CHECK(repeated && strstr(kn_hf_weights_file(repeated, kn_hf_weights_find(repeated, "a")), "model-00001-of-00002"));
    kn_hf_weights_close(repeated);
    write_sharded("nomap", "{\"metadata\": {}}");
    CHECK_ERROR(kn_hf_weights_open(path_in("nomap", "")) != NULL, KN_ERR_IO, "\"weight_map\" is missing");
    write_sharded("escape", "{\"weight_map\": {\"a\": \"../single/model.safetensors\"}}");
    CHECK_ERROR(kn_hf_weights_open(path_in("escape", "")) != NULL, KN_ERR_IO, "not a file name");
    /* A shard cut short is refused by its own header check, named. */
    write_single("truncated");
    CHECK(truncate(path_in("truncated", "model.safetensors"), 60) == 0);
    CHECK_ERROR(kn_hf_weights_open(path_in("truncated", "")) != NULL, KN_ERR_IO, "model.safetensors");
}

/* root { w1 [2, 3], b [4], child { w2 (tied to w1) } }, built on the meta device. */
typedef struct tied_model {
    kn_module base;
    kn_tensor *w1, *b;
    kn_module *child;
} tied_model;

static tied_model *tied_model_new(void) {
    kn_device was = kn_default_device();
    kn_set_default_device(KN_META);
    tied_model *m = kn_module_alloc(sizeof *m, "Tied");
    kn_tensor *w = kn_empty(KN_SHAPE(2, 3), KN_F32);
    m->w1 = kn_module_param(m, "w1", w);
    m->b = kn_module_param(m, "b", kn_empty(KN_SHAPE(4), KN_F32));
    m->child = kn_module_add(m, "child", kn_module_alloc(sizeof(kn_module), "Child"));
    kn_module_param(m->child, "w2", w);
    kn_release(w);
    kn_set_default_device(was);
    return kn_module_check(m);
}

static void test_load_module(void) {
    write_single("module");
    kn_hf_weights *w = kn_hf_weights_open(path_in("module", ""));
    tied_model *m = tied_model_new();
    CHECK(m != NULL);
    const char *optional[] = {"child.w2", NULL};
    /* The file stores w1 as "a": without a rename, w1 is missing. */
    kn_hf_load_opts o = {.device = KN_CPU, .dtype = KN_DTYPE_COUNT, .optional = optional};
    CHECK_ERROR(kn_hf_load_module(m, w, &o, NULL) == KN_OK, KN_ERR_ARG, "no tensor 'w1'");
    CHECK(kn_device_of(m->w1).type == KN_DEVICE_META); /* unchanged after the failure */
    kn_hf_weights_close(w);
    kn_module_free(m);
}

static const char *a_for_w1(void *ctx, const char *name, char *buf, size_t n) {
    (void)ctx;
    snprintf(buf, n, "%s", strcmp(name, "w1") == 0 ? "a" : name);
    return buf;
}

static void test_load_module_tied_and_renamed(void) {
    write_single("module2");
    kn_hf_weights *w = kn_hf_weights_open(path_in("module2", ""));
    tied_model *m = tied_model_new();
    const char *optional[] = {"child.w2", NULL};
    kn_hf_load_opts o = {.device = KN_CPU, .dtype = KN_BF16, .rename = a_for_w1, .optional = optional};
    int unused = -1;
    CHECK(kn_hf_load_module(m, w, &o, &unused) == KN_OK);
    CHECK(unused == 0);
    kn_tensor *w2 = kn_module_get(m, "child.w2");
    CHECK(kn_device_of(m->w1).type == KN_DEVICE_CPU && kn_dtype_of(m->w1) == KN_BF16);
    CHECK(kn_shares_storage(m->w1, w2)); /* the tie survives */
    CHECK(value_at(w2, 4) == 4 && value_at(m->b, 0) == 10);
    kn_hf_weights_close(w);
    kn_module_free(m);
}

static void test_load_module_checks_first(void) {
    make_dir("mismatch");
    kn_scope_push();
    kn_tensor *t[2] = {arange_f32(3, 2, 0), kn_arange(0, 4, 1, KN_F32)};
    CHECK(kn_safetensors_save(path_in("mismatch", "model.safetensors"), 2, (const char *[]){"b", "w1"}, t, NULL, NULL,
                              0) == KN_OK);
    kn_scope_pop();
    kn_hf_weights *w = kn_hf_weights_open(path_in("mismatch", ""));
    tied_model *m = tied_model_new();
    const char *optional[] = {"child.w2", NULL};
    kn_hf_load_opts o = {.device = KN_CPU, .dtype = KN_DTYPE_COUNT, .optional = optional};
    /* "b" comes after "w1" in the module: its mismatch must still leave w1 unassigned. */
    CHECK_ERROR(kn_hf_load_module(m, w, &o, NULL) == KN_OK, KN_ERR_SHAPE, "tensor 'w1' is F32[4]");
    CHECK(kn_device_of(m->w1).type == KN_DEVICE_META && kn_device_of(m->b).type == KN_DEVICE_META);
    kn_hf_weights_close(w);
    kn_module_free(m);
}

static void test_assign(void) {
    kn_scope_push();
    kn_tensor *p = kn_zeros(KN_SHAPE(2, 2), KN_F32);
    kn_requires_grad(p, true);
    kn_tensor *src = kn_reshape(kn_arange(0, 4, 1, KN_F64), KN_SHAPE(2, 2));
    CHECK(kn_tensor_assign_(p, src) == KN_OK);
    CHECK(kn_dtype_of(p) == KN_F64 && kn_shares_storage(p, src) && kn_needs_grad(p));
    CHECK_ERROR(kn_tensor_assign_(p, kn_zeros(KN_SHAPE(4), KN_F32)) == KN_OK, KN_ERR_SHAPE, "shapes differ");
    kn_tensor *y = kn_mul_scalar(p, 2);
    CHECK_ERROR(kn_tensor_assign_(y, src) == KN_OK, KN_ERR_ARG, "gradient history");
    kn_scope_pop();
}

int main(void) {
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/kiln-hf-XXXXXX");
    if (!mkdtemp(tmp_dir)) return perror("mkdtemp"), 1;
    RUN(test_single_file_is_mapped_not_copied);
    RUN(test_dtypes_and_meta);
    RUN(test_sharded);
    RUN(test_bad_directories);
    RUN(test_load_module);
    RUN(test_load_module_tied_and_renamed);
    RUN(test_load_module_checks_first);
    RUN(test_assign);
    remove_tree(tmp_dir);
    return test_summary();
}
