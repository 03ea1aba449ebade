/* Normalizers: NFC/NFD/NFKC/NFKD (utf8proc), Lowercase, Prepend, Replace, Strip, and Sequence
 * (flattened into one list at load). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tok_internal.h"

typedef enum { NORM_UNICODE, NORM_LOWERCASE, NORM_PREPEND, NORM_REPLACE, NORM_STRIP } norm_kind;

typedef struct norm_step {
    norm_kind kind;
    utf8proc_option_t unicode_form; /* NORM_UNICODE */
    char *text;                     /* Prepend's prefix, Replace's content */
    kn_tok_pattern pattern;         /* NORM_REPLACE */
    bool left, right;               /* NORM_STRIP */
} norm_step;

struct kn_normalizer {
    norm_step *steps;
    size_t n;
};

void kn_normalizer_free(kn_normalizer *n) {
    if (!n) return;
    for (size_t i = 0; i < n->n; i++) {
        free(n->steps[i].text);
        kn_tok_pattern_free(&n->steps[i].pattern);
    }
    free(n->steps);
    free(n);
}

/* The utf8proc options of a Unicode normal form's name; false for another name. */
static bool unicode_form(const char *name, utf8proc_option_t *form) {
    static const struct {
        const char *name;
        utf8proc_option_t form;
    } forms[] = {{"NFC", UTF8PROC_COMPOSE}, {"NFD", UTF8PROC_DECOMPOSE},
                 {"NFKC", UTF8PROC_COMPOSE | UTF8PROC_COMPAT}, {"NFKD", UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT}};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++)
        if (strcmp(name, forms[i].name) == 0) {
            *form = forms[i].form | UTF8PROC_STABLE;
            return true;
        }
    return false;
}

static kn_status load_into(kn_normalizer *n, const cJSON *j, const char *file, int depth) {
    const char *type = kn_tok_json_str(j, "type", "normalizer", false);
    if (type && strcmp(type, "Sequence") == 0 && depth < 8) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(j, "normalizers"), *it;
        if (!cJSON_IsArray(list)) return kn_set_error(KN_ERR_IO, "%s: normalizer.normalizers: not a list", file);
        cJSON_ArrayForEach(it, list) {
            kn_status st = load_into(n, it, file, depth + 1);
            if (st != KN_OK) return st;
        }
        return KN_OK;
    }
    norm_step s = {0};
    char where[256];
    snprintf(where, sizeof where, "%s: normalizer %s", file, type ? type : "?");
    if (type && unicode_form(type, &s.unicode_form)) {
        s.kind = NORM_UNICODE;
    } else if (type && strcmp(type, "Lowercase") == 0) {
        s.kind = NORM_LOWERCASE;
    } else if (type && strcmp(type, "Strip") == 0) {
        s.kind = NORM_STRIP;
        s.left = kn_tok_json_bool(j, "strip_left", true);
        s.right = kn_tok_json_bool(j, "strip_right", true);
    } else if (type && strcmp(type, "Prepend") == 0) {
        const char *p = kn_tok_json_str(j, "prepend", where, true);
        if (!p) return KN_ERR_IO;
        s.kind = NORM_PREPEND;
        if (!(s.text = kn_tok_strdup(p))) return KN_ERR_OOM;
    } else if (type && strcmp(type, "Replace") == 0) {
        const char *content = kn_tok_json_str(j, "content", where, true);
        if (!content) return KN_ERR_IO;
        s.kind = NORM_REPLACE;
        kn_status st = kn_tok_pattern_load(&s.pattern, cJSON_GetObjectItemCaseSensitive(j, "pattern"), where);
        if (st != KN_OK) return st;
        if (!(s.text = kn_tok_strdup(content))) {
            kn_tok_pattern_free(&s.pattern);
            return KN_ERR_OOM;
        }
    } else {
        return kn_tok_unsupported(file, "normalizer", j);
    }
    norm_step *grown = realloc(n->steps, (n->n + 1) * sizeof *grown);
    if (!grown) {
        free(s.text);
        kn_tok_pattern_free(&s.pattern);
        return kn_set_error(KN_ERR_OOM, "%s: out of memory", file);
    }
    n->steps = grown;
    n->steps[n->n++] = s;
    return KN_OK;
}

