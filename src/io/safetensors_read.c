/* Reading safetensors files: map the file, validate the whole header up front, then hand out
 * entries and copies of tensors. After open succeeds, every entry is known to lie inside the
 * mapping with exactly the bytes its dtype and shape need, so reads need no further checks. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/tensor_impl.h"
#include "io/safetensors_format.h"

typedef struct st_entry {
    const char *name; /* owned by the parsed header */
    kn_dtype dtype;
    kn_shape shape;
    uint64_t begin, end; /* within the data section */
} st_entry;

/* The file's mapping, shared by the open file and every tensor viewing it (kn_st_view). */
typedef struct st_map {
    atomic_int refs;
    void *addr;
    size_t bytes;
} st_map;

static void st_map_release(void *ctx) {
    st_map *m = ctx;
    if (!m || atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) != 1) return;
    munmap(m->addr, m->bytes);
    free(m);
}

struct kn_safetensors {
    char *path;
    st_map *mapping;
    const uint8_t *map;
    size_t map_bytes;
    const uint8_t *data; /* the data section: after the length and the header */
    uint64_t data_bytes;
    cJSON *header;
    int n, n_meta;
    st_entry *entries;   /* in the header's order */
    const st_entry **by_name; /* sorted by name, for lookups */
    const cJSON **meta; /* string items of __metadata__ */
};

void kn_safetensors_close(kn_safetensors *f) {
    if (!f) return;
    st_map_release(f->mapping);
    cJSON_Delete(f->header);
    free(f->entries);
    free(f->by_name);
    free(f->meta);
    free(f->path);
    free(f);
}

