/* Decoding ids to text (the decoder chain, or tokens joined by spaces when there is none), and
 * the streaming detokenizer, which holds text back while it ends in a partial character. */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

kn_status kn_tokenizer_decode_into(const kn_tokenizer *t, const int32_t *ids, size_t n, bool skip_special,
                                   bool at_start, kn_tok_buf *out, bool *open_run) {
    *open_run = false;
    kn_tok_pieces tokens = {0}, scratch = {0};
    kn_status st = KN_OK;
    for (size_t i = 0; i < n && st == KN_OK; i++) {
        if (ids[i] < 0) {
            st = kn_set_error(KN_ERR_INDEX, "tokenizer decode: id %d at position %zu is negative", ids[i], i);
            break;
        }
        if (skip_special && kn_tokenizer_is_special(t, ids[i])) continue;
        /* An id the tokenizer lacks decodes to nothing, as in the library: a checkpoint's
         * embedding often has more rows than the tokenizer has ids (Qwen2.5: 151936 for 151665). */
        const char *tok = kn_tokenizer_id_to_token(t, ids[i]);
        if (!tok) continue;
        if (!kn_tok_pieces_add_token(&tokens, tok, strlen(tok))) st = KN_ERR_OOM;
    }
    if (st == KN_OK && t->decoder) {
        st = kn_decoder_apply(t->decoder, &tokens, &scratch, at_start, out, open_run);
    } else if (st == KN_OK) {
        for (size_t i = 0; i < tokens.n && st == KN_OK; i++)
            if (((i > 0 || !at_start) && !kn_tok_buf_putc(out, ' ')) ||
                !kn_tok_buf_put(out, tokens.text.p + tokens.spans[i].off, tokens.spans[i].len))
                st = KN_ERR_OOM;
    }
    kn_tok_pieces_free(&tokens);
    kn_tok_pieces_free(&scratch);
    return st;
}

kn_status kn_tokenizer_decode(const kn_tokenizer *t, const int32_t *ids, size_t n_ids, bool skip_special, char **text,
                              size_t *len) {
    if (!t || (!ids && n_ids) || !text || !len) return kn_set_error(KN_ERR_NULL, "kn_tokenizer_decode: NULL argument");
    kn_tok_buf out = {0};
    bool open_run;
    kn_status st = kn_tokenizer_decode_into(t, ids, n_ids, skip_special, true, &out, &open_run);
    if (st == KN_OK && !kn_tok_buf_put(&out, "", 0)) st = KN_ERR_OOM; /* a NUL even for empty text */
    if (st != KN_OK) {
        kn_tok_buf_free(&out);
        return st;
    }
    *text = out.p;
    *len = out.n;
    return KN_OK;
}

struct kn_detokenizer {
    const kn_tokenizer *t;
    bool skip_special;
    bool at_start;     /* nothing has been emitted yet */
    kn_tok_ids window; /* ids whose text is not out yet */
    kn_tok_buf text;   /* the last piece returned */
};

kn_detokenizer *kn_detokenizer_new(const kn_tokenizer *t, bool skip_special) {
    if (!t) {
        kn_set_error(KN_ERR_NULL, "kn_detokenizer_new: tokenizer is NULL");
        return NULL;
    }
    if (t->decoder && !kn_decoder_streamable(t->decoder)) {
        kn_set_error(KN_ERR_UNSUPPORTED, "kn_detokenizer_new: a step of the decoder after Fuse or ByteLevel reads "
                                         "more than one character of the whole text at a time (a Strip with stop > "
                                         "0, a Replace of longer text, ByteFallback, ByteLevel), which cannot be "
                                         "streamed");
        return NULL;
    }
    kn_detokenizer *d = calloc(1, sizeof *d);
    if (!d) {
        kn_set_error(KN_ERR_OOM, "kn_detokenizer_new: out of memory");
        return NULL;
    }
    d->t = t;
    d->skip_special = skip_special;
    d->at_start = true;
    return d;
}

static bool ends_in_replacement(const kn_tok_buf *b) { return b->n >= 3 && memcmp(b->p + b->n - 3, "\xEF\xBF\xBD", 3) == 0; }

/* Decodes the window; when final or when its text ends in a whole character, hands it out. */
static const char *emit(kn_detokenizer *d, bool final, size_t *len) {
    d->text.n = 0;
    bool open_run;
    if (kn_tokenizer_decode_into(d->t, d->window.v, d->window.n, d->skip_special, d->at_start, &d->text, &open_run) !=
            KN_OK ||
        !kn_tok_buf_put(&d->text, "", 0))
        return NULL;
    /* More of it may be coming: a partial character, a run of byte tokens (ByteFallback decodes a
     * run as a whole: one U+FFFD per byte when the run is not valid UTF-8, even for bytes that are
     * valid alone), or (at the start) text a Strip decoder removed whole, which the next ids may
     * still count against its limit. */
    if (!final && (ends_in_replacement(&d->text) || open_run || (d->at_start && d->text.n == 0))) {
        d->text.n = 0;
        d->text.p[0] = '\0';
    } else if (d->window.n > 0) {
        d->window.n = 0;
        d->at_start = false;
    }
    if (len) *len = d->text.n;
    return d->text.p;
}

const char *kn_detokenizer_push(kn_detokenizer *d, int32_t id, size_t *len) {
    if (!d) {
        kn_set_error(KN_ERR_NULL, "kn_detokenizer_push: NULL detokenizer");
        return NULL;
    }
    if (id < 0) {
        kn_set_error(KN_ERR_INDEX, "kn_detokenizer_push: id %d is negative", id);
        return NULL;
    }
    /* Skipped specials and ids the tokenizer lacks decode to nothing: they never enter the window,
     * so they cannot end a run of byte tokens early. */
    bool nothing = (d->skip_special && kn_tokenizer_is_special(d->t, id)) || !kn_tokenizer_id_to_token(d->t, id);
    if (!nothing && !kn_tok_ids_push(&d->window, id)) return NULL;
    return emit(d, false, len);
}

const char *kn_detokenizer_flush(kn_detokenizer *d, size_t *len) {
    if (!d) {
        kn_set_error(KN_ERR_NULL, "kn_detokenizer_flush: NULL detokenizer");
        return NULL;
    }
    return emit(d, true, len);
}

void kn_detokenizer_free(kn_detokenizer *d) {
    if (!d) return;
    free(d->window.v);
    kn_tok_buf_free(&d->text);
    free(d);
}
