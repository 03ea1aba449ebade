/* Regexes of tokenizer.json (Oniguruma syntax in the library) through PCRE2 with UTF and Unicode
 * properties, JIT-compiled when the platform allows; and the library's String/Regex patterns. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

struct kn_tok_regex {
    pcre2_code *code;
};

kn_tok_regex *kn_tok_regex_new(const char *pattern, const char *where) {
    int err;
    PCRE2_SIZE at;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err, &at, NULL);
    if (!code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        kn_set_error(KN_ERR_IO, "%s: regex /%s/ does not compile at offset %zu: %s", where, pattern, (size_t)at,
                     (const char *)msg);
        return NULL;
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE); /* a failed JIT leaves the interpreter, still correct */
    kn_tok_regex *re = malloc(sizeof *re);
    if (!re) {
        pcre2_code_free(code);
        kn_set_error(KN_ERR_OOM, "%s: out of memory", where);
        return NULL;
    }
    re->code = code;
    return re;
}

void kn_tok_regex_free(kn_tok_regex *re) {
    if (!re) return;
    pcre2_code_free(re->code);
    free(re);
}

kn_status kn_tok_regex_each(const kn_tok_regex *re, const char *s, size_t n,
                            bool (*found)(void *ctx, size_t start, size_t end), void *ctx) {
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re->code, NULL);
    if (!md) return kn_set_error(KN_ERR_OOM, "tokenizer: out of memory for regex match data");
    kn_status st = KN_OK;
    size_t pos = 0;
    while (pos <= n) {
        /* The text was checked to be UTF-8 once, up front. */
        int rc = pcre2_match(re->code, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            st = kn_set_error(KN_ERR_INTERNAL, "tokenizer: regex match failed: %s", (const char *)msg);
            break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t start = ov[0], end = ov[1];
        if (end > start) {
            if (!found(ctx, start, end)) {
                st = kn_last_status() != KN_OK ? kn_last_status() : KN_ERR_OOM;
                break;
            }
            pos = end;
        } else { /* an empty match: step over one character, as the library's iterator does */
            uint32_t cp;
            pos += pos < n ? kn_utf8_next(s + pos, n - pos, &cp) : 1;
        }
    }
    pcre2_match_data_free(md);
    return st;
}

kn_status kn_tok_pattern_load(kn_tok_pattern *p, const cJSON *j, const char *where) {
    *p = (kn_tok_pattern){0};
    const cJSON *lit = cJSON_GetObjectItemCaseSensitive(j, "String");
    const cJSON *rx = cJSON_GetObjectItemCaseSensitive(j, "Regex");
    if (cJSON_IsString(lit)) {
        p->literal_len = strlen(lit->valuestring);
        if (p->literal_len == 0) return kn_set_error(KN_ERR_IO, "%s: an empty String pattern", where);
        p->literal = kn_tok_strdup(lit->valuestring);
        return p->literal ? KN_OK : KN_ERR_OOM;
    }
    if (cJSON_IsString(rx)) {
        p->regex = kn_tok_regex_new(rx->valuestring, where);
        return p->regex ? KN_OK : kn_last_status();
    }
    return kn_set_error(KN_ERR_IO, "%s: pattern is neither {\"String\": ...} nor {\"Regex\": ...}", where);
}

void kn_tok_pattern_free(kn_tok_pattern *p) {
    free(p->literal);
    kn_tok_regex_free(p->regex);
    *p = (kn_tok_pattern){0};
}

typedef struct match_list {
    size_t *se, n, cap;
} match_list;

static bool add_match(void *ctx, size_t start, size_t end) {
    match_list *m = ctx;
    if (m->n + 1 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        size_t *q = realloc(m->se, cap * 2 * sizeof *q);
        if (!q) {
            kn_set_error(KN_ERR_OOM, "tokenizer: out of memory listing matches");
            return false;
        }
        m->se = q;
        m->cap = cap;
    }
    m->se[2 * m->n] = start;
    m->se[2 * m->n + 1] = end;
    m->n++;
    return true;
}

kn_status kn_tok_pattern_matches(const kn_tok_pattern *p, const char *s, size_t n, size_t **se, size_t *count) {
    match_list m = {0};
    kn_status st = KN_OK;
    if (p->regex) {
        st = kn_tok_regex_each(p->regex, s, n, add_match, &m);
    } else {
        for (size_t i = 0; i + p->literal_len <= n;) {
            const char *hit = memmem(s + i, n - i, p->literal, p->literal_len);
            if (!hit) break;
            size_t at = (size_t)(hit - s);
            if (!add_match(&m, at, at + p->literal_len)) {
                st = KN_ERR_OOM;
                break;
            }
            i = at + p->literal_len;
        }
    }
    if (st != KN_OK) {
        free(m.se);
        return st;
    }
    *se = m.se;
    *count = m.n;
    return KN_OK;
}
