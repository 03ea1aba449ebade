/* Files: tensors in the safetensors format, and (kiln/atomic_file.h) atomic replacement of a file.
 *
 * Every function here reports failures as values; messages name the file and its first
 * problem ("model.safetensors: tensor 'wte.weight': data_offsets [0, 100] hold 100 bytes but
 * F32[5, 10] needs 200"). Damaged files give KN_ERR_IO. */
#ifndef KILN_IO_H
#define KILN_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "kiln/atomic_file.h"
#include "kiln/dtype.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- safetensors: writing ---------------------------------------------------------------------
 * Writes n tensors under their names (unique; "__metadata__" is reserved) and n_meta string
 * pairs of metadata (unique keys; none when n_meta is 0), atomically, in Hugging Face's
 * format: an 8-byte little-endian header length, a JSON header padded with spaces to a
 * multiple of 8 bytes, then each tensor's row-major bytes. Tensors of any dtype, shape,
 * layout or value-holding device are accepted. In the data section the tensors are ordered by
 * element size, widest first, and otherwise as given, so that every tensor of a mapped file is
 * aligned to its element size (as the reference writer does). */
KN_API kn_status kn_safetensors_save(const char *path, int n, const char *const *names, kn_tensor *const *tensors,
                              const char *const *meta_keys, const char *const *meta_values, int n_meta);

/* ---- safetensors: reading ---------------------------------------------------------------------
 * kn_safetensors_open maps the file and validates the whole header before returning: its
 * length, the JSON, every entry's dtype, shape and data_offsets (which must match the shape,
 * and together tile the data section exactly, without gaps or overlaps, as the reference
 * reader requires), and the metadata (strings only). Dtypes kiln has no type for (U8, F8_*, ...)
 * are refused. Returns NULL with an error for a damaged file. */
typedef struct kn_safetensors kn_safetensors;
KN_API kn_safetensors *kn_safetensors_open(const char *path);
KN_API void kn_safetensors_close(kn_safetensors *f);   /* NULL is ignored */

/* The path the file was opened with. */
KN_API const char *kn_safetensors_path(const kn_safetensors *f);

/* The tensors, in the header's order. An index out of range gives NULL / KN_DTYPE_COUNT /
 * KN_SHAPE0 with a KN_ERR_INDEX error. */
KN_API int kn_safetensors_count(const kn_safetensors *f);
KN_API const char *kn_safetensors_name(const kn_safetensors *f, int i);
KN_API kn_dtype kn_safetensors_dtype(const kn_safetensors *f, int i);
KN_API kn_shape kn_safetensors_shape(const kn_safetensors *f, int i);
/* The index of the tensor named `name`, or -1 (no error is recorded). */
KN_API int kn_safetensors_find(const kn_safetensors *f, const char *name);

/* A copy of the tensor `name` in a new tensor on `device` (on the meta device: its shape and
 * dtype only). An absent name is KN_ERR_ARG; a bool tensor with a byte other than 0 or 1 is
 * KN_ERR_IO. A NULL f passes the error of a failed open through. */
KN_API kn_tensor *kn_safetensors_get(kn_safetensors *f, const char *name, kn_device device);

/* The metadata: count, keys in the header's order, and the value for a key (NULL if absent;
 * no error is recorded). The strings live until kn_safetensors_close. */
KN_API int kn_safetensors_metadata_count(const kn_safetensors *f);
KN_API const char *kn_safetensors_metadata_key(const kn_safetensors *f, int i);
KN_API const char *kn_safetensors_metadata(const kn_safetensors *f, const char *key);

/* ---- safetensors: loading into existing tensors -------------------------------------------------
 * Flags for loading. Without KN_LOAD_CAST the stored dtype must equal the destination's; with
 * it, a float tensor (F16, BF16, F32, F64) may go into any float destination, converted by
 * the copy (rounding to nearest even). Integer and bool tensors always need the same dtype. */
typedef enum kn_load_flags {
    KN_LOAD_STRICT = 1, /* every tensor in the file must be one of the names asked for */
    KN_LOAD_CAST = 2,   /* convert between float dtypes */
} kn_load_flags;

/* Copies the tensor `name` of an open file into dst (any layout; same shape, a dtype as the
 * flags allow; on the meta device only checked). Shape mismatch is KN_ERR_SHAPE, dtype
 * mismatch KN_ERR_DTYPE, an absent name KN_ERR_ARG; dst is untouched on failure. */
KN_API kn_status kn_safetensors_read_into(kn_safetensors *f, const char *name, kn_tensor *dst, unsigned flags);

/* Opens `path` and copies each names[i] into dst[i]. Every name, shape and dtype is checked
 * before anything is written, so on failure no dst has changed; the message names the first
 * problem (a missing name, a mismatch, or with KN_LOAD_STRICT a tensor in the file that was
 * not asked for, which is KN_ERR_ARG). */
KN_API kn_status kn_safetensors_load_into(const char *path, int n, const char *const *names, kn_tensor *const *dst,
                                   unsigned flags);

#ifdef __cplusplus
}
#endif
#endif
