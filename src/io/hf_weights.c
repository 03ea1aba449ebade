/* A Hugging Face model's weights as one name -> tensor map over one or many safetensors files
 * (kiln/hf.h). Each file is validated by kn_safetensors_open; this file adds the directory
 * rules, the shard index, and placing a tensor on a device in a dtype. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "core/tensor_impl.h"
#include "io/hf_internal.h"
#include "io/safetensors_format.h"
#include "kiln/hf.h"
#include "kiln/ops.h"

typedef struct hf_entry {
    const char *name; /* owned by its file */
    int file, index;  /* the file, and the tensor's index in it */
} hf_entry;

struct kn_hf_weights {
    char *where; /* the path given to open, for messages */
    int n_files;
    kn_safetensors **files;
    int n;
    hf_entry *entries;        /* file order, then header order */
    const hf_entry **by_name; /* sorted, for lookups */
};

void kn_hf_weights_close(kn_hf_weights *w) {
    if (!w) return;
    for (int i = 0; i < w->n_files; i++) kn_safetensors_close(w->files[i]);
    free(w->files);
    free(w->entries);
    free(w->by_name);
    free(w->where);
    free(w);
}

static int by_name(const void *a, const void *b) {
    return strcmp((*(const hf_entry *const *)a)->name, (*(const hf_entry *const *)b)->name);
}

static bool is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Opens `path` as the next file of w. */
static bool add_file(kn_hf_weights *w, const char *path) {
    kn_safetensors **grown = realloc(w->files, (size_t)(w->n_files + 1) * sizeof *grown);
    if (!grown) return kn_error(KN_ERR_OOM, "%s: out of memory", path), false;
    w->files = grown;
    if (!(w->files[w->n_files] = kn_safetensors_open(path))) return false;
    w->n_files++;
    return true;
}

/* Lists every file's tensors; refuses a name held by two files. */
static bool build_entries(kn_hf_weights *w) {
    int n = 0;
    for (int f = 0; f < w->n_files; f++) n += kn_safetensors_count(w->files[f]);
    w->entries = calloc((size_t)n + 1, sizeof *w->entries);
    w->by_name = calloc((size_t)n + 1, sizeof *w->by_name);
    if (!w->entries || !w->by_name) return kn_error(KN_ERR_OOM, "%s: out of memory", w->where), false;
    for (int f = 0; f < w->n_files; f++)
        for (int i = 0; i < kn_safetensors_count(w->files[f]); i++) {
            w->entries[w->n] = (hf_entry){kn_safetensors_name(w->files[f], i), f, i};
            w->by_name[w->n] = &w->entries[w->n];
            w->n++;
        }
    qsort(w->by_name, (size_t)w->n, sizeof *w->by_name, by_name);
    for (int i = 1; i < w->n; i++)
        if (strcmp(w->by_name[i - 1]->name, w->by_name[i]->name) == 0)
            return kn_error(KN_ERR_IO, "%s: tensor '%s' is in both %s and %s", w->where, w->by_name[i]->name,
                            kn_safetensors_path(w->files[w->by_name[i - 1]->file]),
                            kn_safetensors_path(w->files[w->by_name[i]->file])),
                   false;
    return true;
}

/* The shard index: {"weight_map": {"name": "model-00001-of-00002.safetensors", ...}}. Opens each
 * file it names (relative to the index's directory) once, then checks that the shards hold
 * exactly the names the index gives them. */
