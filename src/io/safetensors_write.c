/* Writing safetensors files: the JSON header, then each tensor's bytes, through an atomic file. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/safetensors_format.h"

static int by_string(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* A string that occurs twice among s[0..n), or NULL; through a sorted copy, since a model may
 * have thousands of names. *failed is set if the copy cannot be made. */
static const char *repeated(const char *const *s, int n, bool *failed) {
    if (n < 2) return NULL;
    const char **sorted = malloc(sizeof *sorted * (size_t)n), *twice = NULL;
    *failed = !sorted;
    if (!sorted) return NULL;
    memcpy(sorted, s, sizeof *sorted * (size_t)n);
    qsort(sorted, (size_t)n, sizeof *sorted, by_string);
    for (int i = 1; i < n && !twice; i++)
        if (strcmp(sorted[i], sorted[i - 1]) == 0) twice = sorted[i];
    free(sorted);
    return twice;
}

/* Checks the names, tensors and metadata before anything is written. */
static kn_status check_args(const char *path, int n, const char *const *names, kn_tensor *const *tensors,
                            const char *const *meta_keys, const char *const *meta_values, int n_meta) {
    if (!path) return kn_error(KN_ERR_NULL, "safetensors_save: path is NULL");
    if (n < 0 || n_meta < 0)
        return kn_error(KN_ERR_ARG, "%s: negative count (%d tensors, %d metadata)", path, n, n_meta);
    if (n && (!names || !tensors)) return kn_error(KN_ERR_NULL, "%s: names or tensors is NULL", path);
    if (n_meta && (!meta_keys || !meta_values))
        return kn_error(KN_ERR_NULL, "%s: metadata keys or values is NULL", path);
    for (int i = 0; i < n; i++) {
        if (!names[i]) return kn_error(KN_ERR_NULL, "%s: name %d is NULL", path, i);
        if (strcmp(names[i], "__metadata__") == 0)
            return kn_error(KN_ERR_ARG, "%s: '__metadata__' is reserved and cannot name a tensor", path);
        /* A NULL tensor keeps the error that made it, as ops do. */
        if (!tensors[i])
            return kn_last_status() != KN_OK ? kn_last_status()
                                             : kn_error(KN_ERR_NULL, "%s: tensor '%s' is NULL", path, names[i]);
    }
    for (int i = 0; i < n_meta; i++)
        if (!meta_keys[i] || !meta_values[i]) return kn_error(KN_ERR_NULL, "%s: metadata entry %d is NULL", path, i);
    bool failed = false;
    const char *twice = repeated(names, n, &failed);
    if (twice) return kn_error(KN_ERR_ARG, "%s: tensor name '%s' is given twice", path, twice);
    if (!failed && (twice = repeated(meta_keys, n_meta, &failed)))
        return kn_error(KN_ERR_ARG, "%s: metadata key '%s' is given twice", path, twice);
    return failed ? kn_error(KN_ERR_OOM, "%s: out of memory", path) : KN_OK;
}

static uint64_t tensor_bytes(kn_tensor *t) { return (uint64_t)kn_numel(t) * kn_dtype_size(kn_dtype_of(t)); }

/* Adds an integer as a raw JSON number: cJSON's doubles would print large ones in
 * exponent form, which the format's readers refuse. */
static bool add_int(cJSON *array, uint64_t v) {
    char text[24];
    snprintf(text, sizeof text, "%" PRIu64, v);
    return cJSON_AddItemToArray(array, cJSON_CreateRaw(text));
}

static bool add_entry(cJSON *root, const char *name, kn_tensor *t, uint64_t begin, uint64_t end) {
    cJSON *e = cJSON_AddObjectToObject(root, name);
    if (!e || !cJSON_AddStringToObject(e, "dtype", kn_st_dtype_name(kn_dtype_of(t)))) return false;
    cJSON *shape = cJSON_AddArrayToObject(e, "shape"), *offsets = cJSON_AddArrayToObject(e, "data_offsets");
    if (!shape || !offsets) return false;
    for (int d = 0; d < kn_ndim(t); d++)
        if (!add_int(shape, (uint64_t)kn_size(t, d))) return false;
    return add_int(offsets, begin) && add_int(offsets, end);
}

