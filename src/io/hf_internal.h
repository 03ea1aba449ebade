/* What the Hugging Face directory readers share. */
#ifndef KILN_IO_HF_INTERNAL_H
#define KILN_IO_HF_INTERNAL_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* The parsed JSON of a file, or NULL with a KN_ERR_IO error naming the file and the problem
 * (missing, unreadable, not JSON: with the line of the parse error). */
cJSON *kn_hf_read_json(const char *path);
/* The directory part of path ("." when it has none) into out. */
void kn_hf_dirname(const char *path, char *out, size_t n);

#endif
