/* The attention forward for a few queries per head (decode): each (batch, head) task sweeps
 * its keys once per query, reading q, k and v in their own dtype (f32, bf16 or f16) where they
 * lie, the KV cache included. The blocked kernel (k_attention.c) would widen every 16-bit
 * operand into an f32 copy and run two small GEMMs per block of keys: for one query over a
 * few hundred cached keys, that costs more than the attention itself. Sums are f32; results
 * and the log-sum-exp follow the blocked kernel's rules (a query with no allowed key gives
 * zeros and a log-sum-exp of 0; a NaN score makes the row NaN). */
#include <stdatomic.h>
#include <stdlib.h>

#include "backends/cpu/k_attention.h"
#include "core/error.h"
#include "core/thread_pool.h"

enum { LANES = 16 }; /* partial sums per dot product: one AVX-512 register of f32 */

static inline float load_f32(const char *base, int64_t i) { return ((const float *)base)[i]; }
static inline float load_bf16(const char *base, int64_t i) { return kn_half_to_f32_bf16(((const uint16_t *)base)[i]); }
static inline float load_f16(const char *base, int64_t i) { return kn_half_to_f32_f16(((const uint16_t *)base)[i]); }
static inline void put_f32(char *base, int64_t i, float x) { ((float *)base)[i] = x; }
static inline void put_bf16(char *base, int64_t i, float x) { ((uint16_t *)base)[i] = kn_half_from_f32_bf16(x); }
static inline void put_f16(char *base, int64_t i, float x) { ((uint16_t *)base)[i] = kn_half_from_f32_f16(x); }

/* The loops of one dtype, each written out so that it vectorizes: the scores of n keys (q . k
 * over D in LANES partial sums, a fixed order, so the same inputs give the same bits), the sum
 * of n rows of v weighted by p, and a row of f32 scaled into the dtype, or widened from it. */
typedef struct row_ops {
    void (*scores)(const float *q, const char *k, int64_t ld, int64_t n, int64_t D, float scale, float *s);
    void (*weighted_sum)(const float *p, const char *v, int64_t ld, int64_t n, int64_t Dv, float *acc);
    void (*widen)(const char *row, int64_t n, float *x);
    void (*store)(const float *x, int64_t n, float f, char *out);
} row_ops;

#define ROW_OPS(S, ES)                                                                                 \
    static void scores_##S(const float *q, const char *k, int64_t ld, int64_t n, int64_t D, float scale, \
                           float *s) {                                                                \
        for (int64_t j = 0; j < n; j++) {                                                             \
            const char *kj = k + ES * j * ld;                                                         \
            float part[LANES] = {0};                                                                  \
            int64_t d = 0;                                                                            \
            for (; d + LANES <= D; d += LANES)                                                        \
                for (int l = 0; l < LANES; l++) part[l] += q[d + l] * load_##S(kj, d + l);            \
            for (int l = 0; d < D; d++, l++) part[l] += q[d] * load_##S(kj, d);                       \
            float sum = 0;                                                                            \
            for (int l = 0; l < LANES; l++) sum += part[l];                                           \
            s[j] = scale * sum;                                                                       \
        }                                                                                             \
    }                                                                                                 \
    static void weighted_sum_##S(const float *p, const char *v, int64_t ld, int64_t n, int64_t Dv,     \
                                 float *acc) {                                                        \
        for (int64_t j = 0; j < n; j++) /* p = 0 still passes a NaN of v on, as a product would */    \
            for (int64_t d = 0; d < Dv; d++) acc[d] += p[j] * load_##S(v + ES * j * ld, d);           \
    }                                                                                                 \
    static void widen_##S(const char *row, int64_t n, float *x) {                                     \
        for (int64_t d = 0; d < n; d++) x[d] = load_##S(row, d);                                      \
    }                                                                                                 \
    static void store_##S(const float *x, int64_t n, float f, char *out) {                            \
        for (int64_t d = 0; d < n; d++) put_##S(out, d, x[d] * f);                                    \
    }                                                                                                 \
    static const row_ops ops_##S = {scores_##S, weighted_sum_##S, widen_##S, store_##S};
ROW_OPS(f32, 4)
ROW_OPS(bf16, 2)
ROW_OPS(f16, 2)

typedef struct decode_ctx {
    const attn_problem *P;
    const attn_operand *q, *k, *v;
    const kn_tensor *mask;
    kn_dtype dt;   /* of q, k, v and out */
    const row_ops *ops;
    void *out;
    float *lse;
    atomic_int failed;
} decode_ctx;

