/* Generation with a KV cache (generate.h): the prompts left-padded into one batch, one
 * prefill, then one token per row and step. Finished rows keep their place in the batch (the
 * cache has no way to drop a row) and their logits are ignored. */
#include "lm/generate.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lm/sampler.h"
#include "lm/stop_strings.h"

typedef struct gen_row {
    int32_t *ids;           /* the prompt, then the generated ids */
    size_t n_prompt, n_ids;
    kn_detokenizer *detok;  /* NULL without a tokenizer */
    lm_stop_matcher *stop;
    char *text;
    size_t text_len, text_cap;
    bool done;
} gen_row;

typedef struct gen_state {
    const lm_generate_options *o;
    gen_row *rows;
    int n_rows;
    const int *eos;
    int n_eos;
    bool cancelled;         /* on_text asked to stop */
} gen_state;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

lm_generate_options lm_generate_defaults(void) {
    return (lm_generate_options){
        .max_new_tokens = 64,
        .sampling = {.temperature = 0, .top_k = 50, .top_p = 1, .repetition_penalty = 1, .seed = 0},
        .n_eos = -1,
    };
}

void lm_generation_free(lm_generation *g) {
    if (!g) return;
    for (int b = 0; b < g->n_rows; b++) {
        if (g->ids) free(g->ids[b]);
        if (g->text) free(g->text[b]);
    }
    free(g->ids);
    free(g->n_ids);
    free(g->text);
    memset(g, 0, sizeof *g);
}

static kn_status check_prompts(const lm_config *cfg, int n, const int32_t *const *prompts, const size_t *lens) {
    if (n < 1) return kn_set_error(KN_ERR_ARG, "generate: no prompts");
    for (int b = 0; b < n; b++) {
        if (lens[b] == 0) return kn_set_error(KN_ERR_ARG, "generate: prompt %d has no tokens", b);
        if (lens[b] > (size_t)cfg->max_position_embeddings)
            return kn_set_error(KN_ERR_ARG,
                                "generate: prompt %d is %zu tokens long, longer than the model's context of %d tokens "
                                "(max_position_embeddings)",
                                b, lens[b], cfg->max_position_embeddings);
        for (size_t i = 0; i < lens[b]; i++)
            if (prompts[b][i] < 0 || prompts[b][i] >= cfg->vocab_size)
                return kn_set_error(KN_ERR_INDEX, "generate: prompt %d: token %zu is id %d, outside the vocabulary of %d",
                                    b, i, prompts[b][i], cfg->vocab_size);
    }
    return KN_OK;
}

/* ---- rows ----------------------------------------------------------------------------------- */

static void rows_free(gen_row *rows, int n) {
    for (int b = 0; rows && b < n; b++) {
        free(rows[b].ids);
        kn_detokenizer_free(rows[b].detok);
        lm_stop_matcher_free(rows[b].stop);
        free(rows[b].text);
    }
    free(rows);
}

static gen_row *rows_new(const kn_tokenizer *tok, int n, const int32_t *const *prompts, const size_t *lens,
                         const lm_generate_options *o) {
    gen_row *rows = calloc((size_t)n, sizeof *rows);
    bool ok = rows != NULL;
    for (int b = 0; ok && b < n; b++) {
        gen_row *r = &rows[b];
        r->n_prompt = r->n_ids = lens[b];
        ok = (r->ids = malloc((lens[b] + (size_t)o->max_new_tokens) * sizeof *r->ids)) != NULL;
        if (ok) memcpy(r->ids, prompts[b], lens[b] * sizeof *r->ids);
        if (ok && tok) {
            r->detok = kn_detokenizer_new(tok, true);
            r->stop = r->detok ? lm_stop_matcher_new(o->stop, o->n_stop) : NULL;
            ok = r->detok && r->stop && (r->text = calloc(1, 1));
        }
    }
    if (!ok) {
        rows_free(rows, n);
        if (kn_last_status() == KN_OK) kn_set_error(KN_ERR_OOM, "generate: out of host memory");
        return NULL;
    }
    return rows;
}

/* Text that row b may show: kept in its text and handed to on_text. */
static kn_status emit(gen_state *g, int b, const char *text, size_t len) {
    gen_row *r = &g->rows[b];
    if (!len) return KN_OK;
    if (r->text_len + len + 1 > r->text_cap) {
        size_t cap = (r->text_len + len + 1) * 2;
        char *t = realloc(r->text, cap);
        if (!t) return kn_set_error(KN_ERR_OOM, "generate: out of host memory for the text of row %d", b);
        r->text = t;
        r->text_cap = cap;
    }
    memcpy(r->text + r->text_len, text, len);
    r->text_len += len;
    r->text[r->text_len] = '\0';
    if (g->o->on_text && !g->cancelled && !g->o->on_text(g->o->ctx, b, text, len)) g->cancelled = true;
    return KN_OK;
}

