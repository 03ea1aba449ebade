/* safetensors and atomic writes: round trips of every dtype and layout, the exact byte layout,
 * a file made by Hugging Face's own library (tests/fixtures/make_safetensors_fixture.py) read
 * exactly and written back byte for byte, loading into existing tensors with its checks, old
 * files surviving failed writes, and every kind of damaged file refused with a message. */
#define _GNU_SOURCE /* mkdtemp */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static char tmp_dir[64];

/* tmp_dir/name, in one of a few rotating buffers. */
static const char *tmp_path(const char *name) {
    static char bufs[8][256];
    static int next;
    char *b = bufs[next++ % 8];
    snprintf(b, sizeof bufs[0], "%s/%s", tmp_dir, name);
    return b;
}

static void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n) test_fail(__FILE__, __LINE__, "cannot write %s", path);
    if (f) fclose(f);
}

/* The whole file (malloc'd; *n its size), or NULL if it cannot be read. */
static unsigned char *read_bytes(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)size + 1);
    *n = fread(b, 1, (size_t)size, f);
    fclose(f);
    return b;
}

static bool file_is(const char *path, const char *text) {
    size_t n = 0;
    unsigned char *b = read_bytes(path, &n);
    bool same = b && n == strlen(text) && memcmp(b, text, n) == 0;
    free(b);
    return same;
}

/* Temporary files left in tmp_dir by the atomic writer. */
static int temp_files_left(void) {
    DIR *d = opendir(tmp_dir);
    int count = 0;
    for (struct dirent *e; d && (e = readdir(d));) count += strstr(e->d_name, ".tmp.") != NULL;
    if (d) closedir(d);
    return count;
}

/* A safetensors file from a header and data bytes (zeros when data is NULL), by hand. */
static void write_st(const char *path, const char *json, const void *data, size_t data_n) {
    size_t json_n = strlen(json), n = 8 + json_n + data_n;
    unsigned char *b = calloc(n, 1);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)json_n >> (8 * i));
    memcpy(b + 8, json, json_n);
    if (data) memcpy(b + 8 + json_n, data, data_n);
    write_bytes(path, b, n);
    free(b);
}

/* Same dtype, shape and bytes. */
static bool same_tensor(kn_tensor *a, kn_tensor *b) {
    if (!a || !b || kn_dtype_of(a) != kn_dtype_of(b) || kn_ndim(a) != kn_ndim(b)) return false;
    for (int d = 0; d < kn_ndim(a); d++)
        if (kn_size(a, d) != kn_size(b, d)) return false;
    size_t n = (size_t)kn_numel(a) * kn_dtype_size(kn_dtype_of(a));
    unsigned char *x = malloc(n + 1), *y = malloc(n + 1);
    bool same = kn_to_host(a, x, n) == KN_OK && kn_to_host(b, y, n) == KN_OK && memcmp(x, y, n) == 0;
    free(x);
    free(y);
    return same;
}

static bool same_shape(kn_shape a, kn_shape b) {
    return a.n == b.n && memcmp(a.v, b.v, sizeof(int64_t) * (size_t)a.n) == 0;
}

/* ---- round trips -------------------------------------------------------------------------- */

static void test_round_trip_every_dtype_and_shape(void) {
    enum { PER = 4, N = PER * KN_DTYPE_COUNT };
    kn_tensor *ts[N];
    char name_buf[N][32];
    const char *names[N];
    for (int k = 0; k < KN_DTYPE_COUNT; k++) {
        kn_dtype dt = ALL_DTYPES[k];
        kn_tensor *base = rand_tensor(KN_SHAPE(3, 4), dt, -100, 100);
        ts[PER * k] = rand_tensor(KN_SHAPE(2, 3, 4), dt, -100, 100);
        ts[PER * k + 1] = kn_scalar(dt == KN_BOOL ? 1 : -7.5, dt);   /* 0-d */
        ts[PER * k + 2] = kn_zeros(KN_SHAPE(0, 5), dt);              /* empty */
        ts[PER * k + 3] = kn_slice(kn_transpose(base, 0, 1), 0, 3, 0, -2); /* strided, backwards */
        const char *kinds[PER] = {"dense", "scalar", "empty", "view"};
        for (int j = 0; j < PER; j++) {
            snprintf(name_buf[PER * k + j], 32, "%s.%s", kn_dtype_name(dt), kinds[j]);
            names[PER * k + j] = name_buf[PER * k + j];
        }
    }
    const char *p = tmp_path("all.safetensors");
    CHECK(kn_safetensors_save(p, N, names, ts, NULL, NULL, 0) == KN_OK);
    kn_safetensors *f = kn_safetensors_open(p);
    CHECK(f != NULL);
    CHECK(kn_safetensors_count(f) == N);
    CHECK(kn_safetensors_metadata_count(f) == 0);
    CHECK(strcmp(kn_safetensors_path(f), p) == 0);
    for (int i = 0; f && i < N; i++) {
        CHECK_MSG(strcmp(kn_safetensors_name(f, i), names[i]) == 0, "entry %d is '%s', want '%s' (caller's order)", i,
                  kn_safetensors_name(f, i), names[i]);
        CHECK(kn_safetensors_find(f, names[i]) == i);
        CHECK(kn_safetensors_dtype(f, i) == kn_dtype_of(ts[i]));
        CHECK(same_shape(kn_safetensors_shape(f, i), kn_shape_of(ts[i])));
        kn_tensor *back = kn_safetensors_get(f, names[i], KN_CPU);
        CHECK_MSG(same_tensor(back, ts[i]), "%s: read back differs from what was saved", names[i]);
        kn_tensor *shape_only = kn_safetensors_get(f, names[i], KN_META);
        CHECK(shape_only && kn_device_of(shape_only).type == KN_DEVICE_META &&
              same_shape(kn_shape_of(shape_only), kn_shape_of(ts[i])));
    }
    kn_safetensors_close(f);
    /* No tensors at all is a valid file too. */
    CHECK(kn_safetensors_save(p, 0, NULL, NULL, NULL, NULL, 0) == KN_OK);
    f = kn_safetensors_open(p);
    CHECK(f && kn_safetensors_count(f) == 0);
    kn_safetensors_close(f);
}

