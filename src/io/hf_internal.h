/* What the Hugging Face directory readers share. */
#ifndef KILN_IO_HF_INTERNAL_H
#define KILN_IO_HF_INTERNAL_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "kiln/hf.h"

/* The directory part of path ("." when it has none) into out. */
void kn_hf_dirname(const char *path, char *out, size_t n);

#endif