/* The end of row b: the detokenizer's and the stop matcher's held-back text. */
static kn_status finish_row(gen_state *g, int b) {
    gen_row *r = &g->rows[b];
    r->done = true;
    if (!r->detok) return KN_OK;
    size_t len;
    const char *rest = kn_detokenizer_flush(r->detok, &len), *out;
    if (!rest) return kn_last_status();
    if (!lm_stop_seen(r->stop)) {
        lm_stop_push(r->stop, rest, len, &out, &len);
        if (!out) return kn_last_status();
        kn_status st = emit(g, b, out, len);
        if (st != KN_OK) return st;
        out = lm_stop_flush(r->stop, &len);
        return emit(g, b, out, len);
    }
    return KN_OK;
}

static bool is_eos(const gen_state *g, int32_t id) {
    for (int i = 0; i < g->n_eos; i++)
        if (g->eos[i] == id) return true;
    return false;
}

/* Takes row b's next id: its text, and whether the row ends here. */
static kn_status accept(gen_state *g, int b, int32_t id, bool last) {
    gen_row *r = &g->rows[b];
    r->ids[r->n_ids++] = id;
    bool eos = !g->o->ignore_eos && is_eos(g, id);
    if (r->detok) {
        size_t len;
        const char *piece = kn_detokenizer_push(r->detok, id, &len), *out;
        if (!piece) return kn_last_status();
        bool stopped = lm_stop_push(r->stop, piece, len, &out, &len);
        if (!out) return kn_last_status();
        kn_status st = emit(g, b, out, len);
        if (st != KN_OK) return st;
        if (stopped) return finish_row(g, b);
    }
    return eos || last ? finish_row(g, b) : KN_OK;
}

/* ---- the model ------------------------------------------------------------------------------ */

typedef struct step_ctx {
    lm *m;
    lm_cache *cache;
} step_ctx;

/* The step compiled mode runs as a program (kiln/compile.h): ids [B, T] -> the last position's
 * logits, f32 [B, V]. */
static kn_status last_logits_step(void *ctx, kn_tensor *const *in, int n_in, kn_tensor **out, int n_out) {
    const step_ctx *c = ctx;
    (void)n_in, (void)n_out;
    kn_tensor *y = lm_forward_last(c->m, in[0], c->cache);
    if (y && kn_dtype_of(y) != KN_F32) y = kn_cast(y, KN_F32);
    out[0] = y;
    return y ? KN_OK : kn_last_status();
}

/* The last position's logits of ids [B, T] (row-major host ids) into logits [B, V], by step. */
static kn_status forward_last(kn_compiled *step, const int64_t *ids, int64_t B, int64_t T, float *logits, int64_t V) {
    kn_scope_push();
    kn_tensor *x = kn_from_host(ids, KN_I64, KN_SHAPE(B, T), kn_default_device()), *y = NULL;
    kn_status st = x ? kn_compiled_run(step, &x, 1, &y, 1) : kn_last_status();
    if (st == KN_OK) st = kn_to_host(y, logits, (size_t)(B * V) * sizeof *logits);
    kn_release(y);
    kn_scope_pop();
    return st;
}

/* Picks the next id of every row still going; step 0 is the prefill's. */
static kn_status pick_all(gen_state *g, lm_sampler *s, float *logits, int64_t V, int64_t step, int64_t *feed,
                          int64_t *active_out) {
    int64_t active = 0;
    for (int b = 0; b < g->n_rows && !g->cancelled; b++) {
        gen_row *r = &g->rows[b];
        if (r->done) continue;
        int32_t id = lm_sampler_next(s, logits + b * V, r->ids, r->n_ids, b, step);
        if (id < 0) return kn_last_status();
        kn_status st = accept(g, b, id, step + 1 == g->o->max_new_tokens);
        if (st != KN_OK) return st;
        feed[b] = id;
        active++;
    }
    *active_out = active;
    return KN_OK;
}

static bool any_running(const gen_state *g) {
    for (int b = 0; b < g->n_rows; b++)
        if (!g->rows[b].done) return true;
    return false;
}

/* The generated part of every row into out. */
static kn_status collect(gen_state *g, lm_generation *out) {
    int n = g->n_rows;
    out->n_rows = n;
    out->ids = calloc((size_t)n, sizeof *out->ids);
    out->n_ids = calloc((size_t)n, sizeof *out->n_ids);
    bool text = g->rows[0].detok != NULL;
    out->text = text ? calloc((size_t)n, sizeof *out->text) : NULL;
    if (!out->ids || !out->n_ids || (text && !out->text)) return kn_set_error(KN_ERR_OOM, "generate: out of host memory");
    for (int b = 0; b < n; b++) {
        gen_row *r = &g->rows[b];
        out->n_ids[b] = r->n_ids - r->n_prompt;
        out->ids[b] = malloc((out->n_ids[b] + 1) * sizeof **out->ids);
        if (!out->ids[b]) return kn_set_error(KN_ERR_OOM, "generate: out of host memory");
        memcpy(out->ids[b], r->ids + r->n_prompt, out->n_ids[b] * sizeof **out->ids);
        if (text) {
            out->text[b] = r->text; /* handed over */
            r->text = NULL;
        }
    }
    return KN_OK;
}

