/* Decoders: tokens back to text through ByteLevel, Metaspace, ByteFallback, Fuse, Strip,
 * Replace and Sequence (flattened at load), each as the library's decode_chain does it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

typedef enum { DEC_BYTE_LEVEL, DEC_METASPACE, DEC_BYTE_FALLBACK, DEC_FUSE, DEC_STRIP, DEC_REPLACE } dec_kind;

typedef struct dec_step {
    dec_kind kind;
    kn_tok_pattern pattern; /* Replace */
    char *content;          /* Replace's content */
    uint32_t ch;            /* Strip's content, Metaspace's replacement */
    size_t start, stop;     /* Strip */
    bool drop_first;        /* Metaspace: prepend_scheme is not "never" */
} dec_step;

struct kn_decoder {
    dec_step *steps;
    size_t n;
};

void kn_decoder_free(kn_decoder *d) {
    if (!d) return;
    for (size_t i = 0; i < d->n; i++) {
        kn_tok_pattern_free(&d->steps[i].pattern);
        free(d->steps[i].content);
    }
    free(d->steps);
    free(d);
}

static kn_status load_step(dec_step *s, const cJSON *j, const char *type, const char *file) {
    char where[256];
    snprintf(where, sizeof where, "%s: decoder %s", file, type);
    if (strcmp(type, "ByteLevel") == 0) {
        s->kind = DEC_BYTE_LEVEL;
    } else if (strcmp(type, "ByteFallback") == 0) {
        s->kind = DEC_BYTE_FALLBACK;
    } else if (strcmp(type, "Fuse") == 0) {
        s->kind = DEC_FUSE;
    } else if (strcmp(type, "Metaspace") == 0) {
        s->kind = DEC_METASPACE;
        if (!kn_utf8_one_char(kn_tok_json_str(j, "replacement", where, true), &s->ch))
            return kn_set_error(KN_ERR_IO, "%s: replacement is not one character", where);
        const char *scheme = kn_tok_json_str(j, "prepend_scheme", where, false);
        s->drop_first = scheme ? strcmp(scheme, "never") != 0 : kn_tok_json_bool(j, "add_prefix_space", true);
    } else if (strcmp(type, "Strip") == 0) {
        s->kind = DEC_STRIP;
        int64_t start, stop;
        if (!kn_utf8_one_char(kn_tok_json_str(j, "content", where, true), &s->ch))
            return kn_set_error(KN_ERR_IO, "%s: content is not one character", where);
        if (!kn_tok_json_integer(cJSON_GetObjectItemCaseSensitive(j, "start"), 0, INT32_MAX, &start) ||
            !kn_tok_json_integer(cJSON_GetObjectItemCaseSensitive(j, "stop"), 0, INT32_MAX, &stop))
            return kn_set_error(KN_ERR_IO, "%s: start and stop must be integers in [0, %d]", where, INT32_MAX);
        s->start = (size_t)start;
        s->stop = (size_t)stop;
    } else if (strcmp(type, "Replace") == 0) {
        s->kind = DEC_REPLACE;
        const char *content = kn_tok_json_str(j, "content", where, true);
        if (!content) return KN_ERR_IO;
        if (!(s->content = kn_tok_strdup(content))) return KN_ERR_OOM;
        return kn_tok_pattern_load(&s->pattern, cJSON_GetObjectItemCaseSensitive(j, "pattern"), where);
    } else {
        return kn_tok_unsupported(file, "decoder", j);
    }
    return KN_OK;
}

static kn_status load_into(kn_decoder *d, const cJSON *j, const char *file, int depth) {
    const char *type = kn_tok_json_str(j, "type", "decoder", false);
    if (!type) return kn_tok_unsupported(file, "decoder", j);
    if (strcmp(type, "Sequence") == 0 && depth < 8) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(j, "decoders"), *it;
        if (!cJSON_IsArray(list)) return kn_set_error(KN_ERR_IO, "%s: decoder.decoders: not a list", file);
        cJSON_ArrayForEach(it, list) {
            kn_status st = load_into(d, it, file, depth + 1);
            if (st != KN_OK) return st;
        }
        return KN_OK;
    }
    dec_step *grown = realloc(d->steps, (d->n + 1) * sizeof *grown);
    if (!grown) return kn_set_error(KN_ERR_OOM, "%s: out of memory", file);
    d->steps = grown;
    d->steps[d->n] = (dec_step){0};
    kn_status st = load_step(&d->steps[d->n], j, type, file);
    d->n++; /* kept even on failure, so free releases what load_step made */
    return st;
}

