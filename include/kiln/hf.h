/* Hugging Face model directories: weights in safetensors (one model.safetensors, or shards
 * listed by model.safetensors.index.json), read through mmap.
 *
 * A weight that stays in its stored dtype on the CPU is not copied: the tensor's storage is
 * the mapped file itself, mapped copy-on-write (training it never changes the file), and the
 * mapping lives as long as any tensor made from it, even after kn_hf_weights_close. Any other
 * dtype or device gets one conversion straight into the destination (the `device_map` idea:
 * nothing is staged in a host tensor). On the meta device nothing is read but the headers, so
 * a 70B model's shapes can be listed on a laptop.
 *
 * Errors name the file and the problem: a missing shard, a truncated file, a tensor listed
 * by the index but absent from its shard, a shape or dtype that is not what the model
 * expects. */
#ifndef KILN_HF_H
#define KILN_HF_H

#include <stdbool.h>
#include <stddef.h>

#include "kiln/autograd.h" /* kn_tensor_assign_, with which loaders fill modules */
#include "kiln/dtype.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- weights --------------------------------------------------------------------------------- */
typedef struct kn_hf_weights kn_hf_weights;

/* path: a directory (model.safetensors.index.json if present, else model.safetensors, else its
 * only *.safetensors file), an index file, or one safetensors file. Every file's header is
 * validated, and an index whose files or names do not agree with the shards is refused. */
KN_API kn_hf_weights *kn_hf_weights_open(const char *path);
KN_API void kn_hf_weights_close(kn_hf_weights *w);   /* NULL is ignored */

/* The tensors of all files, in file order then header order. */
KN_API int kn_hf_weights_count(const kn_hf_weights *w);
KN_API const char *kn_hf_weights_name(const kn_hf_weights *w, int i);
KN_API kn_dtype kn_hf_weights_dtype(const kn_hf_weights *w, int i);
KN_API kn_shape kn_hf_weights_shape(const kn_hf_weights *w, int i);
/* The file that holds tensor i (for messages). */
KN_API const char *kn_hf_weights_file(const kn_hf_weights *w, int i);
/* The index of `name`, or -1 (no error recorded). */
KN_API int kn_hf_weights_find(const kn_hf_weights *w, const char *name);
/* Total bytes of the tensors as stored. */
KN_API size_t kn_hf_weights_bytes(const kn_hf_weights *w);

/* The tensor `name` on `device` in `dtype` (KN_DTYPE_COUNT: as stored; float dtypes convert
 * to float dtypes only). See the top of this file for when it is a view of the mapping. */
KN_API kn_tensor *kn_hf_weights_get(kn_hf_weights *w, const char *name, kn_device device, kn_dtype dtype);

/* ---- the directory's JSON files -----------------------------------------------------------------
 * One reader for config.json, generation_config.json, tokenizer.json and the shard index, as
 * strict as Python's json module that transformers reads them with: nothing but whitespace
 * after the value, and a key repeated in an object keeps its last value (at its first place).
 * Files are read whole, so each kind has a size cap (an error naming the file and the cap). */
#define KN_HF_CONFIG_MAX_BYTES ((size_t)16 << 20) /* config.json, generation_config.json */
#define KN_HF_JSON_MAX_BYTES ((size_t)256 << 20)  /* tokenizer.json, model.safetensors.index.json */
struct cJSON;
/* The parsed object (free it with cJSON_Delete), or NULL with KN_ERR_IO naming the file and the
 * problem: missing, unreadable, over max_bytes, not JSON (with the line), not an object. */
KN_API struct cJSON *kn_hf_read_json(const char *path, size_t max_bytes);

/* ---- loading a module tree -------------------------------------------------------------------
 * For every parameter and buffer of `module` (kn_module_named(KN_STATE)), takes the file's
 * tensor under the same name (or the name `rename` writes into buf, returning buf, or NULL
 * to skip that entry) on `device` in `dtype` (KN_DTYPE_COUNT: each entry's own dtype) and
 * makes the module's handle share it (kn_tensor_assign_). Every name, shape and dtype is
 * checked before anything is assigned, so on failure the module is unchanged; the message
 * names the file and the first problem. Tied weights (one tensor under two names) are assigned
 * once. `unused`, when not NULL, receives how many file tensors no entry took. */
typedef const char *(*kn_hf_rename_fn)(void *ctx, const char *module_name, char *buf, size_t n);
typedef struct kn_hf_load_opts {
    kn_device device;
    kn_dtype dtype;
    kn_hf_rename_fn rename;
    void *rename_ctx;
    /* names of the module that may be absent from the file (e.g. a tied lm_head), NULL-ended */
    const char *const *optional;
} kn_hf_load_opts;
KN_API kn_status kn_hf_load_module(void *module, kn_hf_weights *w, const kn_hf_load_opts *opts, int *unused);

#ifdef __cplusplus
}
#endif
#endif