static void test_non_contiguous_sources(void) {
    kn_tensor *x = rand_tensor(KN_SHAPE(4, 6), KN_F32, -1, 1);
    kn_tensor *views[] = {
        kn_transpose(x, 0, 1),
        kn_slice(x, 1, 5, -100, -2),
        kn_expand(kn_select(x, 0, 2), KN_SHAPE(3, 6)), /* stride 0 */
        non_contiguous_copy(kn_cast(x, KN_BF16)),
    };
    const char *names[] = {"t", "s", "e", "nc"};
    const char *p = tmp_path("views.safetensors");
    CHECK(kn_safetensors_save(p, 4, names, views, NULL, NULL, 0) == KN_OK);
    kn_safetensors *f = kn_safetensors_open(p);
    for (int i = 0; i < 4; i++)
        CHECK_MSG(same_tensor(kn_safetensors_get(f, names[i], KN_CPU), kn_contiguous(views[i])), "view %s", names[i]);
    kn_safetensors_close(f);
}

static void test_metadata_and_names_round_trip(void) {
    const char *keys[] = {"format", "quote\"and\\slash", "ünïcode ✓", "empty"};
    const char *values[] = {"pt", "line\nbreak\ttab", "値", ""};
    const char *names[] = {"layers.0.attn.w\"q\"", "émbed", ""};
    kn_tensor *ts[] = {kn_ones(KN_SHAPE(2), KN_F32), kn_zeros(KN_SHAPE(1), KN_I64), kn_scalar(1, KN_BOOL)};
    const char *p = tmp_path("meta.safetensors");
    CHECK(kn_safetensors_save(p, 3, names, ts, keys, values, 4) == KN_OK);
    kn_safetensors *f = kn_safetensors_open(p);
    CHECK(f != NULL);
    CHECK(kn_safetensors_metadata_count(f) == 4);
    for (int i = 0; f && i < 4; i++) {
        CHECK(strcmp(kn_safetensors_metadata_key(f, i), keys[i]) == 0);
        CHECK(strcmp(kn_safetensors_metadata(f, keys[i]), values[i]) == 0);
    }
    CHECK(kn_safetensors_metadata(f, "absent") == NULL);
    CHECK(kn_last_status() == KN_OK);
    for (int i = 0; f && i < 3; i++) CHECK(same_tensor(kn_safetensors_get(f, names[i], KN_CPU), ts[i]));
    CHECK_ERROR(kn_safetensors_metadata_key(f, 4) != NULL, KN_ERR_INDEX, "metadata index 4");
    kn_safetensors_close(f);
}

/* ---- the byte layout ------------------------------------------------------------------------- */

static uint64_t json_u64(const cJSON *arr, int i) { return (uint64_t)cJSON_GetArrayItem(arr, i)->valuedouble; }