/* Query i of (b, h): scores of its visible keys into s, then the weighted sum of v. */
static void decode_query(const decode_ctx *c, const attn_mask *mb, int64_t b, int64_t h, int64_t i, float *qf,
                         float *s, float *acc) {
    const attn_problem *P = c->P;
    const kn_dtype dt = c->dt;
    const row_ops *f = c->ops;
    const int64_t es = (int64_t)kn_dtype_size(dt), D = P->D, Dv = P->Dv, hk = h / (P->H / P->Hkv);
    const char *qp = c->q->base + es * (kn_cpu_attn_batch_offset(c->q->t, P->batch_dims, b) + h * c->q->head_stride + i * c->q->ld);
    const char *kp = c->k->base + es * (kn_cpu_attn_batch_offset(c->k->t, P->batch_dims, b) + hk * c->k->head_stride);
    const char *vp = c->v->base + es * (kn_cpu_attn_batch_offset(c->v->t, P->batch_dims, b) + hk * c->v->head_stride);
    int64_t j_end = P->Tk;
    if (P->causal && i + P->shift + 1 < j_end) j_end = i + P->shift + 1 > 0 ? i + P->shift + 1 : 0;
    f->widen(qp, D, qf);
    f->scores(qf, kp, c->k->ld, j_end, D, (float)P->scale, s);
    if (mb->base && mb->is_bool) {
        const uint8_t *m = (const uint8_t *)mb->base + i * mb->is;
        for (int64_t j = 0; j < j_end; j++) /* -inf, not a select: a NaN score stays NaN */
            if (!m[j * mb->js]) s[j] -= INFINITY;
    } else if (mb->base) {
        const float *m = (const float *)mb->base + i * mb->is;
        for (int64_t j = 0; j < j_end; j++) s[j] += m[j * mb->js];
    }
    float mx = -INFINITY;
    for (int64_t j = 0; j < j_end; j++) mx = s[j] > mx ? s[j] : mx;
    if (mx == -INFINITY) /* no allowed key, unless a score is NaN */
        for (int64_t j = 0; j < j_end; j++) mx = s[j] != s[j] ? s[j] : mx;
    const int64_t row = (b * P->H + h) * P->Tq + i;
    char *o = (char *)c->out + es * row * Dv;
    for (int64_t d = 0; d < Dv; d++) acc[d] = 0;
    if (mx == -INFINITY) {
        f->store(acc, Dv, 0, o);
        c->lse[row] = 0;
        return;
    }
    for (int64_t j = 0; j < j_end; j++) s[j] = kn_exp(s[j] - mx);
    float part[LANES] = {0};
    int64_t j = 0;
    for (; j + LANES <= j_end; j += LANES)
        for (int l = 0; l < LANES; l++) part[l] += s[j + l];
    for (int l = 0; j < j_end; j++, l++) part[l] += s[j];
    float sum = 0;
    for (int l = 0; l < LANES; l++) sum += part[l];
    f->weighted_sum(s, vp, c->v->ld, j_end, Dv, acc);
    f->store(acc, Dv, (float)P->out_scale / sum, o);
    c->lse[row] = mx + kn_log(sum);
}

/* Tasks [begin, end) are (batch, head) pairs; the chunk's buffers hold one query's scores. */
static void decode_chunk(void *ctx, int64_t begin, int64_t end, int chunk) {
    (void)chunk;
    decode_ctx *c = ctx;
    const attn_problem *P = c->P;
    float *buf = malloc(sizeof(float) * (size_t)(P->D + P->Tk + P->Dv));
    if (!buf) {
        atomic_store(&c->failed, 1);
        return;
    }
    for (int64_t task = begin; task < end; task++) {
        const int64_t h = task % P->H, b = task / P->H;
        attn_mask mb = kn_cpu_attn_mask(c->mask, P->batch_dims, b, h);
        for (int64_t i = 0; i < P->Tq; i++) decode_query(c, &mb, b, h, i, buf, buf + P->D, buf + P->D + P->Tk);
    }
    free(buf);
}

bool kn_cpu_attention_decode_fits(const kn_node *n, const attn_problem *P) {
    const kn_dtype dt = n->in[0]->dtype;
    if (P->Tq > KN_ATTENTION_DECODE_MAX_Q || P->dropout || n->out[1]->dtype != KN_F32) return false;
    if (dt != KN_F32 && dt != KN_BF16 && dt != KN_F16) return false;
    for (int i = 0; i < 3; i++) {
        const kn_tensor *t = n->in[i];
        const int nd = t->ndim;
        if (t->dtype != dt || (t->stride[nd - 1] != 1 && t->shape[nd - 1] > 1)) return false;
    }
    const kn_tensor *mask = KN_INPUT(n, scaled_dot_product_attention, mask);
    return !mask || mask->dtype == KN_BOOL || mask->dtype == KN_F32;
}

kn_status kn_cpu_attention_decode(kn_node *n, const attn_problem *P) {
    attn_operand ops[3];
    for (int i = 0; i < 3; i++) {
        const kn_tensor *t = n->in[i];
        const int nd = t->ndim;
        ops[i] = (attn_operand){.t = t, .base = kn_tensor_data(t), .head_stride = t->stride[nd - 3], .ld = t->stride[nd - 2]};
    }
    decode_ctx c = {.P = P, .q = &ops[0], .k = &ops[1], .v = &ops[2],
                    .mask = KN_INPUT(n, scaled_dot_product_attention, mask), .dt = n->in[0]->dtype,
                    .ops = n->in[0]->dtype == KN_BF16 ? &ops_bf16 : n->in[0]->dtype == KN_F16 ? &ops_f16 : &ops_f32,
                    .out = kn_tensor_data(n->out[0]), .lse = kn_tensor_data(n->out[1])};
    /* A (key, dim) pair counts as one element of the pool's grain (it was an eighth, which kept
     * a decode step's attention, 6-12 heads over a few hundred keys, on one thread: 1.5x slower
     * on Zen 1 for 12 heads x 200 keys). */
    kn_parallel_for(P->batches * P->H, P->Tq * P->Tk * (P->D + P->Dv) + 1, decode_chunk, &c);
    return atomic_load(&c.failed) ? kn_error(KN_ERR_OOM, "scaled_dot_product_attention: out of memory for a score row")
                                  : KN_OK;
}