static bool open_index(kn_hf_weights *w, const char *index_path) {
    cJSON *root = kn_hf_read_json(index_path, KN_HF_JSON_MAX_BYTES);
    if (!root) return false;
    bool ok = false;
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!cJSON_IsObject(map) || !map->child) {
        kn_error(KN_ERR_IO, "%s: \"weight_map\" is %s", index_path, map ? "not a non-empty object" : "missing");
        goto done;
    }
    char dir[4096];
    kn_hf_dirname(index_path, dir, sizeof dir);
    const char **names = NULL; /* the distinct files, in first-mention order */
    int n_names = 0;
    for (const cJSON *e = map->child; e; e = e->next) {
        if (!cJSON_IsString(e) || !e->valuestring[0] || e->valuestring[0] == '/' || strstr(e->valuestring, "..")) {
            kn_error(KN_ERR_IO, "%s: weight_map[\"%s\"] is not a file name in the index's directory", index_path,
                     e->string);
            goto names_done;
        }
        int k = 0;
        while (k < n_names && strcmp(names[k], e->valuestring) != 0) k++;
        if (k < n_names) continue;
        const char **grown = realloc(names, (size_t)(n_names + 1) * sizeof *grown);
        if (!grown) {
            kn_error(KN_ERR_OOM, "%s: out of memory", index_path);
            goto names_done;
        }
        names = grown;
        names[n_names++] = e->valuestring;
        char path[4352];
        snprintf(path, sizeof path, "%s/%s", dir, e->valuestring);
        if (!is_file(path)) {
            kn_error(KN_ERR_IO, "%s: shard %s (holding '%s') is missing", index_path, path, e->string);
            goto names_done;
        }
        if (!add_file(w, path)) goto names_done;
    }
    if (!build_entries(w)) goto names_done;
    int listed = 0;
    for (const cJSON *e = map->child; e; e = e->next, listed++) {
        int k = 0;
        while (strcmp(names[k], e->valuestring) != 0) k++;
        int i = kn_hf_weights_find(w, e->string);
        if (i < 0 || w->entries[i].file != k) {
            kn_error(KN_ERR_IO, "%s: '%s' is listed in %s, %s", index_path, e->string, e->valuestring,
                     i < 0 ? "but no shard holds it" : "but another shard holds it");
            goto names_done;
        }
    }
    if (listed != w->n) {
        for (int i = 0; i < w->n; i++)
            if (!cJSON_GetObjectItemCaseSensitive(map, w->entries[i].name)) {
                kn_error(KN_ERR_IO, "%s: %s holds '%s', which the index does not list", index_path,
                         kn_safetensors_path(w->files[w->entries[i].file]), w->entries[i].name);
                break;
            }
        goto names_done;
    }
    ok = true;
names_done:
    free(names);
done:
    cJSON_Delete(root);
    return ok;
}

/* A directory: its index, else model.safetensors, else its only *.safetensors file. */
static bool open_dir(kn_hf_weights *w, const char *dir) {
    char path[4352];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    if (is_file(path)) return open_index(w, path);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (is_file(path)) return add_file(w, path) && build_entries(w);
    DIR *d = opendir(dir);
    if (!d) return kn_error(KN_ERR_IO, "%s: cannot open the directory", dir), false;
    int found = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (ends_with(e->d_name, ".safetensors") && found++ == 0) snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    closedir(d);
    if (found == 1) return add_file(w, path) && build_entries(w);
    return kn_error(KN_ERR_IO,
                    found ? "%s: %d .safetensors files but no model.safetensors.index.json saying which tensor is where"
                          : "%s: no model.safetensors, model.safetensors.index.json or other .safetensors file",
                    dir, found),
           false;
}

kn_hf_weights *kn_hf_weights_open(const char *path) {
    if (!path) return kn_error_null(KN_ERR_NULL, "hf_weights_open: path is NULL");
    kn_hf_weights *w = calloc(1, sizeof *w);
    if (!w || !(w->where = strdup(path))) {
        free(w);
        return kn_error_null(KN_ERR_OOM, "%s: out of memory", path);
    }
    struct stat st;
    bool ok;
    if (stat(path, &st) != 0) ok = (kn_error(KN_ERR_IO, "%s: no such file or directory", path), false);
    else if (S_ISDIR(st.st_mode)) ok = open_dir(w, path);
    else if (ends_with(path, ".json")) ok = open_index(w, path);
    else ok = add_file(w, path) && build_entries(w);
    if (ok) return w;
    kn_hf_weights_close(w);
    return NULL;
}

/* ---- lookups -------------------------------------------------------------------------------- */