static void test_header_byte_layout(void) {
    const uint8_t bools[3] = {1, 0, 1};
    const uint16_t halves[3] = {0x3c00, 0xc000, 0x7bff};
    const float floats[2] = {1.5f, -0.25f};
    const int64_t longs[1] = {-3};
    kn_tensor *ts[] = {kn_from_host(bools, KN_BOOL, KN_SHAPE(3), KN_CPU), kn_from_host(halves, KN_F16, KN_SHAPE(3), KN_CPU),
                       kn_from_host(floats, KN_F32, KN_SHAPE(2, 1), KN_CPU), kn_from_host(longs, KN_I64, KN_SHAPE0, KN_CPU)};
    const char *names[] = {"b", "h", "w", "l"}, *key = "k", *value = "v";
    const char *p = tmp_path("layout.safetensors");
    CHECK(kn_safetensors_save(p, 4, names, ts, &key, &value, 1) == KN_OK);
    size_t n = 0;
    unsigned char *b = read_bytes(p, &n);
    if (!b || n < 8) {
        test_fail(__FILE__, __LINE__, "cannot read %s back", p);
        free(b);
        return;
    }
    uint64_t len = 0;
    for (int i = 0; i < 8; i++) len |= (uint64_t)b[i] << (8 * i);
    CHECK_MSG(len % 8 == 0, "header length %llu is not a multiple of 8", (unsigned long long)len);
    CHECK_MSG(n == 8 + len + 25, "file has %zu bytes, want 8 + %llu + 25", n, (unsigned long long)len);
    const char *json = (const char *)b + 8, *end = NULL;
    cJSON *h = cJSON_ParseWithLengthOpts(json, (size_t)len, &end, 0);
    CHECK(h != NULL);
    for (const char *c = end; h && c < json + len; c++) CHECK_MSG(*c == ' ', "padding byte %td is %d", c - json, *c);
    CHECK_MSG(end && json + len - end < 8, "more padding than needed");
    /* __metadata__ first, then the tensors in the caller's order; data widest element first. */
    const char *order[] = {"__metadata__", "b", "h", "w", "l"};
    int k = 0;
    for (const cJSON *e = h ? h->child : NULL; e; e = e->next, k++) CHECK(k < 5 && strcmp(e->string, order[k]) == 0);
    CHECK(k == 5);
    struct { const char *name, *dtype; uint64_t begin, end; int ndim; } want[] = {
        {"l", "I64", 0, 8, 0}, {"w", "F32", 8, 16, 2}, {"h", "F16", 16, 22, 1}, {"b", "BOOL", 22, 25, 1}};
    for (int i = 0; h && i < 4; i++) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(h, want[i].name);
        const cJSON *offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
        CHECK(strcmp(cJSON_GetObjectItemCaseSensitive(e, "dtype")->valuestring, want[i].dtype) == 0);
        CHECK(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(e, "shape")) == want[i].ndim);
        CHECK_MSG(json_u64(offs, 0) == want[i].begin && json_u64(offs, 1) == want[i].end, "offsets of %s", want[i].name);
    }
    CHECK(strcmp(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(h, "__metadata__"), "k")->valuestring,
                 "v") == 0);
    const unsigned char *data = b + 8 + len;
    CHECK(memcmp(data, longs, 8) == 0);
    CHECK(memcmp(data + 8, floats, 8) == 0);
    CHECK(memcmp(data + 16, halves, 6) == 0);
    CHECK(memcmp(data + 22, bools, 3) == 0);
    cJSON_Delete(h);
    free(b);
}

/* ---- the reference implementation's file ---------------------------------------------------- */

#define FIXTURE KILN_SOURCE_DIR "/tests/fixtures/tiny_hf.safetensors"

static void check_values(kn_tensor *t, const double *want, int64_t n, const char *what) {
    double *got = read_f64(t);
    for (int64_t i = 0; got && i < n; i++)
        CHECK_MSG(got[i] == want[i] && signbit(got[i]) == signbit(want[i]), "%s[%lld] is %.9g, want %.9g", what,
                  (long long)i, got[i], want[i]);
    CHECK(got != NULL);
    free(got);
}

static void test_reads_and_writes_the_reference_format(void) {
    kn_safetensors *f = kn_safetensors_open(FIXTURE);
    CHECK(f != NULL);
    if (!f) return;
    CHECK(kn_safetensors_count(f) == 3);
    CHECK(kn_safetensors_metadata_count(f) == 2);
    CHECK(strcmp(kn_safetensors_metadata(f, "format"), "pt") == 0);
    CHECK(strcmp(kn_safetensors_metadata(f, "source"), "kiln fixture") == 0);
    const double w[] = {1.5, -2.25, 3.0, 0.0, -0.0, (float)1e-3};
    const double h[] = {0.5, -1.0, 65504.0, ldexp(1, -24), 3.140625};
    const double br[] = {1.0, -2.0, 0.15625, ldexp(1, 100)};
    kn_tensor *weight = kn_safetensors_get(f, "weight", KN_CPU), *half = kn_safetensors_get(f, "half", KN_CPU);
    kn_tensor *brain = kn_safetensors_get(f, "brain", KN_CPU);
    CHECK(kn_dtype_of(weight) == KN_F32 && kn_dtype_of(half) == KN_F16 && kn_dtype_of(brain) == KN_BF16);
    if (CHECK_SHAPE(weight, KN_SHAPE(2, 3))) check_values(weight, w, 6, "weight");
    if (CHECK_SHAPE(half, KN_SHAPE(5))) check_values(half, h, 5, "half");
    if (CHECK_SHAPE(brain, KN_SHAPE(2, 2))) check_values(brain, br, 4, "brain");
    kn_safetensors_close(f);

    /* Written back by kiln in the reference's order, the file is the same byte for byte. */
    const char *names[] = {"weight", "brain", "half"}, *keys[] = {"format", "source"}, *values[] = {"pt", "kiln fixture"};
    kn_tensor *ts[] = {weight, brain, half};
    const char *p = tmp_path("rewritten.safetensors");
    CHECK(kn_safetensors_save(p, 3, names, ts, keys, values, 2) == KN_OK);
    size_t n_ref = 0, n_ours = 0;
    unsigned char *ref = read_bytes(FIXTURE, &n_ref), *ours = read_bytes(p, &n_ours);
    CHECK_MSG(ref && ours && n_ref == n_ours && memcmp(ref, ours, n_ref) == 0, "kiln's file differs from the reference's");
    free(ref);
    free(ours);

    /* Loading with conversion gives the same values in f32. */
    kn_tensor *dst[] = {kn_zeros(KN_SHAPE(2, 3), KN_F32), kn_zeros(KN_SHAPE(2, 2), KN_F32), kn_zeros(KN_SHAPE(5), KN_F64)};
    CHECK(kn_safetensors_load_into(FIXTURE, 3, names, dst, KN_LOAD_STRICT | KN_LOAD_CAST) == KN_OK);
    check_values(dst[0], w, 6, "weight as f32");
    check_values(dst[1], br, 4, "brain as f32");
    check_values(dst[2], h, 5, "half as f64");
}

