/* Loading safetensors tensors into existing tensors (a model's parameters), checking names,
 * shapes and dtypes before anything is written. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/safetensors_format.h"

/* Whether the tensor `name` of f can go into dst under flags; records the problem if not. */
static kn_status check_one(kn_safetensors *f, const char *path, const char *name, kn_tensor *dst, unsigned flags) {
    if (!name) return kn_error(KN_ERR_NULL, "%s: a tensor name is NULL", path);
    if (!dst) {
        if (kn_last_status() != KN_OK) return kn_last_status(); /* the error that made dst */
        return kn_error(KN_ERR_NULL, "%s: the destination for '%s' is NULL", path, name);
    }
    int i = kn_safetensors_find(f, name);
    if (i < 0) return kn_error(KN_ERR_ARG, "%s: no tensor named '%s' in the file", path, name);
    kn_dtype have = kn_safetensors_dtype(f, i), want = kn_dtype_of(dst);
    kn_shape shape = kn_safetensors_shape(f, i), dst_shape = kn_shape_of(dst);
    char stored[160], into[96];
    kn_st_describe(have, shape, stored, sizeof stored);
    kn_describe(dst, into, sizeof into);
    bool same_shape = shape.n == dst_shape.n && memcmp(shape.v, dst_shape.v, sizeof(int64_t) * (size_t)shape.n) == 0;
    if (!same_shape)
        return kn_error(KN_ERR_SHAPE, "%s: tensor '%s' is %s in the file but the destination is %s", path, name,
                        stored, into);
    bool floats = kn_dtype_is_float(have) && kn_dtype_is_float(want);
    if (have != want && !(floats && (flags & KN_LOAD_CAST)))
        return kn_error(KN_ERR_DTYPE, "%s: tensor '%s' is %s in the file but the destination is %s%s", path, name,
                        stored, into, floats ? " (KN_LOAD_CAST converts floats)" : "");
    return KN_OK;
}

/* Copies a checked tensor; copy_ converts the dtype when it differs. Meta tensors hold no
 * values, so for them the check is the whole load. */
static kn_status copy_one(kn_safetensors *f, const char *path, const char *name, kn_tensor *dst) {
    kn_device device = kn_device_of(dst);
    if (device.type == KN_DEVICE_META) return KN_OK;
    kn_tensor *src = kn_safetensors_get(f, name, device);
    if (!src) return kn_last_status();
    kn_status st = kn_copy_(dst, src);
    kn_release(src);
    return st == KN_OK ? KN_OK : kn_st_prefix_error(path, name);
}

kn_status kn_safetensors_read_into(kn_safetensors *f, const char *name, kn_tensor *dst, unsigned flags) {
    if (!f) {
        kn_error_null_input("safetensors_read_into", 0);
        return kn_last_status();
    }
    const char *path = kn_safetensors_path(f);
    kn_status st = check_one(f, path, name, dst, flags);
    return st != KN_OK ? st : copy_one(f, path, name, dst);
}

static kn_status load_open(kn_safetensors *f, const char *path, int n, const char *const *names,
                           kn_tensor *const *dst, unsigned flags) {
    int count = kn_safetensors_count(f);
    bool *asked = calloc((size_t)(count ? count : 1), sizeof *asked);
    if (!asked) return kn_error(KN_ERR_OOM, "%s: out of memory", path);
    kn_status st = KN_OK;
    for (int i = 0; i < n && st == KN_OK; i++) {
        st = check_one(f, path, names[i], dst[i], flags);
        int at = st == KN_OK ? kn_safetensors_find(f, names[i]) : -1;
        if (at >= 0 && asked[at]) st = kn_error(KN_ERR_ARG, "%s: tensor name '%s' is given twice", path, names[i]);
        if (at >= 0) asked[at] = true;
    }
    for (int i = 0; i < count && st == KN_OK && (flags & KN_LOAD_STRICT); i++)
        if (!asked[i])
            st = kn_error(KN_ERR_ARG, "%s: the file holds tensor '%s', which was not asked for (KN_LOAD_STRICT)", path,
                          kn_safetensors_name(f, i));
    free(asked);
    for (int i = 0; i < n && st == KN_OK; i++) st = copy_one(f, path, names[i], dst[i]);
    return st;
}

kn_status kn_safetensors_load_into(const char *path, int n, const char *const *names, kn_tensor *const *dst,
                                   unsigned flags) {
    if (!path) return kn_error(KN_ERR_NULL, "safetensors_load_into: path is NULL");
    if (n < 0) return kn_error(KN_ERR_ARG, "%s: negative tensor count %d", path, n);
    if (n && (!names || !dst)) return kn_error(KN_ERR_NULL, "%s: names or destinations is NULL", path);
    kn_safetensors *f = kn_safetensors_open(path);
    if (!f) return kn_last_status();
    kn_status st = load_open(f, path, n, names, dst, flags);
    kn_safetensors_close(f);
    return st;
}
