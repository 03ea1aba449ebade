/* Encoding text to ids, in the library's order: added tokens split out of the raw text, each
 * other stretch normalized, normalized added tokens split out of that, then the pre-tokenizer,
 * the BPE model on each piece, and the post-processor's special tokens. The streaming encoder
 * (kn_encoder) runs the same pipeline over a long text in segments cut at line breaks. */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

typedef struct encoder {
    const kn_tokenizer *t;
    const char *text; /* the raw text being split */
    size_t text_len;
    kn_tok_edges edges;       /* of the raw text: a segment may continue text before or after it */
    kn_tok_start stretch_at;  /* where the normalized stretch being split starts */
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
    if (!kn_tok_pieces_add(&e->pieces, e->normalized.p + start, end - start, start == 0 ? e->stretch_at : KN_TOK_SPLIT))
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
    kn_tok_edges edges = {start == 0 && e->edges.continues_before, end == e->text_len && e->edges.continues_after};
    kn_status st;
    if (e->t->normalizer) {
        st = kn_normalizer_apply(e->t->normalizer, e->text + start, end - start, edges, &e->normalized);
    } else {
        e->normalized.n = 0;
        st = kn_tok_buf_put(&e->normalized, e->text + start, end - start) ? KN_OK : KN_ERR_OOM;
    }
    if (st != KN_OK) return st;
    e->stretch_at = start > 0 ? KN_TOK_SPLIT : edges.continues_before ? KN_TOK_CONTINUES : KN_TOK_ORIGIN;
    if (e->normalized.n == 0) return KN_OK;
    return kn_added_vocab_split(&e->t->added, true, e->normalized.p, e->normalized.n, model_stretch, e);
}

static kn_status encoder_init(encoder *e, const kn_tokenizer *t) {
    *e = (encoder){.t = t};
    e->cache = kn_bpe_cache_new();
    return e->cache ? KN_OK : KN_ERR_OOM;
}

static void encoder_free(encoder *e) {
    kn_bpe_cache_free(e->cache);
    kn_tok_buf_free(&e->normalized);
    kn_tok_pieces_free(&e->pieces);
    kn_tok_pieces_free(&e->scratch);
    free(e->ids.v);
}

/* Appends the model's ids of text (checked UTF-8) to e->ids. */
static kn_status encode_text(encoder *e, const char *text, size_t len, kn_tok_edges edges) {
    e->text = text;
    e->text_len = len;
    e->edges = edges;
    return len ? kn_added_vocab_split(&e->t->added, false, text, len, raw_stretch, e) : KN_OK;
}

kn_status kn_tokenizer_encode(const kn_tokenizer *t, const char *text, size_t len, bool add_special, int32_t **ids,
                              size_t *n_ids) {
    if (!t || (!text && len) || !ids || !n_ids) return kn_set_error(KN_ERR_NULL, "kn_tokenizer_encode: NULL argument");
    *ids = NULL;
    *n_ids = 0;
    size_t valid = kn_utf8_valid_prefix(text, len);
    if (valid < len) return kn_set_error(KN_ERR_ARG, "kn_tokenizer_encode: the text is not valid UTF-8 (byte %zu)", valid);
    encoder e;
    kn_status st = encoder_init(&e, t);
    if (st == KN_OK) st = encode_text(&e, text, len, KN_TOK_WHOLE);
    kn_tok_ids out = {0};
    if (st == KN_OK && add_special && t->post) {
        st = kn_post_processor_apply(t->post, &e.ids, &out);
    } else {
        out = e.ids;
        e.ids = (kn_tok_ids){0};
    }
    encoder_free(&e);
    if (st != KN_OK) {
        free(out.v);
        return st;
    }
    if (!out.v && !(out.v = malloc(sizeof *out.v))) return kn_set_error(KN_ERR_OOM, "kn_tokenizer_encode: out of memory");
    *ids = out.v;
    *n_ids = out.n;
    return KN_OK;
}

/* ---- the streaming encoder ---- */

/* Text waits until this much of it is pending, then is encoded up to its last cut. */
enum { SEGMENT_BYTES = 1 << 16 };

struct kn_encoder {
    encoder e;          /* e.ids: what the last call hands out */
    bool add_special;
    kn_tok_ids prefix, suffix; /* the post-processor's ids before and after the text */
    kn_tok_buf pending; /* text pushed and not yet encoded */
    size_t searched;    /* pending[0..searched) holds no cut */
    size_t offset;      /* bytes of the current text encoded before pending */
    bool started;       /* some of the current text has been encoded */
};