/* ---- loading into existing tensors ----------------------------------------------------------- */

static void test_load_into_checks_everything_first(void) {
    kn_tensor *w = rand_tensor(KN_SHAPE(2, 3), KN_F32, -1, 1), *b = rand_tensor(KN_SHAPE(3), KN_BF16, -1, 1);
    kn_tensor *step = kn_scalar(42, KN_I64);
    const char *names[] = {"w", "b", "step"};
    const char *p = tmp_path("params.safetensors");
    CHECK(kn_safetensors_save(p, 3, names, (kn_tensor *[]){w, b, step}, NULL, NULL, 0) == KN_OK);

    /* Into a transposed view, a fresh tensor and a 0-d one. */
    kn_tensor *wt = kn_zeros(KN_SHAPE(3, 2), KN_F32);
    kn_tensor *dst[] = {kn_transpose(wt, 0, 1), kn_zeros(KN_SHAPE(3), KN_BF16), kn_zeros(KN_SHAPE0, KN_I64)};
    CHECK(kn_safetensors_load_into(p, 3, names, dst, KN_LOAD_STRICT) == KN_OK);
    CHECK(same_tensor(kn_contiguous(dst[0]), w) && same_tensor(dst[1], b) && same_tensor(dst[2], step));

    /* Each refusal names the problem and writes nothing, even to tensors checked before it. */
    kn_tensor *fresh[] = {kn_zeros(KN_SHAPE(2, 3), KN_F32), kn_zeros(KN_SHAPE(3), KN_BF16), kn_zeros(KN_SHAPE0, KN_I64)};
    kn_tensor *zeros = kn_zeros(KN_SHAPE(2, 3), KN_F32);
    const char *missing[] = {"w", "b", "nope"};
    CHECK_ERROR(kn_safetensors_load_into(p, 3, missing, fresh, 0) == KN_OK, KN_ERR_ARG, "no tensor named 'nope'");
    CHECK(same_tensor(fresh[0], zeros));
    CHECK_ERROR(kn_safetensors_load_into(p, 2, names, fresh, KN_LOAD_STRICT) == KN_OK, KN_ERR_ARG, "'step', which was not asked");
    CHECK(same_tensor(fresh[0], zeros));
    CHECK(kn_safetensors_load_into(p, 2, names, fresh, 0) == KN_OK); /* not strict: extras are fine */
    const char *twice[] = {"w", "w"};
    CHECK_ERROR(kn_safetensors_load_into(p, 2, twice, (kn_tensor *[]){fresh[0], fresh[0]}, 0) == KN_OK, KN_ERR_ARG, "twice");
    kn_tensor *wrong_shape[] = {kn_zeros(KN_SHAPE(3, 2), KN_F32)};
    CHECK_ERROR(kn_safetensors_load_into(p, 1, names, wrong_shape, 0) == KN_OK, KN_ERR_SHAPE,
                "tensor 'w' is F32[2, 3] in the file but the destination is f32[3, 2]");
    kn_tensor *as_f16[] = {kn_zeros(KN_SHAPE(2, 3), KN_F16)};
    CHECK_ERROR(kn_safetensors_load_into(p, 1, names, as_f16, 0) == KN_OK, KN_ERR_DTYPE, "KN_LOAD_CAST");
    CHECK(kn_safetensors_load_into(p, 1, names, as_f16, KN_LOAD_CAST) == KN_OK);
    CHECK(same_tensor(as_f16[0], kn_cast(w, KN_F16)));
    kn_tensor *as_i32[] = {kn_zeros(KN_SHAPE0, KN_I32)};
    CHECK_ERROR(kn_safetensors_load_into(p, 1, &names[2], as_i32, KN_LOAD_CAST) == KN_OK, KN_ERR_DTYPE,
                "'step' is I64[] in the file but the destination is i32[]");
    CHECK_ERROR(kn_safetensors_load_into(tmp_path("absent.safetensors"), 1, names, fresh, 0) == KN_OK, KN_ERR_IO,
                "cannot open");
    /* A NULL destination keeps the error that made it. */
    kn_tensor *bad[] = {kn_reshape(zeros, KN_SHAPE(7))};
    CHECK_ERROR(kn_safetensors_load_into(p, 1, names, bad, 0) == KN_OK, KN_ERR_SHAPE, "6 elements");

    /* Meta tensors are checked but hold nothing to write. */
    kn_tensor *meta[] = {kn_to_device(kn_zeros(KN_SHAPE(2, 3), KN_F32), KN_META)};
    CHECK(kn_safetensors_load_into(p, 1, names, meta, 0) == KN_OK);
    kn_tensor *meta_wrong[] = {kn_to_device(kn_zeros(KN_SHAPE(6), KN_F32), KN_META)};
    CHECK_ERROR(kn_safetensors_load_into(p, 1, names, meta_wrong, 0) == KN_OK, KN_ERR_SHAPE, "F32[2, 3]");

    /* One tensor at a time from an open file. */
    kn_safetensors *f = kn_safetensors_open(p);
    kn_tensor *one = kn_zeros(KN_SHAPE(3), KN_F32);
    CHECK(kn_safetensors_read_into(f, "b", one, KN_LOAD_CAST) == KN_OK);
    CHECK(same_tensor(one, kn_cast(b, KN_F32)));
    CHECK_ERROR(kn_safetensors_read_into(f, "b", one, 0) == KN_OK, KN_ERR_DTYPE, "BF16[3]");
    kn_safetensors_close(f);
}