kn_normalizer *kn_normalizer_load(const cJSON *j, const char *file) {
    kn_normalizer *n = calloc(1, sizeof *n);
    if (!n) {
        kn_set_error(KN_ERR_OOM, "%s: out of memory", file);
        return NULL;
    }
    if (load_into(n, j, file, 0) != KN_OK) {
        kn_normalizer_free(n);
        return NULL;
    }
    return n;
}

static kn_status apply_step(const norm_step *s, const char *in, size_t n, kn_tok_edges edges, kn_tok_buf *out) {
    switch (s->kind) {
    case NORM_UNICODE: {
        utf8proc_uint8_t *mapped = NULL;
        utf8proc_ssize_t k = utf8proc_map((const utf8proc_uint8_t *)in, (utf8proc_ssize_t)n, &mapped, s->unicode_form);
        if (k < 0) return kn_set_error(KN_ERR_ARG, "tokenizer: Unicode normalization failed: %s", utf8proc_errmsg(k));
        bool ok = kn_tok_buf_put(out, mapped, (size_t)k);
        free(mapped);
        return ok ? KN_OK : KN_ERR_OOM;
    }
    case NORM_LOWERCASE:
        for (size_t i = 0; i < n;) {
            uint32_t cp;
            size_t k = kn_utf8_next(in + i, n - i, &cp);
            /* Rust's char::to_lowercase: one code point each, except U+0130 (i and a combining dot);
             * an ill-formed byte (none reaches here from a checked file and text) stays as it is. */
            bool ok = cp == KN_UTF8_ILL_FORMED ? kn_tok_buf_put(out, in + i, 1)
                      : cp == 0x130            ? kn_tok_buf_put(out, "i\xCC\x87", 3)
                                               : kn_tok_buf_put_cp(out, (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp));
            if (!ok) return KN_ERR_OOM;
            i += k;
        }
        return KN_OK;
    case NORM_STRIP: {
        size_t a = 0, b = n;
        uint32_t cp;
        while (s->left && !edges.continues_before && a < b) {
            size_t k = kn_utf8_next(in + a, b - a, &cp);
            if (!kn_unicode_is_space(cp)) break;
            a += k;
        }
        while (s->right && !edges.continues_after && b > a) {
            size_t c = b - 1;
            while (c > a && ((unsigned char)in[c] & 0xC0) == 0x80) c--;
            if (kn_utf8_next(in + c, b - c, &cp) != b - c || !kn_unicode_is_space(cp)) break;
            b = c;
        }
        return kn_tok_buf_put(out, in + a, b - a) ? KN_OK : KN_ERR_OOM;
    }
    case NORM_PREPEND:
        if (n && !edges.continues_before && !kn_tok_buf_put(out, s->text, strlen(s->text))) return KN_ERR_OOM;
        return kn_tok_buf_put(out, in, n) ? KN_OK : KN_ERR_OOM;
    case NORM_REPLACE: {
        size_t *se = NULL, count = 0;
        kn_status st = kn_tok_pattern_matches(&s->pattern, in, n, &se, &count);
        if (st != KN_OK) return st;
        size_t prev = 0, clen = strlen(s->text);
        bool ok = true;
        for (size_t i = 0; i < count && ok; i++) {
            ok = kn_tok_buf_put(out, in + prev, se[2 * i] - prev) && kn_tok_buf_put(out, s->text, clen);
            prev = se[2 * i + 1];
        }
        free(se);
        return ok && kn_tok_buf_put(out, in + prev, n - prev) ? KN_OK : KN_ERR_OOM;
    }
    }
    return KN_ERR_INTERNAL;
}

kn_status kn_normalizer_apply(const kn_normalizer *nz, const char *s, size_t len, kn_tok_edges edges, kn_tok_buf *out) {
    kn_tok_buf a = {0};
    out->n = 0;
    if (!kn_tok_buf_put(out, s, len)) return KN_ERR_OOM;
    for (size_t i = 0; i < nz->n; i++) {
        a.n = 0;
        kn_status st = apply_step(&nz->steps[i], out->p, out->n, edges, &a);
        if (st != KN_OK) {
            kn_tok_buf_free(&a);
            return st;
        }
        kn_tok_buf t = *out; /* the step's output becomes the next step's input */
        *out = a;
        a = t;
    }
    kn_tok_buf_free(&a);
    return KN_OK;
}
