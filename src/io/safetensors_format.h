/* What the safetensors reader, writer and loader share: the format's dtype names, entry
 * descriptions for messages, and prefixing an inner error with the file and tensor. */
#ifndef KILN_IO_SAFETENSORS_FORMAT_H
#define KILN_IO_SAFETENSORS_FORMAT_H

#include <stdbool.h>
#include <stddef.h>

#include "kiln/io.h"

/* Tensors go to and from files as raw bytes, and the format is little-endian. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "kiln's safetensors I/O assumes a little-endian host"
/* Tensor i of an open file as a CPU tensor whose storage is the file's mapping itself (no
 * copy; copy-on-write; the mapping lives until its last tensor and the file are gone), in
 * *out. *out is NULL, with KN_OK, when it cannot be a view (bool data, which is validated by
 * copying, or data not aligned to its element size): the caller copies instead. */
kn_status kn_st_view(kn_safetensors *f, int i, kn_tensor **out);

#endif

/* "F32", "BF16", "BOOL", ... for a kiln dtype. */
const char *kn_st_dtype_name(kn_dtype d);
/* The kiln dtype for a format name; false for names kiln has no dtype for. */
bool kn_st_dtype_parse(const char *name, kn_dtype *out);
/* "F32[5, 10]" into buf (at most n bytes); returns buf. */
char *kn_st_describe(kn_dtype d, kn_shape s, char *buf, size_t n);
/* Re-records the last error as "path: tensor 'name': <message>", keeping its status. */
kn_status kn_st_prefix_error(const char *path, const char *name);

/* Tensor i of an open file as a CPU tensor whose storage is the file's mapping itself (no
 * copy; copy-on-write; the mapping lives until its last tensor and the file are gone), in
 * *out. *out is NULL, with KN_OK, when it cannot be a view (bool data, which is validated by
 * copying, or data not aligned to its element size): the caller copies instead. */
kn_status kn_st_view(kn_safetensors *f, int i, kn_tensor **out);

#endif