/* ---- reader API errors ---------------------------------------------------------------------------- */

static void test_reader_api_errors(void) {
    const char *p = tmp_path("api.safetensors"), *names[] = {"x"};
    CHECK(kn_safetensors_save(p, 1, names, (kn_tensor *[]){kn_ones(KN_SHAPE(2), KN_F32)}, NULL, NULL, 0) == KN_OK);
    kn_safetensors *f = kn_safetensors_open(p);
    CHECK_ERROR(kn_safetensors_get(f, "y", KN_CPU) != NULL, KN_ERR_ARG, "no tensor named 'y'");
    CHECK(kn_safetensors_find(f, "y") == -1 && kn_last_status() == KN_OK);
    CHECK_ERROR(kn_safetensors_name(f, 1) != NULL, KN_ERR_INDEX, "index 1 out of range for 1 tensors");
    CHECK_ERROR(kn_safetensors_dtype(f, -1) != KN_DTYPE_COUNT, KN_ERR_INDEX, "api.safetensors");
    CHECK_ERROR(kn_safetensors_shape(f, 5).n != 0, KN_ERR_INDEX, "out of range");
    kn_safetensors_close(f);
    kn_safetensors_close(NULL);
    /* A failed open passes its error through the next call. */
    CHECK_ERROR(kn_safetensors_get(kn_safetensors_open(tmp_path("missing")), "x", KN_CPU) != NULL, KN_ERR_IO,
                "missing: cannot open");
    CHECK_ERROR(kn_safetensors_open(NULL) != NULL, KN_ERR_NULL, "path is NULL");
}

/* ---- writing: refusals and atomicity ----------------------------------------------------------- */

static void test_save_refuses_bad_arguments(void) {
    const char *p = tmp_path("args.safetensors");
    kn_tensor *x = kn_ones(KN_SHAPE(2), KN_F32);
    kn_tensor *two[] = {x, x};
    const char *dup[] = {"a", "a"}, *reserved[] = {"__metadata__"}, *null_name[] = {NULL}, *ok[] = {"a", "b"};
    CHECK_ERROR(kn_safetensors_save(p, 2, dup, two, NULL, NULL, 0) == KN_OK, KN_ERR_ARG, "'a' is given twice");
    CHECK_ERROR(kn_safetensors_save(p, 1, reserved, two, NULL, NULL, 0) == KN_OK, KN_ERR_ARG, "reserved");
    CHECK_ERROR(kn_safetensors_save(p, 1, null_name, two, NULL, NULL, 0) == KN_OK, KN_ERR_NULL, "name 0 is NULL");
    CHECK_ERROR(kn_safetensors_save(p, -1, ok, two, NULL, NULL, 0) == KN_OK, KN_ERR_ARG, "negative");
    CHECK_ERROR(kn_safetensors_save(NULL, 1, ok, two, NULL, NULL, 0) == KN_OK, KN_ERR_NULL, "path is NULL");
    const char *keys[] = {"k", "k"}, *values[] = {"1", "2"};
    CHECK_ERROR(kn_safetensors_save(p, 2, ok, two, keys, values, 2) == KN_OK, KN_ERR_ARG, "metadata key 'k' is given twice");
    CHECK_ERROR(kn_safetensors_save(p, 2, ok, two, keys, NULL, 1) == KN_OK, KN_ERR_NULL, "metadata");
    CHECK_ERROR(kn_safetensors_save(p, 2, ok, (kn_tensor *[]){x, NULL}, NULL, NULL, 0) == KN_OK, KN_ERR_NULL,
                "tensor 'b' is NULL");
    /* A NULL tensor from a failed op keeps that op's error. */
    CHECK_ERROR(kn_safetensors_save(p, 1, ok, (kn_tensor *[]){kn_reshape(x, KN_SHAPE(3))}, NULL, NULL, 0) == KN_OK,
                KN_ERR_SHAPE, "2 elements");
    CHECK(access(p, F_OK) != 0);
    CHECK(temp_files_left() == 0);
}