static const hf_entry *entry_at(const kn_hf_weights *w, int i, const char *what) {
    if (!w) return kn_error_null_input(what, 0), NULL;
    if (i < 0 || i >= w->n)
        return kn_error_null(KN_ERR_INDEX, "%s: %s: index %d out of range for %d tensors", w->where, what, i, w->n);
    return &w->entries[i];
}

int kn_hf_weights_count(const kn_hf_weights *w) { return w ? w->n : 0; }

const char *kn_hf_weights_name(const kn_hf_weights *w, int i) {
    const hf_entry *e = entry_at(w, i, "hf_weights_name");
    return e ? e->name : NULL;
}

kn_dtype kn_hf_weights_dtype(const kn_hf_weights *w, int i) {
    const hf_entry *e = entry_at(w, i, "hf_weights_dtype");
    return e ? kn_safetensors_dtype(w->files[e->file], e->index) : KN_DTYPE_COUNT;
}

kn_shape kn_hf_weights_shape(const kn_hf_weights *w, int i) {
    const hf_entry *e = entry_at(w, i, "hf_weights_shape");
    return e ? kn_safetensors_shape(w->files[e->file], e->index) : KN_SHAPE0;
}

const char *kn_hf_weights_file(const kn_hf_weights *w, int i) {
    const hf_entry *e = entry_at(w, i, "hf_weights_file");
    return e ? kn_safetensors_path(w->files[e->file]) : NULL;
}

int kn_hf_weights_find(const kn_hf_weights *w, const char *name) {
    if (!w || !name) return -1;
    const hf_entry key = {.name = name}, *kp = &key;
    const hf_entry **hit = bsearch(&kp, w->by_name, (size_t)w->n, sizeof *w->by_name, by_name);
    return hit ? (int)(*hit - w->entries) : -1;
}

size_t kn_hf_weights_bytes(const kn_hf_weights *w) {
    size_t bytes = 0;
    for (int i = 0; w && i < w->n; i++)
        bytes += (size_t)kn_shape_numel(kn_hf_weights_shape(w, i)) * kn_dtype_size(kn_hf_weights_dtype(w, i));
    return bytes;
}

/* ---- placing a tensor ----------------------------------------------------------------------- */

static bool is_float(kn_dtype d) { return d == KN_F32 || d == KN_F64 || d == KN_F16 || d == KN_BF16; }

kn_tensor *kn_hf_weights_get(kn_hf_weights *w, const char *name, kn_device device, kn_dtype dtype) {
    if (!w) return kn_error_null_input("hf_weights_get", 0), NULL;
    int i = kn_hf_weights_find(w, name);
    if (i < 0) return kn_error_null(KN_ERR_ARG, "%s: no tensor named '%s'", w->where, name ? name : "(null)");
    kn_safetensors *f = w->files[w->entries[i].file];
    kn_dtype stored = kn_safetensors_dtype(f, w->entries[i].index);
    kn_shape shape = kn_safetensors_shape(f, w->entries[i].index);
    if (dtype == KN_DTYPE_COUNT) dtype = stored;
    char d[64];
    if (dtype != stored && !(is_float(dtype) && is_float(stored)))
        return kn_error_null(KN_ERR_DTYPE, "%s: tensor '%s' is %s; it cannot become %s", kn_safetensors_path(f), name,
                             kn_st_describe(stored, shape, d, sizeof d), kn_dtype_name(dtype));
    if (device.type == KN_DEVICE_META) /* nothing is read */
        return kn_scope_adopt(kn_tensor_alloc("hf_weights_get", dtype, shape.v, shape.n, device));
    kn_tensor *host;
    if (kn_st_view(f, w->entries[i].index, &host) != KN_OK) return NULL;
    host = host ? kn_scope_adopt(host) : kn_safetensors_get(f, name, KN_CPU);
    if (!host || (dtype == stored && device.type == KN_DEVICE_CPU)) return host;
    kn_scope_push();
    kn_tensor *t = dtype == stored ? host : kn_cast(host, dtype);
    if (device.type != KN_DEVICE_CPU || device.index != 0) t = kn_to_device(t, device);
    if (!t) kn_st_prefix_error(kn_safetensors_path(f), name);
    kn_scope_pop_keep(t);
    kn_release(host);
    return t;
}
