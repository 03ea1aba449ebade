/* Pre-tokenizers: Split (String or Regex pattern, each delimiter behavior, invert), ByteLevel
 * (GPT-2's regex and byte-to-character mapping), Metaspace, and Sequence (flattened at load). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

/* GPT-2's split, used by ByteLevel with use_regex. */
static const char gpt2_regex[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

typedef enum { PRE_SPLIT, PRE_BYTE_LEVEL, PRE_METASPACE } pre_kind;
typedef enum { SPLIT_REMOVED, SPLIT_ISOLATED, SPLIT_MERGED_PREVIOUS, SPLIT_MERGED_NEXT, SPLIT_CONTIGUOUS } split_behavior;
typedef enum { PREPEND_ALWAYS, PREPEND_NEVER, PREPEND_FIRST } prepend_scheme;

typedef struct pre_step {
    pre_kind kind;
    kn_tok_pattern pattern; /* Split's pattern; Metaspace's replacement as a String pattern */
    split_behavior behavior;
    bool invert;
    bool add_prefix_space, use_regex; /* ByteLevel */
    prepend_scheme prepend;           /* Metaspace */
    bool split;                       /* Metaspace */
} pre_step;

struct kn_pre_tokenizer {
    pre_step *steps;
    size_t n;
};

void kn_pre_tokenizer_free(kn_pre_tokenizer *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n; i++) kn_tok_pattern_free(&p->steps[i].pattern);
    free(p->steps);
    free(p);
}

static bool parse_behavior(const char *name, split_behavior *b) {
    static const char *names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
    for (int i = 0; i < 5; i++)
        if (name && strcmp(name, names[i]) == 0) {
            *b = (split_behavior)i;
            return true;
        }
    return false;
}

static kn_status load_step(pre_step *s, const cJSON *j, const char *type, const char *file) {
    char where[256];
    snprintf(where, sizeof where, "%s: pre_tokenizer %s", file, type);
    if (strcmp(type, "Split") == 0) {
        s->kind = PRE_SPLIT;
        const char *behavior = kn_tok_json_str(j, "behavior", where, true);
        if (!parse_behavior(behavior, &s->behavior))
            return kn_set_error(KN_ERR_IO, "%s: unknown behavior \"%s\"", where, behavior ? behavior : "");
        s->invert = kn_tok_json_bool(j, "invert", false);
        return kn_tok_pattern_load(&s->pattern, cJSON_GetObjectItemCaseSensitive(j, "pattern"), where);
    }
    if (strcmp(type, "ByteLevel") == 0) {
        s->kind = PRE_BYTE_LEVEL;
        s->add_prefix_space = kn_tok_json_bool(j, "add_prefix_space", true);
        s->use_regex = kn_tok_json_bool(j, "use_regex", true);
        if (s->use_regex && !(s->pattern.regex = kn_tok_regex_new(gpt2_regex, where))) return kn_last_status();
        return KN_OK;
    }
    if (strcmp(type, "Metaspace") == 0) {
        s->kind = PRE_METASPACE;
        const char *repl = kn_tok_json_str(j, "replacement", where, true);
        if (!repl) return KN_ERR_IO;
        uint32_t cp;
        if (!kn_utf8_one_char(repl, &cp))
            return kn_set_error(KN_ERR_IO, "%s: replacement \"%s\" is not one character", where, repl);
        const char *scheme = kn_tok_json_str(j, "prepend_scheme", where, false);
        if (!scheme) /* files older than prepend_scheme say add_prefix_space */
            s->prepend = kn_tok_json_bool(j, "add_prefix_space", true) ? PREPEND_ALWAYS : PREPEND_NEVER;
        else if (strcmp(scheme, "always") == 0)
            s->prepend = PREPEND_ALWAYS;
        else if (strcmp(scheme, "never") == 0)
            s->prepend = PREPEND_NEVER;
        else if (strcmp(scheme, "first") == 0)
            s->prepend = PREPEND_FIRST;
        else
            return kn_set_error(KN_ERR_IO, "%s: unknown prepend_scheme \"%s\"", where, scheme);
        s->split = kn_tok_json_bool(j, "split", true);
        s->pattern.literal_len = strlen(repl);
        s->pattern.literal = kn_tok_strdup(repl);
        return s->pattern.literal ? KN_OK : KN_ERR_OOM;
    }
    return kn_tok_unsupported(file, "pre_tokenizer", j);
}

