/* Added tokens (specials like <|endoftext|>, and tokens added after training): loading, and
 * finding them in text before the model sees it, leftmost-longest, with the library's
 * single_word / lstrip / rstrip rules. */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

void kn_added_vocab_free(kn_added_vocab *a) {
    for (size_t i = 0; i < a->n; i++) {
        free(a->tokens[i].content);
        free(a->tokens[i].match);
    }
    free(a->tokens);
    kn_strmap_free(&a->by_content);
    kn_strmap_free(&a->by_id);
    for (int set = 0; set < 2; set++)
        for (int b = 0; b < 256; b++) free(a->by_first_byte[set][b]);
    *a = (kn_added_vocab){0};
}

static int by_length_desc(const void *x, const void *y, void *tokens) {
    const kn_added_token *t = tokens;
    size_t a = t[*(const int32_t *)x].match_len, b = t[*(const int32_t *)y].match_len;
    return a < b ? 1 : a > b ? -1 : 0;
}

/* Per set and first byte, the tokens that can start there, longest first. */
static kn_status index_tokens(kn_added_vocab *a) {
    for (int set = 0; set < 2; set++)
        for (int byte = 0; byte < 256; byte++) {
            size_t count = 0;
            for (size_t i = 0; i < a->n; i++)
                count += a->tokens[i].normalized == (set == 1) && (unsigned char)a->tokens[i].match[0] == byte;
            if (!count) continue;
            int32_t *list = malloc((count + 1) * sizeof *list);
            if (!list) return kn_set_error(KN_ERR_OOM, "tokenizer: out of memory indexing added tokens");
            size_t k = 0;
            for (size_t i = 0; i < a->n; i++)
                if (a->tokens[i].normalized == (set == 1) && (unsigned char)a->tokens[i].match[0] == byte)
                    list[k++] = (int32_t)i;
            qsort_r(list, count, sizeof *list, by_length_desc, a->tokens);
            list[count] = -1;
            a->by_first_byte[set][byte] = list;
        }
    for (size_t i = 0; i < a->n; i++)
        if (a->tokens[i].match_len > a->longest) a->longest = a->tokens[i].match_len;
    return KN_OK;
}

kn_status kn_added_vocab_load(kn_added_vocab *a, const cJSON *list, const kn_normalizer *norm, const char *file) {
    *a = (kn_added_vocab){0};
    if (!list || cJSON_IsNull(list)) return KN_OK;
    if (!cJSON_IsArray(list)) return kn_set_error(KN_ERR_IO, "%s: added_tokens: not a list", file);
    size_t n = (size_t)cJSON_GetArraySize(list);
    a->tokens = calloc(n + 1, sizeof *a->tokens);
    if (!a->tokens) return kn_set_error(KN_ERR_OOM, "%s: out of memory", file);
    const cJSON *it;
    kn_tok_buf normalized = {0};
    kn_status st = KN_OK;
    cJSON_ArrayForEach(it, list) {
        const char *content = kn_tok_json_str(it, "content", "added_tokens[]", false);
        int32_t id;
        if (!kn_tok_json_id(cJSON_GetObjectItemCaseSensitive(it, "id"), &id) || !content || !*content) {
            st = kn_set_error(KN_ERR_IO, "%s: added_tokens[%zu]: needs an \"id\" (an integer in [0, %d]) and a "
                              "non-empty \"content\"", file, a->n, INT32_MAX);
            break;
        }
        kn_added_token *t = &a->tokens[a->n++];
        t->id = id;
        t->special = kn_tok_json_bool(it, "special", false);
        t->single_word = kn_tok_json_bool(it, "single_word", false);
        t->lstrip = kn_tok_json_bool(it, "lstrip", false);
        t->rstrip = kn_tok_json_bool(it, "rstrip", false);
        t->normalized = kn_tok_json_bool(it, "normalized", !t->special);
        t->len = strlen(content);
        if (!(t->content = kn_tok_strdup(content))) {
            st = KN_ERR_OOM;
            break;
        }
        /* A normalized token is looked for in normalized text, so in its normalized form. */
        if (t->normalized && norm) {
            if ((st = kn_normalizer_apply(norm, content, t->len, KN_TOK_WHOLE, &normalized)) != KN_OK) break;
            t->match_len = normalized.n;
            t->match = malloc(normalized.n + 1);
            if (t->match) memcpy(t->match, normalized.p, normalized.n + 1);
        } else {
            t->match_len = t->len;
            t->match = kn_tok_strdup(content);
        }
        if (!t->match || t->match_len == 0) {
            st = t->match ? kn_set_error(KN_ERR_IO, "%s: added token \"%s\" normalizes to nothing", file, content)
                          : kn_set_error(KN_ERR_OOM, "%s: out of memory", file);
            break;
        }
        if (!kn_strmap_put(&a->by_content, t->content, t->len, (int32_t)(a->n - 1)) ||
            !kn_tok_idmap_put(&a->by_id, &t->id, (int32_t)(a->n - 1))) {
            st = KN_ERR_OOM;
            break;
        }
    }
    kn_tok_buf_free(&normalized);
    if (st == KN_OK) st = index_tokens(a);
    return st;
}