static kn_status run(lm *m, gen_state *g, const int32_t *const *prompts, const size_t *lens, lm_generation *out) {
    const lm_config *cfg = lm_config_of(m);
    const lm_generate_options *o = g->o;
    int64_t B = g->n_rows, V = cfg->vocab_size, T = 0;
    for (int b = 0; b < B; b++) T = (int64_t)lens[b] > T ? (int64_t)lens[b] : T;
    /* The longest row reaches position T + new - 1 when its last token is fed. */
    int64_t max_new = o->max_new_tokens, room = cfg->max_position_embeddings - T + 1;
    if (max_new > room) max_new = room;
    lm_generate_options clamped = *o;
    clamped.max_new_tokens = (int)max_new;
    g->o = &clamped;

    int64_t *pad = malloc((size_t)B * sizeof *pad), *ids = malloc((size_t)(B * T) * sizeof *ids);
    float *logits = malloc((size_t)(B * V) * sizeof *logits);
    lm_sampler *s = lm_sampler_new(&o->sampling, V);
    lm_cache *cache = max_new > 0 ? lm_cache_new(m, B, T + max_new - 1) : NULL;
    /* Two programs: the prefill, whose prompt length may change between calls, and the decode
     * step, fed [B, 1]; the KV length grows inside the step, which a program's structure does
     * not depend on (kiln/compile.h), so neither recompiles as the cache fills. */
    step_ctx ctx = {m, cache};
    kn_compile_dim prompt_len = {.input = 0, .dim = 1, .max = cfg->max_position_embeddings};
    kn_compiled *prefill = kn_compile(last_logits_step, &ctx, &(kn_compile_options){"prefill", &prompt_len, 1});
    kn_compiled *decode = prefill ? kn_compile(last_logits_step, &ctx, &(kn_compile_options){.name = "decode"}) : NULL;
    kn_status st = KN_OK;
    if (!pad || !ids || !logits) st = kn_set_error(KN_ERR_OOM, "generate: out of host memory");
    else if (!s || (max_new > 0 && !cache) || !decode) st = kn_last_status();
    for (int64_t b = 0; st == KN_OK && b < B; b++) {
        pad[b] = T - (int64_t)lens[b];
        for (int64_t t = 0; t < T; t++) ids[b * T + t] = t < pad[b] ? 0 : prompts[b][t - pad[b]];
        out->prefill_tokens += (int64_t)lens[b];
    }
    if (st == KN_OK && max_new > 0) st = lm_cache_set_padding(cache, pad);

    kn_no_grad_push();
    int64_t active = 0;
    if (st == KN_OK && max_new > 0) {
        double t0 = now_s();
        st = forward_last(prefill, ids, B, T, logits, V);
        if (st == KN_OK) st = pick_all(g, s, logits, V, 0, ids, &active);
        out->prefill_seconds = now_s() - t0;
    }
    double t0 = now_s();
    for (int64_t step = 1; st == KN_OK && step < max_new && !g->cancelled && any_running(g); step++) {
        st = forward_last(decode, ids, B, 1, logits, V); /* ids[b]: row b's last id */
        if (st == KN_OK) st = pick_all(g, s, logits, V, step, ids, &active);
        out->decode_tokens += active;
    }
    out->decode_seconds = now_s() - t0;
    kn_no_grad_pop();
    for (int b = 0; st == KN_OK && b < B; b++)
        if (!g->rows[b].done) st = finish_row(g, b);
    if (st == KN_OK) st = collect(g, out);

    kn_compiled_free(decode);
    kn_compiled_free(prefill);
    lm_cache_free(cache);
    lm_sampler_free(s);
    free(logits);
    free(ids);
    free(pad);
    return st;
}

kn_status lm_generate(lm *m, const kn_tokenizer *tok, int n, const int32_t *const *prompts, const size_t *lens,
                      const lm_generate_options *o, lm_generation *out) {
    memset(out, 0, sizeof *out);
    const lm_config *cfg = lm_config_of(m);
    kn_status st = check_prompts(cfg, n, prompts, lens);
    if (st != KN_OK) return st;
    if (o->max_new_tokens < 0) return kn_set_error(KN_ERR_ARG, "generate: max_new_tokens is negative");
    if (o->n_stop > 0 && !tok) return kn_set_error(KN_ERR_ARG, "generate: stop strings need a tokenizer");
    gen_state g = {.o = o, .n_rows = n, .eos = o->n_eos >= 0 ? o->eos_ids : cfg->eos_token_ids,
                   .n_eos = o->n_eos >= 0 ? o->n_eos : cfg->n_eos};
    if (!(g.rows = rows_new(tok, n, prompts, lens, o))) return kn_last_status();
    st = run(m, &g, prompts, lens, out);
    rows_free(g.rows, n);
    if (st != KN_OK) lm_generation_free(out);
    return st;
}