static void test_failed_writes_leave_the_old_file(void) {
    const char *p = tmp_path("atomic.txt");
    CHECK(kn_write_file_atomic(p, "hello", 5) == KN_OK);
    CHECK(file_is(p, "hello"));
    CHECK(kn_write_file_atomic(p, "bye!", 4) == KN_OK);
    CHECK(file_is(p, "bye!"));
    CHECK(kn_write_file_atomic(tmp_path("empty.txt"), NULL, 0) == KN_OK);
    CHECK(file_is(tmp_path("empty.txt"), ""));
    CHECK_ERROR(kn_write_file_atomic(p, NULL, 3) == KN_OK, KN_ERR_NULL, "data is NULL");

    /* Streaming: abort leaves the old file, commit replaces it. */
    kn_atomic_file *a = kn_atomic_file_open(p);
    fprintf(kn_atomic_file_stream(a), "half written");
    kn_atomic_file_abort(a);
    CHECK(file_is(p, "bye!"));
    a = kn_atomic_file_open(p);
    fprintf(kn_atomic_file_stream(a), "{\"step\": %d}", 7);
    CHECK(kn_atomic_file_commit(a) == KN_OK);
    CHECK(file_is(p, "{\"step\": 7}"));

    /* Failures at each stage: creating the temporary file, renaming it, writing the data. */
    CHECK_ERROR(kn_write_file_atomic(tmp_path("no/such/dir.txt"), "x", 1) == KN_OK, KN_ERR_IO,
                "no/such/dir.txt: cannot create a temporary file");
    const char *dir_target = tmp_path("a_directory");
    mkdir(dir_target, 0755);
    mkdir(tmp_path("a_directory/child"), 0755); /* a non-empty directory cannot be renamed over */
    CHECK_ERROR(kn_write_file_atomic(dir_target, "x", 1) == KN_OK, KN_ERR_IO, "renaming");
    const char *st = tmp_path("keep.safetensors"), *names[] = {"a", "b"};
    kn_tensor *good = kn_ones(KN_SHAPE(2), KN_F32);
    CHECK(kn_safetensors_save(st, 1, names, &good, NULL, NULL, 0) == KN_OK);
    size_t n_before = 0, n_after = 0;
    unsigned char *before = read_bytes(st, &n_before);
    kn_tensor *meta = kn_to_device(kn_ones(KN_SHAPE(1000), KN_F32), KN_META); /* fails after writing begins */
    CHECK_ERROR(kn_safetensors_save(st, 2, names, (kn_tensor *[]){good, meta}, NULL, NULL, 0) == KN_OK, KN_ERR_DEVICE,
                "keep.safetensors: tensor 'b': to_host");
    CHECK_ERROR(kn_safetensors_save(st, 2, names, (kn_tensor *[]){good, NULL}, NULL, NULL, 0) == KN_OK, KN_ERR_NULL,
                "tensor 'b'");
    unsigned char *after = read_bytes(st, &n_after);
    CHECK(before && after && n_before == n_after && memcmp(before, after, n_before) == 0);
    free(before);
    free(after);
    /* A reader of the old file keeps reading it while the file is replaced. */
    kn_safetensors *old = kn_safetensors_open(st);
    CHECK(kn_safetensors_save(st, 1, &names[1], (kn_tensor *[]){kn_zeros(KN_SHAPE(3), KN_I32)}, NULL, NULL, 0) == KN_OK);
    CHECK(same_tensor(kn_safetensors_get(old, "a", KN_CPU), good));
    kn_safetensors_close(old);

    /* A directory the process may not write to (root may write anywhere, so only as a user). */
    const char *ro = tmp_path("read_only");
    mkdir(ro, 0755);
    const char *target = tmp_path("read_only/file.txt");
    CHECK(kn_write_file_atomic(target, "old", 3) == KN_OK);
    chmod(ro, 0555);
    if (access(ro, W_OK) != 0) {
        CHECK_ERROR(kn_write_file_atomic(target, "new", 3) == KN_OK, KN_ERR_IO, "file.txt: cannot create");
        CHECK(file_is(target, "old"));
    }
    chmod(ro, 0755);
    CHECK(temp_files_left() == 0);
}

/* ---- damaged files ------------------------------------------------------------------------------ */

/* Opening path must fail with KN_ERR_IO, naming the file and containing needle. */
static void expect_bad(const char *path, const char *needle, int line) {
    kn_safetensors *f = kn_safetensors_open(path);
    if (f) {
        test_fail(__FILE__, line, "%s opened; expected an error mentioning \"%s\"", path, needle);
        kn_safetensors_close(f);
    } else if (kn_last_status() != KN_ERR_IO || !strstr(kn_last_error(), needle) || !strstr(kn_last_error(), path)) {
        test_fail(__FILE__, line, "%s: got %s \"%s\"; expected I/O error naming the file and \"%s\"", path,
                  kn_status_name(kn_last_status()), kn_last_error(), needle);
    }
    kn_clear_error();
}
#define EXPECT_BAD(path, needle) expect_bad((path), (needle), __LINE__)

/* A write that fails part way (a full disk; here a file size limit, which fails the same way
 * with EFBIG) is reported with its errno and the file's name, stops the writing, and leaves
 * the old file and no temporary file. */
