/* Text plumbing for the tokenizer: byte buffers, piece lists, UTF-8 reading and lossy repair,
 * the Unicode classes the library's rules use, and GPT-2's byte <-> character mapping. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tok_internal.h"

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) {
        kn_set_error(KN_ERR_OOM, "tokenizer: out of memory growing a buffer to %zu bytes", c * elem);
        return false;
    }
    *p = q;
    *cap = c;
    return true;
}

bool kn_tok_buf_put(kn_tok_buf *b, const void *s, size_t n) {
    if (!grow((void **)&b->p, &b->cap, b->n + n + 1, 1)) return false;
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return true;
}

bool kn_tok_buf_putc(kn_tok_buf *b, char c) { return kn_tok_buf_put(b, &c, 1); }

bool kn_tok_buf_put_cp(kn_tok_buf *b, uint32_t cp) {
    utf8proc_uint8_t tmp[4];
    utf8proc_ssize_t k = utf8proc_encode_char((utf8proc_int32_t)cp, tmp);
    return kn_tok_buf_put(b, tmp, (size_t)k);
}

void kn_tok_buf_free(kn_tok_buf *b) {
    free(b->p);
    *b = (kn_tok_buf){0};
}

bool kn_tok_pieces_add(kn_tok_pieces *p, const char *s, size_t n, kn_tok_start start) {
    if (n == 0) return true;
    if (!kn_tok_pieces_add_token(p, s, n)) return false;
    p->spans[p->n - 1].start = start;
    return true;
}

bool kn_tok_pieces_add_token(kn_tok_pieces *p, const char *s, size_t n) {
    if (!grow((void **)&p->spans, &p->cap, p->n + 1, sizeof *p->spans)) return false;
    size_t off = p->text.n;
    if (!kn_tok_buf_put(&p->text, s, n)) return false;
    p->spans[p->n++] = (kn_tok_span){off, n, KN_TOK_SPLIT};
    return true;
}

void kn_tok_pieces_clear(kn_tok_pieces *p) {
    p->n = 0;
    p->text.n = 0;
}

void kn_tok_pieces_free(kn_tok_pieces *p) {
    kn_tok_buf_free(&p->text);
    free(p->spans);
    *p = (kn_tok_pieces){0};
}

bool kn_tok_ids_push(kn_tok_ids *ids, int32_t id) {
    if (!grow((void **)&ids->v, &ids->cap, ids->n + 1, sizeof *ids->v)) return false;
    ids->v[ids->n++] = id;
    return true;
}

/* The range the second byte of a sequence must lie in, by lead byte (Unicode table 3-7);
 * later continuation bytes are always 0x80..0xBF. */
static int utf8_expect(unsigned char lead, unsigned char *lo, unsigned char *hi) {
    *lo = 0x80;
    *hi = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) return 2;
    if (lead >= 0xE0 && lead <= 0xEF) {
        if (lead == 0xE0) *lo = 0xA0;
        if (lead == 0xED) *hi = 0x9F;
        return 3;
    }
    if (lead >= 0xF0 && lead <= 0xF4) {
        if (lead == 0xF0) *lo = 0x90;
        if (lead == 0xF4) *hi = 0x8F;
        return 4;
    }
    return 0;
}

/* How many bytes from s form a well-formed prefix of the character starting there (the lead
 * and the continuation bytes that fit), and its total length in *want (0 for a bad lead). */
static size_t utf8_prefix(const unsigned char *s, size_t n, int *want) {
    unsigned char lo, hi;
    *want = utf8_expect(s[0], &lo, &hi);
    if (*want == 0) return 0;
    size_t k = 1;
    while (k < (size_t)*want && k < n) {
        if (s[k] < lo || s[k] > hi) break;
        lo = 0x80;
        hi = 0xBF;
        k++;
    }
    return k;
}

size_t kn_utf8_next(const char *str, size_t n, uint32_t *cp) {
    const unsigned char *s = (const unsigned char *)str;
    if (n == 0) return 0;
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    int want;
    size_t k = utf8_prefix(s, n, &want);
    if (want == 0 || k != (size_t)want) {
        *cp = KN_UTF8_ILL_FORMED;
        return 1;
    }
    uint32_t c = s[0] & (0x7F >> want);
    for (int i = 1; i < want; i++) c = (c << 6) | (s[i] & 0x3F);
    *cp = c;
    return (size_t)want;
}

size_t kn_utf8_valid_prefix(const char *s, size_t n) {
    uint32_t cp;
    size_t i = 0;
    while (i < n) {
        if ((unsigned char)s[i] < 0x80) {
            i++;
            continue;
        }
        size_t k = kn_utf8_next(s + i, n - i, &cp);
        if (cp == KN_UTF8_ILL_FORMED) break;
        i += k;
    }
    return i;
}

bool kn_utf8_valid(const char *s, size_t n) { return kn_utf8_valid_prefix(s, n) == n; }

bool kn_utf8_one_char(const char *s, uint32_t *cp) {
    size_t n = s ? strlen(s) : 0;
    return n && kn_utf8_next(s, n, cp) == n && *cp != KN_UTF8_ILL_FORMED;
}

bool kn_utf8_put_lossy(kn_tok_buf *out, const unsigned char *s, size_t n) {
    static const char replacement[] = "\xEF\xBF\xBD";
    if (n == 0) return kn_tok_buf_put(out, "", 0); /* s may be NULL then, and NULL + 0 is undefined */
    size_t i = 0, clean = 0; /* s[clean..i) is well-formed and not yet copied */
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        int want;
        size_t k = utf8_prefix(s + i, n - i, &want);
        if (want != 0 && k == (size_t)want) {
            i += k;
            continue;
        }
        if (!kn_tok_buf_put(out, s + clean, i - clean) || !kn_tok_buf_put(out, replacement, 3)) return false;
        i += k ? k : 1; /* a maximal ill-formed subpart: the bytes that fit, or the bad byte alone */
        clean = i;
    }
    return kn_tok_buf_put(out, s + clean, n - clean);
}

bool kn_unicode_is_space(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000;
}

bool kn_unicode_is_word(uint32_t cp) {
    if (cp == 0x200C || cp == 0x200D) return true; /* Join_Control */
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC:
        return true;
    default:
        return false;
    }
}

/* Bytes that are printable Latin-1 map to themselves; the other 68 take 256, 257, ... in order. */
static bool byte_is_printable(unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

uint32_t kn_byte_level_char(unsigned char b) {
    if (byte_is_printable(b)) return b;
    if (b <= 0x20) return 256 + b;            /* 33 control bytes and space: 256..288 */
    if (b <= 0xA0) return 256 + 33 + (b - 0x7F); /* DEL, C1 controls and NBSP: 289..322 */
    return 323;                               /* the soft hyphen 0xAD */
}

int kn_byte_level_byte(uint32_t cp) {
    if (cp < 256) return byte_is_printable(cp) ? (int)cp : -1;
    if (cp <= 288) return (int)(cp - 256);
    if (cp <= 322) return (int)(cp - 289 + 0x7F);
    return cp == 323 ? 0xAD : -1;
}
