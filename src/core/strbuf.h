/* Text made piece by piece: a growable string (printed tensors, generated source), and
 * appending into a caller's fixed buffer. */
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

/* For snprintf-style APIs (a caller's buffer, the length wanted returned): writes the text
 * after the first len characters of buf (truncated to size, always terminated when size > 0)
 * and returns len plus the text's length, whether it fitted or not. */
size_t kn_snappend(char *buf, size_t size, size_t len, const char *fmt, ...) KN_PRINTF(4, 5);

#endif