kn_decoder *kn_decoder_load(const cJSON *j, const char *file) {
    kn_decoder *d = calloc(1, sizeof *d);
    if (!d) {
        kn_set_error(KN_ERR_OOM, "%s: out of memory", file);
        return NULL;
    }
    if (load_into(d, j, file, 0) != KN_OK) {
        kn_decoder_free(d);
        return NULL;
    }
    return d;
}

static bool one_character(const kn_tok_pattern *p) {
    uint32_t cp;
    return p->literal && p->literal_len > 0 && kn_utf8_next(p->literal, p->literal_len, &cp) == p->literal_len;
}

/* A step after a fused one (Fuse, ByteLevel) sees the whole text as one token, so it must act on
 * each character alone for pieces decoded one after another to equal the whole: Metaspace does
 * (kn_decoder_apply drops its character in every piece), Strip of the start does (only the first
 * piece is stripped), a Replace of one character does; a Replace of longer text can match
 * across pieces, a Strip of the end cannot know where the end is, and ByteFallback and ByteLevel
 * read the whole token. */
bool kn_decoder_streamable(const kn_decoder *d) {
    bool fused = false;
    for (size_t i = 0; d && i < d->n; i++) {
        const dec_step *s = &d->steps[i];
        bool per_char = s->kind == DEC_METASPACE || s->kind == DEC_FUSE || (s->kind == DEC_STRIP && s->stop == 0) ||
                        (s->kind == DEC_REPLACE && one_character(&s->pattern));
        if (fused && !per_char) return false;
        fused = fused || s->kind == DEC_FUSE || s->kind == DEC_BYTE_LEVEL;
    }
    return true;
}

#define TOKEN(list, i) ((list)->text.p + (list)->spans[i].off)

static kn_status byte_level(const kn_tok_pieces *in, kn_tok_pieces *out) {
    kn_tok_buf bytes = {0}, text = {0};
    bool ok = true;
    for (size_t i = 0; i < in->n && ok; i++) {
        const char *t = TOKEN(in, i);
        size_t n = in->spans[i].len, mark = bytes.n;
        bool mapped = true;
        for (size_t k = 0; k < n && ok && mapped;) { /* each character back to its byte */
            uint32_t cp;
            k += kn_utf8_next(t + k, n - k, &cp);
            int b = kn_byte_level_byte(cp);
            mapped = b >= 0;
            if (mapped) ok = kn_tok_buf_putc(&bytes, (char)b);
        }
        if (!mapped && ok) { /* a character outside the mapping: the token's own bytes */
            bytes.n = mark;
            ok = kn_tok_buf_put(&bytes, t, n);
        }
    }
    ok = ok && kn_utf8_put_lossy(&text, (const unsigned char *)bytes.p, bytes.n);
    ok = ok && kn_tok_pieces_add_token(out, text.p, text.n); /* one token, even empty */
    kn_tok_buf_free(&bytes);
    kn_tok_buf_free(&text);
    return ok ? KN_OK : KN_ERR_OOM;
}

