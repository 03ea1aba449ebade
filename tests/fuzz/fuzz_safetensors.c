/* Fuzz target: a safetensors file, through kn_safetensors_open and everything an open file hands
 * out (entries, metadata, copies on the CPU and the meta device, read_into), and through
 * kn_hf_weights_open, whose tensors view the mapping. The input is the whole file. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

static bool same_shape(kn_shape a, kn_shape b) {
    if (a.n != b.n) return false;
    for (int d = 0; d < a.n; d++)
        if (a.v[d] != b.v[d]) return false;
    return true;
}

/* The tensor's values on the host (NULL for none, or when they do not fit in `limit` bytes). */
static void *host_bytes(kn_tensor *t, size_t limit, size_t *n) {
    *n = (size_t)kn_numel(t) * kn_dtype_size(kn_dtype_of(t));
    if (*n > limit) return NULL;
    void *p = malloc(*n ? *n : 1);
    fuzz_require(p != NULL, "out of memory for %zu bytes", *n);
    kn_clear_error();
    if (fuzz_failed(kn_to_host(t, p, *n) != KN_OK, "kn_to_host")) {
        free(p);
        return NULL;
    }
    return p;
}

/* A tensor the file gave: the shape and dtype its header says; on the CPU, values that
 * read_into gives too. */
static void check_tensor(kn_safetensors *f, const char *name, kn_tensor *t, kn_shape shape, kn_dtype dtype,
                         size_t limit) {
    fuzz_require(same_shape(kn_shape_of(t), shape) && kn_dtype_of(t) == dtype,
                 "tensor '%s' differs from its header entry", name);
    if (kn_device_of(t).type != KN_DEVICE_CPU) return;
    size_t n;
    void *got = host_bytes(t, limit, &n);
    if (!got) return;
    kn_clear_error();
    kn_tensor *dst = kn_empty(shape, dtype);
    if (!fuzz_failed(!dst, "kn_empty") &&
        !fuzz_failed(kn_safetensors_read_into(f, name, dst, 0) != KN_OK, "kn_safetensors_read_into")) {
        size_t m;
        void *again = host_bytes(dst, limit, &m);
        fuzz_require(!again || (m == n && memcmp(got, again, n) == 0),
                     "tensor '%s': kn_safetensors_get and read_into give different values", name);
        free(again);
    }
    free(got);
}

static void fuzz_file(const char *path, size_t size) {
    kn_clear_error();
    kn_safetensors *f = kn_safetensors_open(path);
    if (fuzz_failed(!f, "kn_safetensors_open")) return;
    int n = kn_safetensors_count(f);
    for (int i = 0; i < n; i++) {
        const char *name = kn_safetensors_name(f, i);
        kn_dtype dtype = kn_safetensors_dtype(f, i);
        kn_shape shape = kn_safetensors_shape(f, i);
        fuzz_require(name && dtype < KN_DTYPE_COUNT && shape.n <= KN_MAX_DIMS, "entry %d is not whole", i);
        fuzz_require(kn_safetensors_find(f, name) == i, "kn_safetensors_find('%s') is not %d", name, i);
        const kn_device devices[] = {KN_META, KN_CPU};
        for (int d = 0; d < 2; d++) {
            kn_scope_push();
            kn_clear_error();
            kn_tensor *t = kn_safetensors_get(f, name, devices[d]);
            if (!fuzz_failed(!t, "kn_safetensors_get")) check_tensor(f, name, t, shape, dtype, size);
            kn_scope_pop();
        }
    }
    for (int i = 0; i < kn_safetensors_metadata_count(f); i++) {
        const char *key = kn_safetensors_metadata_key(f, i);
        fuzz_require(key && kn_safetensors_metadata(f, key), "metadata entry %d has no key or value", i);
    }
    kn_clear_error();
    fuzz_require(!kn_safetensors_name(f, n) && kn_last_status() == KN_ERR_INDEX,
                 "an entry index past the end gives no KN_ERR_INDEX");
    kn_safetensors_close(f);
}

/* kn_hf_weights: the same file, its tensors as stored (views of the mapping) and in f32. */
static void fuzz_weights(const char *path, size_t size) {
    kn_clear_error();
    kn_hf_weights *w = kn_hf_weights_open(path);
    if (fuzz_failed(!w, "kn_hf_weights_open")) return;
    for (int i = 0; i < kn_hf_weights_count(w); i++) {
        const char *name = kn_hf_weights_name(w, i);
        fuzz_require(name && kn_hf_weights_find(w, name) == i, "kn_hf_weights entry %d is not found by name", i);
        const kn_dtype dtypes[] = {KN_DTYPE_COUNT, KN_F32};
        for (int d = 0; d < 2; d++) {
            kn_scope_push();
            kn_clear_error();
            kn_tensor *t = kn_hf_weights_get(w, name, KN_CPU, dtypes[d]);
            if (!fuzz_failed(!t, "kn_hf_weights_get")) {
                fuzz_require(same_shape(kn_shape_of(t), kn_hf_weights_shape(w, i)), "tensor '%s': wrong shape", name);
                size_t n;
                free(host_bytes(t, 4 * size, &n));
            }
            kn_scope_pop();
        }
    }
    kn_hf_weights_close(w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write("model.safetensors", data, size);
    fuzz_file(path, size);
    fuzz_weights(path, size);
    return 0;
}