static void test_a_failed_write_is_reported_with_its_errno(void) {
    const char *p = tmp_path("limited.safetensors"), *names[] = {"big"};
    kn_tensor *small = kn_ones(KN_SHAPE(4), KN_F32), *big = kn_ones(KN_SHAPE(64 * 1024), KN_F32);
    CHECK(kn_safetensors_save(p, 1, names, &small, NULL, NULL, 0) == KN_OK);
    size_t n_before = 0, n_after = 0;
    unsigned char *before = read_bytes(p, &n_before);
    struct rlimit saved, limit;
    CHECK(getrlimit(RLIMIT_FSIZE, &saved) == 0);
    limit = saved;
    limit.rlim_cur = 64 * 1024; /* below the 256 KB tensor */
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN); /* the write fails instead of killing us */
    CHECK(setrlimit(RLIMIT_FSIZE, &limit) == 0);
    CHECK_ERROR(kn_safetensors_save(p, 1, names, &big, NULL, NULL, 0) == KN_OK, KN_ERR_IO,
                "limited.safetensors: writing the temporary file failed: File too large");
    static char text[128 * 1024];
    memset(text, 'x', sizeof text - 1);
    CHECK_ERROR(kn_write_file_atomic(tmp_path("limited.txt"), text, sizeof text - 1) == KN_OK, KN_ERR_IO,
                "limited.txt: writing the temporary file failed: File too large");
    kn_atomic_file *a = kn_atomic_file_open(tmp_path("limited.txt"));
    if (a) fputs(text, kn_atomic_file_stream(a)); /* stdio writes alike */
    CHECK_ERROR(kn_atomic_file_commit(a) == KN_OK, KN_ERR_IO, "File too large");
    CHECK(setrlimit(RLIMIT_FSIZE, &saved) == 0);
    signal(SIGXFSZ, old_handler);
    unsigned char *after = read_bytes(p, &n_after);
    CHECK(before && after && n_before == n_after && memcmp(before, after, n_before) == 0);
    CHECK(access(tmp_path("limited.txt"), F_OK) != 0 && errno == ENOENT);
    CHECK(temp_files_left() == 0);
    free(before);
    free(after);
}

static void test_damaged_files_are_refused(void) {
    const char *p = tmp_path("bad.safetensors");
    write_bytes(p, "", 0);
    EXPECT_BAD(p, "empty file");
    write_bytes(p, "\x08\0\0\0\0", 5);
    EXPECT_BAD(p, "truncated: 5 bytes");
    write_bytes(p, "\xd2\x04\0\0\0\0\0\0{}", 10);
    EXPECT_BAD(p, "truncated: header says 1234 bytes, file has 2");
    write_bytes(p, "\xff\xff\xff\xff\xff\xff\xff\xff{}", 10);
    EXPECT_BAD(p, "truncated: header says 18446744073709551615 bytes");
    write_bytes(p, "\0\0\0\0\0\0\0\0", 8);
    EXPECT_BAD(p, "not valid JSON");
    EXPECT_BAD(tmp_path("does_not_exist"), "cannot open");
    EXPECT_BAD(tmp_dir, "not a regular file");

    struct { const char *json; size_t data; const char *needle; } cases[] = {
        {"{\"a\": {\"dtype\": \"F32\"", 0, "not valid JSON"},
        {"{} trailing", 0, "bytes after its JSON"},
        {"[1, 2]", 0, "not a JSON object"},
        {"\"text\"", 0, "not a JSON object"},
        {"{\"a\": 3}", 0, "tensor 'a': entry is 3, not an object"},
        {"{\"a\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", 4, "tensor 'a': no \"dtype\""},
        {"{\"a\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [0, 1]}}", 1, "dtype 'U8' is not one kiln has"},
        {"{\"a\": {\"dtype\": \"F32\", \"data_offsets\": [0, 4]}}", 4, "no \"shape\""},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2, -1], \"data_offsets\": [0, 0]}}", 0, "shape dim 1 is -1"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1.5], \"data_offsets\": [0, 4]}}", 4, "shape dim 0 is 1.5"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [\"2\"], \"data_offsets\": [0, 8]}}", 8, "not a non-negative integer"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1,1,1,1,1,1,1,1,1], \"data_offsets\": [0, 4]}}", 4, "at most 8"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0]}}", 4, "data_offsets"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [-4, 0]}}", 4, "not non-negative integers"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 4]}}", 8, "run backwards"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [100], \"data_offsets\": [0, 400]}}", 8, "reach past the end of the file"},
        {"{\"wte.weight\": {\"dtype\": \"F32\", \"shape\": [5, 10], \"data_offsets\": [0, 100]}}", 100,
         "tensor 'wte.weight': data_offsets [0, 100] hold 100 bytes but F32[5, 10] needs 200"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296, 4294967296], \"data_offsets\": [0, 4]}}", 4,
         "F32[4294967296, 4294967296, 4294967296] is too large"},
        /* empty, but its strides (2^53 * 2^53) overflow int64: shared/repro/st-empty-tensor-huge-dims */
        {"{\"z\": {\"dtype\": \"F32\", \"shape\": [0, 9007199254740992, 9007199254740992], \"data_offsets\": [0, 0]}}", 0,
         "tensor 'z': F32[0, 9007199254740992, 9007199254740992] is too large"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
         " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}", 12,
         "tensor 'b' [4, 12] overlaps tensor 'a' [0, 8]"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
         " \"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 12]}}", 12, "bytes [4, 8) of the data section"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 8, "4 bytes follow the last tensor"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
         " \"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}", 8, "tensor 'a' appears twice"},
        {"{\"__metadata__\": [1]}", 0, "__metadata__ is [1], not an object"},
        {"{\"__metadata__\": {\"k\": 1}}", 0, "__metadata__ 'k' is 1, not a string"},
        {"{\"__metadata__\": {\"k\": \"1\", \"k\": \"2\"}}", 0, "key 'k' appears twice"},
        {"{\"__metadata__\": {}, \"__metadata__\": {}}", 0, "__metadata__ appears twice"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_st(p, cases[i].json, NULL, cases[i].data);
        EXPECT_BAD(p, cases[i].needle);
    }
    /* Nesting deep enough to exhaust a recursive parser's stack is refused, not followed. */
    enum { DEEP = 100000 };
    char *deep = malloc(2 * DEEP + 1);
    memset(deep, '[', DEEP);
    memset(deep + DEEP, ']', DEEP);
    deep[2 * DEEP] = '\0';
    write_st(p, deep, NULL, 0);
    EXPECT_BAD(p, "not valid JSON");
    free(deep);

    /* An empty tensor whose non-zero dims multiply to under 2^63 opens, with int64 strides. */
    write_st(p, "{\"z\": {\"dtype\": \"F32\", \"shape\": [0, 2147483648, 2147483648], \"data_offsets\": [0, 0]}}", NULL, 0);
    kn_safetensors *empty = kn_safetensors_open(p);
    kn_tensor *z = empty ? kn_safetensors_get(empty, "z", KN_CPU) : NULL;
    kn_shape strides = kn_strides_of(z);
    CHECK_MSG(z && kn_numel(z) == 0 && strides.v[0] == (int64_t)1 << 62 && strides.v[1] == (int64_t)1 << 31 &&
                  strides.v[2] == 1, "%s", kn_last_error());
    kn_release(z);
    kn_safetensors_close(empty);

    /* A bool byte other than 0 or 1 opens (the header is sound) but is refused on reading. */
    write_st(p, "{\"m\": {\"dtype\": \"BOOL\", \"shape\": [3], \"data_offsets\": [0, 3]}}", "\1\0\2", 3);
    kn_safetensors *f = kn_safetensors_open(p);
    CHECK(f != NULL);
    CHECK_ERROR(kn_safetensors_get(f, "m", KN_CPU) != NULL, KN_ERR_IO, "tensor 'm': BOOL element 2 is 2");
    kn_safetensors_close(f);
}