static kn_status load_into(kn_pre_tokenizer *p, const cJSON *j, const char *file, int depth) {
    const char *type = kn_tok_json_str(j, "type", "pre_tokenizer", false);
    if (!type) return kn_tok_unsupported(file, "pre_tokenizer", j);
    if (strcmp(type, "Sequence") == 0 && depth < 8) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(j, "pretokenizers"), *it;
        if (!cJSON_IsArray(list)) return kn_set_error(KN_ERR_IO, "%s: pre_tokenizer.pretokenizers: not a list", file);
        cJSON_ArrayForEach(it, list) {
            kn_status st = load_into(p, it, file, depth + 1);
            if (st != KN_OK) return st;
        }
        return KN_OK;
    }
    pre_step *grown = realloc(p->steps, (p->n + 1) * sizeof *grown);
    if (!grown) return kn_set_error(KN_ERR_OOM, "%s: out of memory", file);
    p->steps = grown;
    p->steps[p->n] = (pre_step){0};
    kn_status st = load_step(&p->steps[p->n], j, type, file);
    p->n++; /* kept even on failure, so free releases what load_step made */
    return st;
}

kn_pre_tokenizer *kn_pre_tokenizer_load(const cJSON *j, const char *file) {
    kn_pre_tokenizer *p = calloc(1, sizeof *p);
    if (!p) {
        kn_set_error(KN_ERR_OOM, "%s: out of memory", file);
        return NULL;
    }
    if (load_into(p, j, file, 0) != KN_OK) {
        kn_pre_tokenizer_free(p);
        return NULL;
    }
    return p;
}

/* Splits s around the matches se[0..count) as the library's NormalizedString::split does. */
static bool split_piece(kn_tok_pieces *out, const char *s, size_t n, kn_tok_start start, const size_t *se, size_t count,
                        split_behavior behavior, bool invert) {
    /* Walk the stretches (gap, match, gap, ...) in order, merging as the behavior says; a
     * stretch that may still grow waits in pending. */
    size_t pending_start = 0, pending_end = 0;
    bool have_pending = false, prev_match = false;
#define EMIT(a, b) \
    if (!kn_tok_pieces_add(out, s + (a), (b) - (a), (a) == 0 ? start : KN_TOK_SPLIT)) return false
    size_t pos = 0;
    for (size_t i = 0; i <= count; i++) {
        size_t ms = i < count ? se[2 * i] : n, me = i < count ? se[2 * i + 1] : n;
        for (int part = 0; part < 2; part++) { /* part 0: the gap before the match; 1: the match */
            size_t a = part == 0 ? pos : ms, b = part == 0 ? ms : me;
            if (a == b) continue;
            bool is_match = (part == 1) != invert;
            switch (behavior) {
            case SPLIT_ISOLATED:
                EMIT(a, b);
                break;
            case SPLIT_REMOVED:
                if (!is_match) EMIT(a, b);
                break;
            case SPLIT_CONTIGUOUS:
                if (have_pending && is_match == prev_match) {
                    pending_end = b;
                } else {
                    if (have_pending) EMIT(pending_start, pending_end);
                    pending_start = a, pending_end = b, have_pending = true;
                }
                break;
            case SPLIT_MERGED_PREVIOUS:
                if (is_match && !prev_match && have_pending) {
                    pending_end = b;
                } else {
                    if (have_pending) EMIT(pending_start, pending_end);
                    pending_start = a, pending_end = b, have_pending = true;
                }
                break;
            case SPLIT_MERGED_NEXT:
                /* A delimiter opens the piece of the text after it (the library walks backwards:
                 * a match joins the non-match stretch that follows it). */
                if (!is_match && have_pending && prev_match) {
                    pending_end = b;
                } else {
                    if (have_pending) EMIT(pending_start, pending_end);
                    pending_start = a, pending_end = b, have_pending = true;
                }
                break;
            }
            prev_match = is_match;
        }
        pos = me;
    }
    if (have_pending) EMIT(pending_start, pending_end);
#undef EMIT
    return true;
}

static kn_status split_by_pattern(const pre_step *st, const kn_tok_pattern *pat, split_behavior behavior,
                                  const char *s, size_t n, kn_tok_start start, kn_tok_pieces *out) {
    size_t *se = NULL, count = 0;
    kn_status status = kn_tok_pattern_matches(pat, s, n, &se, &count);
    if (status != KN_OK) return status;
    bool ok = split_piece(out, s, n, start, se, count, behavior, st->invert);
    free(se);
    return ok ? KN_OK : KN_ERR_OOM;
}