static int hex_digit(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Flushes a run of <0xNN> bytes: the text if it is UTF-8, else one U+FFFD per byte. */
static bool flush_bytes(kn_tok_buf *run, kn_tok_pieces *out) {
    bool ok = true;
    if (run->n && kn_utf8_valid(run->p, run->n)) {
        ok = kn_tok_pieces_add(out, run->p, run->n, false);
    } else {
        for (size_t i = 0; i < run->n && ok; i++) ok = kn_tok_pieces_add(out, "\xEF\xBF\xBD", 3, false);
    }
    run->n = 0;
    return ok;
}

/* *open_run: the tokens end in a byte token, so a streamed piece that follows may continue the run. */
static kn_status byte_fallback(const kn_tok_pieces *in, kn_tok_pieces *out, bool *open_run) {
    kn_tok_buf run = {0};
    bool ok = true;
    for (size_t i = 0; i < in->n && ok; i++) {
        const char *t = TOKEN(in, i);
        int hi = -1, lo = -1;
        if (in->spans[i].len == 6 && memcmp(t, "<0x", 3) == 0 && t[5] == '>') {
            hi = hex_digit(t[3]);
            lo = hex_digit(t[4]);
        }
        if (hi >= 0 && lo >= 0) {
            ok = kn_tok_buf_putc(&run, (char)(hi * 16 + lo));
        } else {
            ok = flush_bytes(&run, out) && kn_tok_pieces_add_token(out, t, in->spans[i].len);
        }
    }
    *open_run = *open_run || run.n > 0;
    ok = ok && flush_bytes(&run, out);
    kn_tok_buf_free(&run);
    return ok ? KN_OK : KN_ERR_OOM;
}

/* One token through Strip, Metaspace or Replace, appended to *t. */
static kn_status per_token(const dec_step *s, const char *tok, size_t n, bool first, bool fused, bool at_start,
                           kn_tok_buf *t) {
    if (s->kind == DEC_REPLACE) {
        size_t *se = NULL, count = 0, prev = 0;
        kn_status st = kn_tok_pattern_matches(&s->pattern, tok, n, &se, &count);
        if (st != KN_OK) return st;
        bool ok = true;
        for (size_t i = 0; i < count && ok; i++) {
            ok = kn_tok_buf_put(t, tok + prev, se[2 * i] - prev) && kn_tok_buf_put(t, s->content, strlen(s->content));
            prev = se[2 * i + 1];
        }
        free(se);
        return ok && kn_tok_buf_put(t, tok + prev, n - prev) ? KN_OK : KN_ERR_OOM;
    }
    /* Both work on characters: list their byte offsets. */
    size_t count = 0, *at = malloc((n + 1) * sizeof *at);
    uint32_t *cps = malloc((n + 1) * sizeof *cps);
    bool ok = at && cps;
    for (size_t k = 0; ok && k < n;) {
        at[count] = k;
        k += kn_utf8_next(tok + k, n - k, &cps[count]);
        count++;
    }
    if (ok) at[count] = n;
    if (ok && s->kind == DEC_METASPACE) {
        /* The library drops every replacement character of the first token: after a fused step,
         * that token is all the text, so streamed pieces that continue it drop theirs too. */
        for (size_t c = 0; c < count && ok; c++) {
            if (cps[c] != s->ch)
                ok = kn_tok_buf_put(t, tok + at[c], at[c + 1] - at[c]);
            else if (!(first && (at_start || fused) && s->drop_first))
                ok = kn_tok_buf_putc(t, ' ');
        }
    } else if (ok) { /* DEC_STRIP; streaming text that continues a fused token keeps its start */
        size_t a = 0, b = count;
        bool strip_start = !(first && fused && !at_start);
        while (strip_start && a < s->start && a < count && cps[a] == s->ch) a++;
        for (size_t k = 0; k < s->stop && b > a && cps[b - 1] == s->ch; k++) b--;
        ok = kn_tok_buf_put(t, tok + at[a], at[b] - at[a]);
    }
    free(at);
    free(cps);
    return ok ? KN_OK : kn_set_error(KN_ERR_OOM, "tokenizer: out of memory decoding");
}

kn_status kn_decoder_apply(const kn_decoder *d, kn_tok_pieces *tokens, kn_tok_pieces *scratch, bool at_start,
                           kn_tok_buf *out, bool *open_run) {
    bool fused = false;
    *open_run = false;
    kn_tok_buf t = {0};
    kn_status st = KN_OK;
    for (size_t i = 0; i < d->n && st == KN_OK; i++) {
        const dec_step *s = &d->steps[i];
        kn_tok_pieces_clear(scratch);
        if (s->kind == DEC_BYTE_LEVEL) {
            st = byte_level(tokens, scratch);
            fused = true;
        } else if (s->kind == DEC_BYTE_FALLBACK) {
            st = byte_fallback(tokens, scratch, open_run);
        } else if (s->kind == DEC_FUSE) {
            if (!kn_tok_pieces_add_token(scratch, tokens->text.p, tokens->text.n)) st = KN_ERR_OOM;
            fused = true;
        } else {
            for (size_t k = 0; k < tokens->n && st == KN_OK; k++) {
                t.n = 0;
                st = per_token(s, TOKEN(tokens, k), tokens->spans[k].len, k == 0, fused, at_start, &t);
                /* A token that becomes empty stays, as an empty one: positions matter later. */
                if (st == KN_OK && !kn_tok_pieces_add_token(scratch, t.p, t.n)) st = KN_ERR_OOM;
            }
        }
        kn_tok_pieces tmp = *tokens;
        *tokens = *scratch;
        *scratch = tmp;
    }
    for (size_t k = 0; k < tokens->n && st == KN_OK; k++)
        if (!kn_tok_buf_put(out, TOKEN(tokens, k), tokens->spans[k].len)) st = KN_ERR_OOM;
    kn_tok_buf_free(&t);
    return st;
}