kn_encoder *kn_encoder_new(const kn_tokenizer *t, bool add_special) {
    if (!t) {
        kn_set_error(KN_ERR_NULL, "kn_encoder_new: tokenizer is NULL");
        return NULL;
    }
    kn_encoder *enc = calloc(1, sizeof *enc);
    if (!enc || encoder_init(&enc->e, t) != KN_OK) {
        if (enc) encoder_free(&enc->e);
        free(enc);
        kn_set_error(KN_ERR_OOM, "kn_encoder_new: out of memory");
        return NULL;
    }
    enc->add_special = add_special && t->post;
    if (enc->add_special && kn_post_processor_parts(t->post, &enc->prefix, &enc->suffix) != KN_OK) {
        kn_encoder_free(enc);
        return NULL;
    }
    return enc;
}

void kn_encoder_free(kn_encoder *enc) {
    if (!enc) return;
    encoder_free(&enc->e);
    free(enc->prefix.v);
    free(enc->suffix.v);
    kn_tok_buf_free(&enc->pending);
    free(enc);
}

/* Whether pending text may be cut at i, 0 < i < n: after a line break that a non-space follows
 * (every regex pre-tokenizer of GPT-2, Llama and Qwen ends a piece there, so the ids are those
 * of the whole text) and not across an added token. */
static bool cut_at(const kn_encoder *enc, const char *s, size_t n, size_t i) {
    uint32_t cp;
    if (s[i - 1] != '\n') return false;
    kn_utf8_next(s + i, n - i, &cp);
    return cp != KN_UTF8_ILL_FORMED && !kn_unicode_is_space(cp) && !kn_added_vocab_would_cut(&enc->e.t->added, s, n, i);
}

/* Appends ids to e.ids. */
static bool put_ids(kn_encoder *enc, const kn_tok_ids *ids) {
    for (size_t i = 0; i < ids->n; i++)
        if (!kn_tok_ids_push(&enc->e.ids, ids->v[i])) return false;
    return true;
}

/* Encodes pending[0..len) into e.ids (the post-processor's prefix first, its suffix when this
 * ends the text) and drops it from pending. */
static kn_status encode_segment(kn_encoder *enc, size_t len, bool ends, const char *who) {
    const char *s = enc->pending.p;
    size_t valid = len ? kn_utf8_valid_prefix(s, len) : 0;
    if (valid < len)
        return kn_set_error(KN_ERR_ARG, "%s: the text is not valid UTF-8 (byte %zu)", who, enc->offset + valid);
    if (enc->add_special && !enc->started && !put_ids(enc, &enc->prefix)) return KN_ERR_OOM;
    kn_status st = encode_text(&enc->e, s, len, (kn_tok_edges){enc->started, !ends});
    if (st == KN_OK && enc->add_special && ends && !put_ids(enc, &enc->suffix)) st = KN_ERR_OOM;
    if (st != KN_OK) return st;
    if (len) { /* pending.p may be NULL otherwise */
        memmove(enc->pending.p, s + len, enc->pending.n - len);
        enc->pending.n -= len;
    }
    enc->searched = enc->searched > len ? enc->searched - len : 0;
    enc->offset += len;
    enc->started = true;
    return KN_OK;
}

kn_status kn_encoder_push(kn_encoder *enc, const char *text, size_t len, const int32_t **ids, size_t *n_ids) {
    if (!enc || (!text && len) || !ids || !n_ids) return kn_set_error(KN_ERR_NULL, "kn_encoder_push: NULL argument");
    enc->e.ids.n = 0;
    *ids = NULL;
    *n_ids = 0;
    if (!kn_tok_buf_put(&enc->pending, text, len)) return KN_ERR_OOM;
    const char *s = enc->pending.p;
    size_t n = enc->pending.n;
    if (n >= SEGMENT_BYTES) {
        /* The last cut whose next bytes show every added token that could span it. */
        size_t longest = enc->e.t->added.longest, hi = n > longest ? n - longest : 0, cut = 0;
        for (size_t i = hi; i > enc->searched && i > 1 && !cut; i--)
            if (cut_at(enc, s, n, i - 1)) cut = i - 1;
        enc->searched = hi > enc->searched ? hi : enc->searched;
        if (cut) {
            kn_status st = encode_segment(enc, cut, false, "kn_encoder_push");
            if (st != KN_OK) return st;
        }
    }
    *ids = enc->e.ids.v;
    *n_ids = enc->e.ids.n;
    return KN_OK;
}

kn_status kn_encoder_finish(kn_encoder *enc, const int32_t **ids, size_t *n_ids) {
    if (!enc || !ids || !n_ids) return kn_set_error(KN_ERR_NULL, "kn_encoder_finish: NULL argument");
    enc->e.ids.n = 0;
    *ids = NULL;
    *n_ids = 0;
    kn_status st = encode_segment(enc, enc->pending.n, true, "kn_encoder_finish");
    enc->pending.n = 0; /* a new text starts, even after an error */
    enc->searched = enc->offset = 0;
    enc->started = false;
    if (st != KN_OK) return st;
    *ids = enc->e.ids.v;
    *n_ids = enc->e.ids.n;
    return KN_OK;
}