/* The start of the character that ends s[0..n), n > 0. */
static size_t last_char_at(const char *s, size_t n) {
    size_t c = n - 1;
    while (c > 0 && n - c < 4 && ((unsigned char)s[c] & 0xC0) == 0x80) c--;
    uint32_t cp;
    return kn_utf8_next(s + c, n - c, &cp) == n - c ? c : n - 1; /* an ill-formed end: its last byte */
}

static uint32_t last_char(const char *s, size_t n) {
    uint32_t cp;
    size_t c = last_char_at(s, n);
    kn_utf8_next(s + c, n - c, &cp);
    return cp;
}

static uint32_t first_char(const char *s, size_t n) {
    uint32_t cp;
    kn_utf8_next(s, n, &cp);
    return cp;
}

/* The longest token of the set at s[pos..], or -1. */
static int32_t match_at(const kn_added_vocab *a, int set, const char *s, size_t n, size_t pos) {
    const int32_t *list = a->by_first_byte[set][(unsigned char)s[pos]];
    for (; list && *list >= 0; list++) {
        const kn_added_token *t = &a->tokens[*list];
        if (t->match_len <= n - pos && memcmp(s + pos, t->match, t->match_len) == 0) return *list;
    }
    return -1;
}

kn_status kn_added_vocab_split(const kn_added_vocab *a, bool normalized_set, const char *s, size_t n,
                               kn_status (*piece)(void *ctx, size_t start, size_t end, int32_t id), void *ctx) {
    int set = normalized_set ? 1 : 0;
    size_t done = 0; /* text before this offset has been handed out */
    for (size_t pos = 0; pos < n;) {
        int32_t k = match_at(a, set, s, n, pos);
        if (k < 0) {
            pos++;
            continue;
        }
        const kn_added_token *t = &a->tokens[k];
        size_t start = pos, stop = pos + t->match_len;
        pos = stop; /* the search goes on after the match, whether it is kept or not */
        if (t->single_word && ((start > 0 && kn_unicode_is_word(last_char(s, start))) ||
                               (stop < n && kn_unicode_is_word(first_char(s + stop, n - stop)))))
            continue;
        if (t->lstrip)
            while (start > done && kn_unicode_is_space(last_char(s, start))) start = last_char_at(s, start);
        if (t->rstrip)
            while (stop < n && kn_unicode_is_space(first_char(s + stop, n - stop))) {
                uint32_t cp;
                stop += kn_utf8_next(s + stop, n - stop, &cp);
            }
        if (start < done) start = done;
        kn_status st = KN_OK;
        if (done < start) st = piece(ctx, done, start, -1);
        if (st == KN_OK) st = piece(ctx, start, stop, t->id);
        if (st != KN_OK) return st;
        done = stop;
    }
    return done < n ? piece(ctx, done, n, -1) : KN_OK;
}

bool kn_added_vocab_would_cut(const kn_added_vocab *a, const char *s, size_t n, size_t at) {
    for (size_t p = at > a->longest ? at - a->longest : 0; p <= at && p < n; p++)
        for (int set = 0; set < 2; set++)
            for (const int32_t *list = a->by_first_byte[set][(unsigned char)s[p]]; list && *list >= 0; list++) {
                const kn_added_token *t = &a->tokens[*list];
                if (t->match_len > n - p || memcmp(s + p, t->match, t->match_len) != 0) continue;
                size_t end = p + t->match_len;
                if ((p < at && end > at) || (p == at && t->lstrip) || (end == at && t->single_word)) return true;
            }
    return false;
}