/* Records "path: <problem>" as a KN_ERR_IO error, closes f and returns NULL. */
static void *fail(kn_safetensors *f, const char *path, const char *fmt, ...) KN_PRINTF(3, 4);
static void *fail(kn_safetensors *f, const char *path, const char *fmt, ...) {
    char problem[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(problem, sizeof problem, fmt, ap);
    va_end(ap);
    kn_error(KN_ERR_IO, "%s: %s", path, problem);
    kn_safetensors_close(f);
    return NULL;
}

/* A JSON value as short text for messages. */
static const char *json_text(const cJSON *j, char *buf, size_t n) {
    char *s = cJSON_PrintUnformatted(j);
    snprintf(buf, n, "%s", s ? s : "?");
    free(s);
    return buf;
}

/* A non-negative integer that a double holds exactly (JSON numbers are doubles to cJSON). */
static bool json_uint(const cJSON *j, uint64_t *out) {
    if (!cJSON_IsNumber(j)) return false;
    double d = j->valuedouble;
    if (!(d >= 0 && d <= 9007199254740992.0) || d != floor(d)) return false;
    *out = (uint64_t)d;
    return true;
}

/* Parses and checks one tensor entry; returns an error message into why, or "" if fine. */
static void parse_entry(const cJSON *j, uint64_t data_bytes, st_entry *e, char *why, size_t n) {
    char text[96], desc[160];
    why[0] = '\0';
    e->name = j->string;
    if (!cJSON_IsObject(j)) {
        snprintf(why, n, "entry is %s, not an object", json_text(j, text, sizeof text));
        return;
    }
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(j, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(j, "shape");
    const cJSON *offsets = cJSON_GetObjectItemCaseSensitive(j, "data_offsets");
    if (!cJSON_IsString(dtype)) {
        snprintf(why, n, "no \"dtype\" string");
    } else if (!kn_st_dtype_parse(dtype->valuestring, &e->dtype)) {
        snprintf(why, n, "dtype '%s' is not one kiln has (F32, F64, F16, BF16, I32, I64, BOOL)", dtype->valuestring);
    } else if (!cJSON_IsArray(shape)) {
        snprintf(why, n, "no \"shape\" array");
    } else if (cJSON_GetArraySize(shape) > KN_MAX_DIMS) {
        snprintf(why, n, "shape has %d dims; kiln holds at most %d", cJSON_GetArraySize(shape), KN_MAX_DIMS);
    } else if (!cJSON_IsArray(offsets) || cJSON_GetArraySize(offsets) != 2) {
        snprintf(why, n, "no \"data_offsets\" array of two numbers");
    }
    if (why[0]) return;
    uint64_t numel = 1, dim, strided = 1; /* strided: the product of the non-zero dims */
    bool too_big = false; /* no file can hold it */
    e->shape.n = 0;
    for (const cJSON *d = shape->child; d; d = d->next) {
        if (!json_uint(d, &dim)) {
            snprintf(why, n, "shape dim %d is %s, not a non-negative integer", e->shape.n,
                     json_text(d, text, sizeof text));
            return;
        }
        too_big |= __builtin_mul_overflow(numel, dim, &numel);
        too_big |= dim && (__builtin_mul_overflow(strided, dim, &strided) || strided > INT64_MAX);
        e->shape.v[e->shape.n++] = (int64_t)dim;
    }
    if (!json_uint(offsets->child, &e->begin) || !json_uint(offsets->child->next, &e->end)) {
        snprintf(why, n, "data_offsets %s are not non-negative integers", json_text(offsets, text, sizeof text));
        return;
    }
    uint64_t need;
    too_big |= __builtin_mul_overflow(numel, (uint64_t)kn_dtype_size(e->dtype), &need);
    kn_st_describe(e->dtype, e->shape, desc, sizeof desc);
    if (too_big) /* an empty tensor too: its strides are products of its non-zero dims, in int64 */
        snprintf(why, n, "%s is too large: its byte count or the product of its non-zero dims overflows", desc);
    else if (e->begin > e->end)
        snprintf(why, n, "data_offsets [%" PRIu64 ", %" PRIu64 "] run backwards", e->begin, e->end);
    else if (e->end > data_bytes)
        snprintf(why, n,
                 "data_offsets [%" PRIu64 ", %" PRIu64 "] reach past the end of the file, whose data section has "
                 "%" PRIu64 " bytes (truncated?)",
                 e->begin, e->end, data_bytes);
    else if (e->end - e->begin != need)
        snprintf(why, n, "data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64 " bytes but %s needs %" PRIu64,
                 e->begin, e->end, e->end - e->begin, desc, need);
}

static int by_offsets(const void *pa, const void *pb) {
    const st_entry *a = *(const st_entry *const *)pa, *b = *(const st_entry *const *)pb;
    if (a->begin != b->begin) return a->begin < b->begin ? -1 : 1;
    return (a->end > b->end) - (a->end < b->end);
}

/* The entries must tile the data section: sorted by offset, each starts where the last ended
 * (the reference reader's rule; a gap or an overlap means a damaged or hand-made file). */
static bool check_tiling(kn_safetensors *f, char *why, size_t n) {
    const st_entry **sorted = malloc(sizeof *sorted * (size_t)(f->n ? f->n : 1));
    if (!sorted) return snprintf(why, n, "out of memory"), false;
    for (int i = 0; i < f->n; i++) sorted[i] = &f->entries[i];
    qsort(sorted, (size_t)f->n, sizeof *sorted, by_offsets);
    uint64_t at = 0;
    why[0] = '\0';
    for (int i = 0; i < f->n && !why[0]; i++) {
        const st_entry *e = sorted[i], *prev = i ? sorted[i - 1] : NULL;
        if (e->begin < at)
            snprintf(why, n, "tensor '%s' [%" PRIu64 ", %" PRIu64 "] overlaps tensor '%s' [%" PRIu64 ", %" PRIu64 "]",
                     e->name, e->begin, e->end, prev->name, prev->begin, prev->end);
        else if (e->begin > at)
            snprintf(why, n, "bytes [%" PRIu64 ", %" PRIu64 ") of the data section belong to no tensor", at, e->begin);
        at = e->end;
    }
    if (!why[0] && at != f->data_bytes)
        snprintf(why, n, "%" PRIu64 " bytes follow the last tensor's data", f->data_bytes - at);
    free(sorted);
    return !why[0];
}

static int by_name(const void *pa, const void *pb) {
    return strcmp((*(const st_entry *const *)pa)->name, (*(const st_entry *const *)pb)->name);
}

/* Sorts the entries by name for lookups; cJSON keeps repeated keys, which the format gives no
 * meaning, so a name seen twice is refused. */
static bool index_names(kn_safetensors *f, char *why, size_t n) {
    f->by_name = malloc(sizeof *f->by_name * (size_t)(f->n ? f->n : 1));
    if (!f->by_name) return snprintf(why, n, "out of memory"), false;
    for (int i = 0; i < f->n; i++) f->by_name[i] = &f->entries[i];
    qsort(f->by_name, (size_t)f->n, sizeof *f->by_name, by_name);
    for (int i = 1; i < f->n; i++)
        if (strcmp(f->by_name[i]->name, f->by_name[i - 1]->name) == 0)
            return snprintf(why, n, "tensor '%s' appears twice in the header", f->by_name[i]->name), false;
    return true;
}

static bool read_metadata(kn_safetensors *f, const cJSON *meta, char *why, size_t n) {
    char text[96];
    if (!cJSON_IsObject(meta))
        return snprintf(why, n, "__metadata__ is %s, not an object", json_text(meta, text, sizeof text)), false;
    f->meta = malloc(sizeof *f->meta * (size_t)(cJSON_GetArraySize(meta) + 1));
    if (!f->meta) return snprintf(why, n, "out of memory"), false;
    for (const cJSON *m = meta->child; m; m = m->next) {
        if (!cJSON_IsString(m))
            return snprintf(why, n, "__metadata__ '%s' is %s, not a string", m->string,
                            json_text(m, text, sizeof text)),
                   false;
        for (int i = 0; i < f->n_meta; i++)
            if (strcmp(f->meta[i]->string, m->string) == 0)
                return snprintf(why, n, "__metadata__ key '%s' appears twice", m->string), false;
        f->meta[f->n_meta++] = m;
    }
    return true;
}

/* Checks the parsed header and fills the entries and metadata; on failure writes the first
 * problem into why. */
static bool read_header(kn_safetensors *f, char *why, size_t n) {
    int count = 0;
    const cJSON *meta = NULL;
    for (const cJSON *j = f->header->child; j; j = j->next) {
        if (strcmp(j->string, "__metadata__") != 0) count++;
        else if (meta) return snprintf(why, n, "__metadata__ appears twice in the header"), false;
        else meta = j;
    }
    f->entries = malloc(sizeof *f->entries * (size_t)(count ? count : 1));
    if (!f->entries) return snprintf(why, n, "out of memory"), false;
    for (const cJSON *j = f->header->child; j; j = j->next) {
        if (j == meta) continue;
        char problem[384];
        parse_entry(j, f->data_bytes, &f->entries[f->n], problem, sizeof problem);
        if (problem[0]) return snprintf(why, n, "tensor '%s': %s", j->string, problem), false;
        f->n++;
    }
    return index_names(f, why, n) && (!meta || read_metadata(f, meta, why, n)) && check_tiling(f, why, n);
}

/* Reads the length and the JSON after it (from a copy, so that the parser cannot run past
 * the header even at the end of the mapping), then checks the header. */
static bool parse_header(kn_safetensors *f, char *why, size_t n) {
    uint64_t len = 0;
    for (int i = 0; i < 8; i++) len |= (uint64_t)f->map[i] << (8 * i);
    if (len > f->map_bytes - 8)
        return snprintf(why, n, "truncated: header says %" PRIu64 " bytes, file has %zu after the length", len,
                        f->map_bytes - 8),
               false;
    f->data = f->map + 8 + len;
    f->data_bytes = f->map_bytes - 8 - len;
    char *json = malloc((size_t)len + 1);
    if (!json) return snprintf(why, n, "out of memory for a %" PRIu64 "-byte header", len), false;
    memcpy(json, f->map + 8, (size_t)len);
    const char *end = NULL;
    f->header = cJSON_ParseWithLengthOpts(json, (size_t)len, &end, false);
    size_t at = end && end >= json ? (size_t)(end - json) : 0;
    while (f->header && at < len && (json[at] == ' ' || json[at] == '\t' || json[at] == '\n' || json[at] == '\r'))
        at++; /* the padding */
    free(json);
    if (!f->header) return snprintf(why, n, "header is not valid JSON (near byte %zu of %" PRIu64 ")", at, len), false;
    if (at < len)
        return snprintf(why, n, "header has bytes after its JSON (at byte %zu of %" PRIu64 ")", at, len), false;
    if (!cJSON_IsObject(f->header)) return snprintf(why, n, "header is not a JSON object"), false;
    return read_header(f, why, n);
}

kn_safetensors *kn_safetensors_open(const char *path) {
    if (!path) return kn_error_null(KN_ERR_NULL, "safetensors_open: path is NULL");
    kn_safetensors *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return kn_error_null(KN_ERR_OOM, "%s: out of memory opening it", path);
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int err = errno;
        if (fd >= 0) close(fd);
        return fail(f, path, "cannot open: %s", strerror(err));
    }
    f->map_bytes = (size_t)st.st_size;
    if (!S_ISREG(st.st_mode) || f->map_bytes < 8) {
        close(fd);
        if (!S_ISREG(st.st_mode)) return fail(f, path, "not a regular file");
        return fail(f, path, "%s: %zu bytes, shorter than the 8-byte header length",
                    f->map_bytes ? "truncated" : "empty file", f->map_bytes);
    }
    /* Writable but private (copy-on-write): tensors viewing the mapping may be trained in place
     * without changing the file. */
    void *map = mmap(NULL, f->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    int err = errno;
    close(fd); /* the mapping stays valid */
    if (map == MAP_FAILED) return fail(f, path, "cannot map: %s", strerror(err));
    if (!(f->mapping = malloc(sizeof *f->mapping))) {
        munmap(map, f->map_bytes);
        return fail(f, path, "out of memory");
    }
    atomic_init(&f->mapping->refs, 1);
    f->mapping->addr = map;
    f->mapping->bytes = f->map_bytes;
    f->map = map;
    char why[512];
    return parse_header(f, why, sizeof why) ? f : fail(f, path, "%s", why);
}

/* ---- accessors ----------------------------------------------------------------------------- */

static const st_entry *entry_at(const kn_safetensors *f, int i, const char *what) {
    if (!f) return kn_error_null_input(what, 0), NULL;
    if (i < 0 || i >= f->n)
        return kn_error_null(KN_ERR_INDEX, "%s: %s: index %d out of range for %d tensors", f->path, what, i, f->n);
    return &f->entries[i];
}

const char *kn_safetensors_path(const kn_safetensors *f) { return f ? f->path : NULL; }

int kn_safetensors_count(const kn_safetensors *f) { return f ? f->n : 0; }

const char *kn_safetensors_name(const kn_safetensors *f, int i) {
    const st_entry *e = entry_at(f, i, "safetensors_name");
    return e ? e->name : NULL;
}

kn_dtype kn_safetensors_dtype(const kn_safetensors *f, int i) {
    const st_entry *e = entry_at(f, i, "safetensors_dtype");
    return e ? e->dtype : KN_DTYPE_COUNT;
}

kn_shape kn_safetensors_shape(const kn_safetensors *f, int i) {
    const st_entry *e = entry_at(f, i, "safetensors_shape");
    return e ? e->shape : KN_SHAPE0;
}

int kn_safetensors_find(const kn_safetensors *f, const char *name) {
    if (!f || !name) return -1;
    const st_entry key = {.name = name}, *kp = &key;
    const st_entry **hit = bsearch(&kp, f->by_name, (size_t)f->n, sizeof *f->by_name, by_name);
    return hit ? (int)(*hit - f->entries) : -1;
}

int kn_safetensors_metadata_count(const kn_safetensors *f) { return f ? f->n_meta : 0; }

const char *kn_safetensors_metadata_key(const kn_safetensors *f, int i) {
    if (!f) return kn_error_null_input("safetensors_metadata_key", 0), NULL;
    if (i < 0 || i >= f->n_meta)
        return kn_error_null(KN_ERR_INDEX, "%s: metadata index %d out of range for %d entries", f->path, i, f->n_meta);
    return f->meta[i]->string;
}

const char *kn_safetensors_metadata(const kn_safetensors *f, const char *key) {
    for (int i = 0; f && key && i < f->n_meta; i++)
        if (strcmp(f->meta[i]->string, key) == 0) return f->meta[i]->valuestring;
    return NULL;
}

kn_tensor *kn_safetensors_get(kn_safetensors *f, const char *name, kn_device device) {
    if (!f) return kn_error_null_input("safetensors_get", 0), NULL;
    if (!name) return kn_error_null(KN_ERR_NULL, "%s: tensor name is NULL", f->path);
    int i = kn_safetensors_find(f, name);
    if (i < 0) return kn_error_null(KN_ERR_ARG, "%s: no tensor named '%s'", f->path, name);
    const st_entry *e = &f->entries[i];
    const uint8_t *bytes = f->data + e->begin;
    /* kiln's bool kernels read any nonzero byte as true but store 1; other bytes would make
     * equal-looking tensors compare and sum differently. */
    if (e->dtype == KN_BOOL)
        for (uint64_t k = 0; k < e->end - e->begin; k++)
            if (bytes[k] > 1)
                return kn_error_null(KN_ERR_IO, "%s: tensor '%s': BOOL element %" PRIu64 " is %u, not 0 or 1", f->path,
                                     name, k, bytes[k]);
    kn_tensor *t = kn_from_host(bytes, e->dtype, e->shape, device);
    if (!t) kn_st_prefix_error(f->path, name);
    return t;
}

kn_status kn_st_view(kn_safetensors *f, int i, kn_tensor **out) {
    *out = NULL;
    const st_entry *e = entry_at(f, i, "safetensors_view");
    if (!e) return kn_last_status();
    const uint8_t *bytes = f->data + e->begin;
    size_t size = kn_dtype_size(e->dtype);
    if (e->dtype == KN_BOOL || (uintptr_t)bytes % size != 0) return KN_OK;
    atomic_fetch_add_explicit(&f->mapping->refs, 1, memory_order_relaxed);
    kn_storage *s = kn_storage_external(KN_CPU, (void *)bytes, e->end - e->begin, st_map_release, f->mapping);
    if (!s) return kn_last_status();
    int64_t stride[KN_MAX_DIMS];
    kn_contiguous_strides(e->shape.v, e->shape.n, stride);
    *out = kn_tensor_wrap(s, e->dtype, e->shape.v, e->shape.n, stride, 0);
    return *out ? KN_OK : kn_last_status();
}
