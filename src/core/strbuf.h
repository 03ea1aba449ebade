/* A growable string for text made piece by piece (printed tensors, generated source). */
#ifndef KILN_CORE_STRBUF_H
#define KILN_CORE_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"

typedef struct kn_strbuf {
    char *buf; /* NUL-terminated once anything was added; the caller frees it */
    size_t len, cap;
    bool failed; /* out of memory (or a bad format): the text is incomplete */
} kn_strbuf;

/* Appends printf-style text, growing the buffer; on failure sets `failed` and adds nothing. */
void kn_strbuf_printf(kn_strbuf *s, const char *fmt, ...) KN_PRINTF(2, 3);

#endif
