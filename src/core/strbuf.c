#include "core/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void kn_strbuf_printf(kn_strbuf *s, const char *fmt, ...) {
    if (s->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = s->cap - s->len;
        int n = vsnprintf(s->buf ? s->buf + s->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) {
            s->failed = true;
            return;
        }
        if ((size_t)n < room) {
            s->len += (size_t)n;
            return;
        }
        size_t cap = (s->cap + (size_t)n + 1) * 2;
        char *b = realloc(s->buf, cap);
        if (!b) {
            s->failed = true;
            return;
        }
        s->buf = b;
        s->cap = cap;
    }
}

size_t kn_snappend(char *buf, size_t size, size_t len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(len < size ? buf + len : NULL, len < size ? size - len : 0, fmt, ap);
    va_end(ap);
    return n > 0 ? len + (size_t)n : len;
}