/* Every truncation of a good file is refused, and flipped bytes never crash the reader: a file
 * that still opens yields readable tensors. */
static void test_truncations_and_flipped_bytes(void) {
    const char *good = tmp_path("good.safetensors"), *p = tmp_path("mangled.safetensors");
    const char *names[] = {"w", "h", "i"}, *key = "k", *value = "v";
    kn_tensor *ts[] = {rand_tensor(KN_SHAPE(2, 2), KN_F32, -1, 1), rand_tensor(KN_SHAPE(3), KN_F16, -1, 1),
                       kn_zeros(KN_SHAPE(1), KN_I64)};
    CHECK(kn_safetensors_save(good, 3, names, ts, &key, &value, 1) == KN_OK);
    size_t n = 0;
    unsigned char *b = read_bytes(good, &n);
    if (!b) {
        test_fail(__FILE__, __LINE__, "cannot read %s", good);
        return;
    }
    for (size_t len = 0; len < n; len++) {
        write_bytes(p, b, len);
        kn_safetensors *f = kn_safetensors_open(p);
        CHECK_MSG(!f && kn_last_status() == KN_ERR_IO, "truncated to %zu of %zu bytes: opened", len, n);
        kn_safetensors_close(f);
        kn_clear_error();
    }
    write_bytes(p, b, n - 1);
    EXPECT_BAD(p, "(truncated?)");
    const unsigned char flips[] = {0x01, 0x20, 0x80, 0xff};
    for (size_t at = 0; at < n; at++)
        for (size_t k = 0; k < sizeof flips; k++) {
            b[at] ^= flips[k];
            write_bytes(p, b, n);
            b[at] ^= flips[k];
            kn_safetensors *f = kn_safetensors_open(p);
            CHECK_MSG(f || kn_last_status() == KN_ERR_IO, "byte %zu ^ 0x%02x: %s", at, flips[k], kn_last_error());
            kn_clear_error();
            kn_scope_push();
            for (int i = 0; f && i < kn_safetensors_count(f); i++) {
                kn_tensor *t = kn_safetensors_get(f, kn_safetensors_name(f, i), KN_CPU);
                CHECK_MSG(t || kn_last_status() == KN_ERR_IO, "byte %zu: reading '%s': %s", at,
                          kn_safetensors_name(f, i), kn_last_error());
                kn_clear_error();
            }
            kn_scope_pop();
            kn_safetensors_close(f);
        }
    free(b);
}

int main(void) {
    snprintf(tmp_dir, sizeof tmp_dir, "%s", "/tmp/kiln_safetensors_XXXXXX");
    if (!mkdtemp(tmp_dir)) return perror("mkdtemp"), 1;
    RUN(test_round_trip_every_dtype_and_shape);
    RUN(test_non_contiguous_sources);
    RUN(test_metadata_and_names_round_trip);
    RUN(test_header_byte_layout);
    RUN(test_reads_and_writes_the_reference_format);
    RUN(test_load_into_checks_everything_first);
    RUN(test_reader_api_errors);
    RUN(test_save_refuses_bad_arguments);
    RUN(test_failed_writes_leave_the_old_file);
    RUN(test_a_failed_write_is_reported_with_its_errno);
    RUN(test_damaged_files_are_refused);
    RUN(test_truncations_and_flipped_bytes);
    remove_tree(tmp_dir);
    return test_summary();
}