/* The header JSON: __metadata__ first, then the tensors in the caller's order, with the
 * offsets they have in the data order `order`. The caller frees it. */
static char *header_json(int n, const char *const *names, kn_tensor *const *tensors, const int *order,
                         const char *const *meta_keys, const char *const *meta_values, int n_meta) {
    uint64_t *begin = malloc(sizeof *begin * ((size_t)(unsigned)n + 1)), at = 0;
    cJSON *root = cJSON_CreateObject();
    bool ok = root && begin;
    for (int k = 0; ok && k < n; k++) {
        begin[order[k]] = at;
        at += tensor_bytes(tensors[order[k]]);
    }
    if (ok && n_meta) {
        cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
        ok = meta != NULL;
        for (int i = 0; ok && i < n_meta; i++) ok = cJSON_AddStringToObject(meta, meta_keys[i], meta_values[i]) != NULL;
    }
    for (int i = 0; ok && i < n; i++)
        ok = add_entry(root, names[i], tensors[i], begin[i], begin[i] + tensor_bytes(tensors[i]));
    char *json = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    free(begin);
    return json;
}

/* Writes the length, the header padded with spaces to a multiple of 8, and the data. */
static kn_status write_file(const char *path, const char *json, int n, const char *const *names,
                            kn_tensor *const *tensors, const int *order) {
    size_t json_len = strlen(json), header_len = (json_len + 7) & ~(size_t)7;
    uint8_t len_le[8];
    for (int i = 0; i < 8; i++) len_le[i] = (uint8_t)((uint64_t)header_len >> (8 * i));
    kn_atomic_file *a = kn_atomic_file_open(path);
    if (!a) return kn_last_status();
    FILE *out = kn_atomic_file_stream(a);
    /* A failed write stops the writing (a full disk is not filled for gigabytes more); commit
     * then reports it with its errno and removes the temporary file. */
    bool written = fwrite(len_le, 1, 8, out) == 8 && fwrite(json, 1, json_len, out) == json_len &&
                   fprintf(out, "%*s", (int)(header_len - json_len), "") >= 0;
    for (int k = 0; written && k < n; k++) {
        kn_tensor *t = tensors[order[k]];
        size_t bytes = (size_t)tensor_bytes(t);
        void *buf = malloc(bytes ? bytes : 1);
        kn_status st = buf ? kn_to_host(t, buf, bytes) : kn_error(KN_ERR_OOM, "out of memory for %zu bytes", bytes);
        if (st != KN_OK) {
            free(buf);
            kn_atomic_file_abort(a);
            return kn_st_prefix_error(path, names[order[k]]);
        }
        written = fwrite(buf, 1, bytes, out) == bytes;
        free(buf);
    }
    return kn_atomic_file_commit(a);
}

kn_status kn_safetensors_save(const char *path, int n, const char *const *names, kn_tensor *const *tensors,
                              const char *const *meta_keys, const char *const *meta_values, int n_meta) {
    kn_status st = check_args(path, n, names, tensors, meta_keys, meta_values, n_meta);
    if (st != KN_OK) return st;
    /* Widest elements first: with the header padded to 8 bytes, every tensor then starts at a
     * multiple of its element size. */
    int *order = malloc(sizeof(int) * (size_t)(n ? n : 1)), k = 0;
    if (!order) return kn_error(KN_ERR_OOM, "%s: out of memory", path);
    for (size_t size = 8; size >= 1; size /= 2)
        for (int i = 0; i < n; i++)
            if (kn_dtype_size(kn_dtype_of(tensors[i])) == size) order[k++] = i;
    char *json = header_json(n, names, tensors, order, meta_keys, meta_values, n_meta);
    st = json ? write_file(path, json, n, names, tensors, order)
              : kn_error(KN_ERR_OOM, "%s: out of memory building the header", path);
    free(json);
    free(order);
    return st;
}
