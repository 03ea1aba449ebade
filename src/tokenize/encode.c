/* Encoding text to ids, in the library's order: added tokens split out of the raw text, each
 * other stretch normalized, normalized added tokens split out of that, then the pre-tokenizer,
 * the BPE model on each piece, and the post-processor's special tokens. */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

typedef struct encoder {
    const kn_tokenizer *t;
    const char *text; /* the stretch being split (raw text, then normalized stretches) */
    bool text_at_origin;
    kn_tok_buf normalized;
    kn_tok_pieces pieces, scratch;
    kn_bpe_cache *cache;
    kn_tok_ids ids;
} encoder;

/* A stretch of normalized text with no added token in it: pre-tokenize, then the model. */
static kn_status model_stretch(void *ctx, size_t start, size_t end, int32_t id) {
    encoder *e = ctx;
    if (id >= 0) return kn_tok_ids_push(&e->ids, id) ? KN_OK : KN_ERR_OOM;
    kn_tok_pieces_clear(&e->pieces);
    if (!kn_tok_pieces_add(&e->pieces, e->normalized.p + start, end - start, e->text_at_origin && start == 0))
        return KN_ERR_OOM;
    if (e->t->pre_tokenizer) {
        kn_status st = kn_pre_tokenizer_apply(e->t->pre_tokenizer, &e->pieces, &e->scratch);
        if (st != KN_OK) return st;
    }
    for (size_t i = 0; i < e->pieces.n; i++) {
        kn_status st = kn_bpe_encode_word(e->t->model, e->pieces.text.p + e->pieces.spans[i].off,
                                          e->pieces.spans[i].len, e->cache, &e->ids);
        if (st != KN_OK) return st;
    }
    return KN_OK;
}

/* A stretch of raw text with no raw-matched added token: normalize, then split out the added
 * tokens that match normalized text. */
static kn_status raw_stretch(void *ctx, size_t start, size_t end, int32_t id) {
    encoder *e = ctx;
    if (id >= 0) return kn_tok_ids_push(&e->ids, id) ? KN_OK : KN_ERR_OOM;
    kn_status st;
    if (e->t->normalizer) {
        st = kn_normalizer_apply(e->t->normalizer, e->text + start, end - start, &e->normalized);
    } else {
        e->normalized.n = 0;
        st = kn_tok_buf_put(&e->normalized, e->text + start, end - start) ? KN_OK : KN_ERR_OOM;
    }
    if (st != KN_OK) return st;
    e->text_at_origin = start == 0;
    if (e->normalized.n == 0) return KN_OK;
    return kn_added_vocab_split(&e->t->added, true, e->normalized.p, e->normalized.n, model_stretch, e);
}

kn_status kn_tokenizer_encode(const kn_tokenizer *t, const char *text, size_t len, bool add_special, int32_t **ids,
                              size_t *n_ids) {
    if (!t || (!text && len) || !ids || !n_ids) return kn_set_error(KN_ERR_NULL, "kn_tokenizer_encode: NULL argument");
    *ids = NULL;
    *n_ids = 0;
    if (!kn_utf8_valid(text, len)) {
        size_t at = 0;
        while (at < len && kn_utf8_valid(text, at + 1)) at++;
        return kn_set_error(KN_ERR_ARG, "kn_tokenizer_encode: the text is not valid UTF-8 (byte %zu)", at);
    }
    encoder e = {.t = t, .text = text};
    e.cache = kn_bpe_cache_new();
    kn_status st = e.cache ? KN_OK : KN_ERR_OOM;
    if (st == KN_OK && len > 0) st = kn_added_vocab_split(&t->added, false, text, len, raw_stretch, &e);
    kn_tok_ids out = {0};
    if (st == KN_OK && add_special && t->post) {
        st = kn_post_processor_apply(t->post, &e.ids, &out);
    } else {
        out = e.ids;
        e.ids = (kn_tok_ids){0};
    }
    kn_bpe_cache_free(e.cache);
    kn_tok_buf_free(&e.normalized);
    kn_tok_pieces_free(&e.pieces);
    kn_tok_pieces_free(&e.scratch);
    free(e.ids.v);
    if (st != KN_OK) {
        free(out.v);
        return st;
    }
    if (!out.v && !(out.v = malloc(sizeof *out.v))) return kn_set_error(KN_ERR_OOM, "kn_tokenizer_encode: out of memory");
    *ids = out.v;
    *n_ids = out.n;
    return KN_OK;
}