static kn_status byte_level(const pre_step *st, const char *s, size_t n, kn_tok_start start, kn_tok_pieces *out) {
    kn_tok_buf prefixed = {0};
    if (st->add_prefix_space && start != KN_TOK_CONTINUES && (n == 0 || s[0] != ' ')) {
        if (!kn_tok_buf_putc(&prefixed, ' ') || !kn_tok_buf_put(&prefixed, s, n)) {
            kn_tok_buf_free(&prefixed);
            return KN_ERR_OOM;
        }
        s = prefixed.p;
        n = prefixed.n;
    }
    kn_tok_pieces words = {0};
    kn_status status = KN_OK;
    if (st->use_regex)
        status = split_by_pattern(st, &st->pattern, SPLIT_ISOLATED, s, n, start, &words);
    else if (!kn_tok_pieces_add(&words, s, n, start))
        status = KN_ERR_OOM;
    /* Each byte becomes its printable stand-in character. */
    kn_tok_buf mapped = {0};
    for (size_t i = 0; i < words.n && status == KN_OK; i++) {
        mapped.n = 0;
        const unsigned char *w = (const unsigned char *)words.text.p + words.spans[i].off;
        for (size_t k = 0; k < words.spans[i].len && status == KN_OK; k++)
            if (!kn_tok_buf_put_cp(&mapped, kn_byte_level_char(w[k]))) status = KN_ERR_OOM;
        if (status == KN_OK && !kn_tok_pieces_add(out, mapped.p, mapped.n, words.spans[i].start))
            status = KN_ERR_OOM;
    }
    kn_tok_buf_free(&mapped);
    kn_tok_pieces_free(&words);
    kn_tok_buf_free(&prefixed);
    return status;
}

static kn_status metaspace(const pre_step *st, const char *s, size_t n, kn_tok_start start, kn_tok_pieces *out) {
    const char *repl = st->pattern.literal;
    size_t rlen = st->pattern.literal_len;
    /* Spaces become the replacement; then the replacement is prepended unless already there. */
    bool prepend = (st->prepend == PREPEND_ALWAYS && start != KN_TOK_CONTINUES) ||
                   (st->prepend == PREPEND_FIRST && start == KN_TOK_ORIGIN);
    if (n > 0 && (s[0] == ' ' || (n >= rlen && memcmp(s, repl, rlen) == 0))) prepend = false;
    kn_tok_buf t = {0};
    bool ok = !prepend || kn_tok_buf_put(&t, repl, rlen);
    for (size_t i = 0; i < n && ok; i++) ok = s[i] == ' ' ? kn_tok_buf_put(&t, repl, rlen) : kn_tok_buf_putc(&t, s[i]);
    kn_status status = ok ? KN_OK : KN_ERR_OOM;
    if (status == KN_OK) {
        if (st->split)
            status = split_by_pattern(st, &st->pattern, SPLIT_MERGED_NEXT, t.p, t.n, start, out);
        else if (!kn_tok_pieces_add(out, t.p, t.n, start))
            status = KN_ERR_OOM;
    }
    kn_tok_buf_free(&t);
    return status;
}

static kn_status apply_step(const pre_step *st, const char *s, size_t n, kn_tok_start start, kn_tok_pieces *out) {
    switch (st->kind) {
    case PRE_SPLIT:
        return split_by_pattern(st, &st->pattern, st->behavior, s, n, start, out);
    case PRE_BYTE_LEVEL:
        return byte_level(st, s, n, start, out);
    case PRE_METASPACE:
        return metaspace(st, s, n, start, out);
    }
    return KN_ERR_INTERNAL;
}

kn_status kn_pre_tokenizer_apply(const kn_pre_tokenizer *p, kn_tok_pieces *pieces, kn_tok_pieces *scratch) {
    for (size_t i = 0; i < p->n; i++) {
        kn_tok_pieces_clear(scratch);
        for (size_t k = 0; k < pieces->n; k++) {
            const kn_tok_span *sp = &pieces->spans[k];
            kn_status st = apply_step(&p->steps[i], pieces->text.p + sp->off, sp->len, sp->start, scratch);
            if (st != KN_OK) return st;
        }
        kn_tok_pieces t = *pieces;
        *pieces = *scratch;
        *scratch = t;
    }
    return KN_OK;
}
