/* oneDNN's convolution primitives over kiln's pool, the convolution provider choice and its
 * counters (conv_onednn.h). oneDNN caches the compiled primitives by descriptor, so the chunks
 * of a batch (at most two sizes) compile once per geometry. */
#include "backends/cpu/conv_onednn.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/onednn.h"
#include "core/error.h"
#include "core/thread_pool.h"

static kn_gemm_counts counts;

void kn_conv_count_fallback(kn_dtype dt) { __atomic_fetch_add(&counts.fallbacks[dt], 1, __ATOMIC_RELAXED); }

void kn_conv_counts_get(kn_gemm_counts *out) { kn_gemm_counts_read(&counts, out); }
void kn_conv_counts_reset(void) { kn_gemm_counts_clear(&counts); }

/* The default (docs/decisions.md, rough timings): oneDNN's direct kernels beat im2col + GEMM
 * from about this many output positions per image (0: never); below, on a network's deepest
 * layers (4x4), the batched im2col GEMM wins, by most on the weight gradient. */
static int64_t onednn_from(kn_dtype dt) { return dt == KN_BF16 ? 64 : dt == KN_F32 ? 256 : 0; }

/* oneDNN spreads a convolution over the pool by images only: f32, whose lead over im2col is
 * smaller than a thread's worth, keeps im2col (its products split over the pool) when the
 * batch has fewer images than the pool has threads. */
static bool onednn_by_default(kn_dtype dt, const kn_conv_geom *g) {
    if (dt == KN_F32 && g->N < kn_pool_threads()) return false;
    return onednn_from(dt) && g->OH * g->OW >= onednn_from(dt);
}

kn_status kn_conv_choice(kn_dtype dt, char *buf, size_t size) {
    kn_gemm_provider forced = KN_GEMM_PROVIDER_COUNT;
    kn_status st = kn_gemm_forced(&forced);
    if (st != KN_OK) return st;
    bool has = kn_conv_onednn_has(KN_CONV_FORWARD, dt);
    if (forced != KN_GEMM_PROVIDER_COUNT || !has || !onednn_from(dt))
        snprintf(buf, size, "%s", has && forced == KN_GEMM_ONEDNN ? "onednn" : "im2col");
    else
        snprintf(buf, size, "onednn from %lld positions/image%s", (long long)onednn_from(dt),
                 dt == KN_F32 ? " and a batch of one image per thread" : "");
    return KN_OK;
}

kn_status kn_conv_select(kn_conv_kind kind, kn_dtype dt, const kn_conv_geom *g, bool *onednn) {
    kn_gemm_provider forced = KN_GEMM_PROVIDER_COUNT;
    kn_status st = kn_gemm_forced(&forced);
    if (st != KN_OK) return st;
    bool has = kn_conv_onednn_has(kind, dt);
    *onednn = has && (forced == KN_GEMM_ONEDNN || (forced == KN_GEMM_PROVIDER_COUNT && onednn_by_default(dt, g)));
    if (forced == KN_GEMM_ONEDNN && !has) kn_conv_count_fallback(dt);
    __atomic_fetch_add(&counts.selected[*onednn ? KN_GEMM_ONEDNN : KN_GEMM_OPENBLAS][dt], 1, __ATOMIC_RELAXED);
    return KN_OK;
}

#ifdef KILN_HAVE_ONEDNN

/* A primitive descriptor of one kind for n images of g in dt (results in f32), letting oneDNN
 * choose its layouts (blocked ones run its direct kernels; plain NCHW only its im2col one),
 * and the plain descriptors of the caller's three operands: a, b and the result (conv_onednn.h). */
static dnnl_status_t make_pd(dnnl_engine_t engine, dnnl_primitive_desc_t *pd, kn_conv_kind kind,
                             const kn_conv_geom *g, int64_t n, dnnl_data_type_t dt, dnnl_memory_desc_t plain[3]) {
    dnnl_memory_desc_t src, wei, dst, src_f, wei_f, dst_f, p_src, p_wei, p_dst, p_src_f, p_wei_f, p_dst_f;
    dnnl_dims_t sd = {n, g->G * g->Cg, g->H, g->W}, dd = {n, g->G * g->Coutg, g->OH, g->OW};
    dnnl_dims_t wd = {g->G, g->Coutg, g->Cg, g->KH, g->KW};
    const int wn = g->G > 1 ? 5 : 4;
    const dnnl_format_tag_t wtag = g->G > 1 ? dnnl_goihw : dnnl_oihw, any = dnnl_format_tag_any;
    dnnl_dims_t strides = {g->sh, g->sw}, dil = {g->dh - 1, g->dw - 1}, pl = {g->ph, g->pw};
    /* The right/bottom padding that makes the output OH x OW (negative when the stride leaves
     * input rows unread; oneDNN may turn that down). */
    dnnl_dims_t pr = {(g->OH - 1) * g->sh + (g->KH - 1) * g->dh + 1 - g->H - g->ph,
                      (g->OW - 1) * g->sw + (g->KW - 1) * g->dw + 1 - g->W - g->pw};
    const dnnl_data_type_t f = dnnl_f32;
    const int64_t *w_dims = g->G > 1 ? wd : wd + 1;
    const struct {
        dnnl_memory_desc_t *md;
        int nd;
        const int64_t *dims;
        dnnl_data_type_t t;
        dnnl_format_tag_t tag;
    } mds[] = {{&src, 4, sd, dt, any},        {&wei, wn, w_dims, dt, any},     {&dst, 4, dd, dt, any},
               {&src_f, 4, sd, f, any},       {&wei_f, wn, w_dims, f, any},    {&dst_f, 4, dd, f, any},
               {&p_src, 4, sd, dt, dnnl_nchw}, {&p_wei, wn, w_dims, dt, wtag},  {&p_dst, 4, dd, dt, dnnl_nchw},
               {&p_src_f, 4, sd, f, dnnl_nchw}, {&p_wei_f, wn, w_dims, f, wtag}, {&p_dst_f, 4, dd, f, dnnl_nchw}};
    dnnl_status_t s = dnnl_success;
    for (size_t i = 0; i < sizeof mds / sizeof *mds && s == dnnl_success; i++)
        s = dnnl_memory_desc_init_by_tag(mds[i].md, mds[i].nd, mds[i].dims, mds[i].t, mds[i].tag);
    if (s != dnnl_success) return s;
    /* a, b, result: FORWARD x, w, y; BACKWARD_DATA dy, w, dx; WEIGHT_GRAD dy, x, dw. */
    plain[0] = kind == KN_CONV_FORWARD ? p_src : p_dst;
    plain[1] = kind == KN_CONV_WEIGHT_GRAD ? p_src : p_wei;
    plain[2] = kind == KN_CONV_FORWARD ? p_dst_f : kind == KN_CONV_BACKWARD_DATA ? p_src_f : p_wei_f;
    dnnl_convolution_desc_t fwd, bwd;
    const dnnl_alg_kind_t alg = dnnl_convolution_direct;
    const dnnl_prop_kind_t prop = kind == KN_CONV_FORWARD ? dnnl_forward_inference : dnnl_forward_training;
    /* The forward convolution: the primitive itself, or the hint a backward one needs. */
    s = dnnl_dilated_convolution_forward_desc_init(&fwd, prop, alg, &src, &wei, NULL,
                                                   kind == KN_CONV_FORWARD ? &dst_f : &dst, strides, dil, pl, pr);
    if (s != dnnl_success) return s;
    if (kind == KN_CONV_FORWARD) return dnnl_primitive_desc_create(pd, &fwd, NULL, engine, NULL);
    dnnl_primitive_desc_t hint;
    if ((s = dnnl_primitive_desc_create(&hint, &fwd, NULL, engine, NULL)) != dnnl_success) return s;
    if (kind == KN_CONV_BACKWARD_DATA)
        s = dnnl_dilated_convolution_backward_data_desc_init(&bwd, alg, &src_f, &wei, &dst, strides, dil, pl, pr);
    else
        s = dnnl_dilated_convolution_backward_weights_desc_init(&bwd, alg, &src, &wei_f, NULL, &dst, strides, dil, pl,
                                                                pr);
    if (s == dnnl_success) s = dnnl_primitive_desc_create(pd, &bwd, NULL, engine, hint);
    dnnl_primitive_desc_destroy(hint);
    return s;
}

static dnnl_data_type_t dnnl_type(kn_dtype dt) {
    return dt == KN_F32 ? dnnl_f32 : dt == KN_BF16 ? dnnl_bf16 : dnnl_data_type_undef;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool has[KN_CONV_KIND_COUNT][KN_DTYPE_COUNT];

/* A kind and dtype are there when oneDNN has a small grouped, strided, padded convolution. */
static void find_kinds(void) {
    dnnl_engine_t engine = kn_onednn_engine();
    const kn_conv_geom g = {2, 2, 4, 6, 6, 4, 3, 3, 3, 3, 2, 2, 1, 1, 1, 1};
    const kn_dtype dts[] = {KN_F32, KN_BF16};
    for (int k = 0; engine && k < KN_CONV_KIND_COUNT; k++)
        for (int i = 0; i < 2; i++) {
            dnnl_primitive_desc_t pd;
            dnnl_memory_desc_t plain[3];
            if (make_pd(engine, &pd, (kn_conv_kind)k, &g, 2, dnnl_type(dts[i]), plain) == dnnl_success) {
                has[k][dts[i]] = true;
                dnnl_primitive_desc_destroy(pd);
            }
        }
}

bool kn_conv_onednn_has(kn_conv_kind kind, kn_dtype dt) {
    pthread_once(&once, find_kinds);
    return kind >= 0 && kind < KN_CONV_KIND_COUNT && dt >= 0 && dt < KN_DTYPE_COUNT && has[kind][dt];
}

/* One convolution over images [begin, end) per chunk; the weight gradient's chunks write
 * their own partial (chunk 0: out itself). */
typedef struct conv_run {
    kn_conv_kind kind;
    const kn_conv_geom *g;
    dnnl_data_type_t dt;
    size_t es;
    const char *a, *b;
    float *out, *part;
    int64_t wsize;
    int parts;        /* the weight gradient's partials in part (chunks 1..) */
    atomic_int worst; /* a kn_gemm_result */
} conv_run;

static kn_gemm_result result_of(dnnl_status_t s) {
    return s == dnnl_success         ? KN_GEMM_DONE
           : s == dnnl_out_of_memory ? KN_GEMM_NO_MEMORY
           : s == dnnl_unimplemented || s == dnnl_invalid_arguments ? KN_GEMM_TURNED_DOWN
                                                                    : KN_GEMM_FAILED;
}

/* Copies memory `from` into `to` (another layout of the same tensor). */
static dnnl_status_t reorder(dnnl_engine_t engine, dnnl_stream_t stream, dnnl_memory_t from, dnnl_memory_t to) {
    const dnnl_memory_desc_t *fm, *tm;
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim;
    dnnl_memory_get_memory_desc(from, &fm);
    dnnl_memory_get_memory_desc(to, &tm);
    dnnl_status_t s = dnnl_reorder_primitive_desc_create(&pd, fm, engine, tm, engine, NULL);
    if (s != dnnl_success) return s;
    if ((s = dnnl_primitive_create(&prim, pd)) == dnnl_success) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
        s = dnnl_primitive_execute(prim, stream, 2, args);
        dnnl_primitive_destroy(prim);
    }
    dnnl_primitive_desc_destroy(pd);
    return s;
}

/* Runs pd on the operands in their plain layouts (ptr[2] the result): an operand whose layout
 * the primitive chose otherwise is reordered into a buffer of that layout first (the result
 * back from one after). */
static dnnl_status_t run_pd(dnnl_engine_t engine, dnnl_primitive_desc_t pd, const int arg[3],
                            const dnnl_memory_desc_t plain[3], void *ptr[3]) {
    dnnl_primitive_t prim = NULL;
    dnnl_stream_t stream = NULL;
    dnnl_memory_t user[3] = {NULL, NULL, NULL}, own[3] = {NULL, NULL, NULL};
    dnnl_status_t s = dnnl_primitive_create(&prim, pd);
    if (s == dnnl_success) s = dnnl_stream_create(&stream, engine, dnnl_stream_default_flags);
    for (int i = 0; i < 3 && s == dnnl_success; i++) {
        const dnnl_memory_desc_t *want = dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, arg[i]);
        s = dnnl_memory_create(&user[i], &plain[i], engine, ptr[i]);
        if (s == dnnl_success && !dnnl_memory_desc_equal(want, &plain[i]))
            s = dnnl_memory_create(&own[i], want, engine, DNNL_MEMORY_ALLOCATE);
        if (s == dnnl_success && own[i] && i < 2) s = reorder(engine, stream, user[i], own[i]);
    }
    if (s == dnnl_success) {
        dnnl_exec_arg_t args[3];
        for (int i = 0; i < 3; i++) args[i] = (dnnl_exec_arg_t){arg[i], own[i] ? own[i] : user[i]};
        s = dnnl_primitive_execute(prim, stream, 3, args);
    }
    if (s == dnnl_success && own[2]) s = reorder(engine, stream, own[2], user[2]);
    if (s == dnnl_success) s = dnnl_stream_wait(stream);
    for (int i = 0; i < 3; i++) dnnl_memory_destroy(user[i]), dnnl_memory_destroy(own[i]);
    dnnl_stream_destroy(stream);
    dnnl_primitive_destroy(prim);
    return s;
}

/* The primitive on images [n0, n1) on this thread. */
static kn_gemm_result run_images(conv_run *r, int64_t n0, int64_t n1, int chunk) {
    const kn_conv_geom *g = r->g;
    dnnl_engine_t engine = kn_onednn_engine();
    if (!engine) return KN_GEMM_TURNED_DOWN;
    const int64_t x_img = g->G * g->Cg * g->H * g->W, y_img = g->G * g->Coutg * g->OH * g->OW;
    /* The arguments a, b and the result, the image-indexed ones from image n0. */
    const int64_t a_img = r->kind == KN_CONV_FORWARD ? x_img : y_img;
    const char *b = r->kind == KN_CONV_WEIGHT_GRAD ? r->b + r->es * (size_t)(n0 * x_img) : r->b;
    float *out = r->kind == KN_CONV_FORWARD         ? r->out + n0 * y_img
                 : r->kind == KN_CONV_BACKWARD_DATA ? r->out + n0 * x_img
                 : chunk                            ? r->part + (chunk - 1) * r->wsize
                                                    : r->out;
    void *ptr[3] = {(void *)(r->a + r->es * (size_t)(n0 * a_img)), (void *)b, out};
    static const int args[KN_CONV_KIND_COUNT][3] = {
        {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST},
        {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC},
        {DNNL_ARG_DIFF_DST, DNNL_ARG_SRC, DNNL_ARG_DIFF_WEIGHTS},
    };
    dnnl_primitive_desc_t pd;
    dnnl_memory_desc_t plain[3];
    dnnl_status_t s = make_pd(engine, &pd, r->kind, g, n1 - n0, r->dt, plain);
    if (s != dnnl_success) return result_of(s);
    s = run_pd(engine, pd, args[r->kind], plain, ptr);
    dnnl_primitive_desc_destroy(pd);
    return result_of(s);
}

static void conv_chunk(void *ctx, int64_t begin, int64_t end, int chunk) {
    conv_run *r = ctx;
    int res = (int)run_images(r, begin, end, chunk), cur = atomic_load(&r->worst);
    while (res > cur && !atomic_compare_exchange_weak(&r->worst, &cur, res)) {
    }
}

/* Adds the partials into out in chunk order: items are out's elements. */
static void sum_chunk(void *ctx, int64_t begin, int64_t end, int chunk) {
    conv_run *r = ctx;
    for (int p = 0; p < r->parts; p++)
        for (int64_t i = begin; i < end; i++) r->out[i] += r->part[p * r->wsize + i];
}

kn_gemm_result kn_conv_onednn(kn_conv_kind kind, const kn_conv_geom *g, kn_dtype dt, const void *a, const void *b,
                              float *out) {
    if (!kn_conv_onednn_has(kind, dt)) return KN_GEMM_TURNED_DOWN;
    if (g->N <= 0 || g->Cg <= 0 || g->Coutg <= 0 || g->OH <= 0 || g->OW <= 0) return KN_GEMM_TURNED_DOWN;
    const double flops = 2.0 * (double)(g->G * g->Coutg * g->OH * g->OW) * (double)(g->Cg * g->KH * g->KW);
    int chunks = kn_parallel_chunks(g->N, (int64_t)(flops / KN_GEMM_FLOPS_PER_COST) + 1);
    const int64_t wsize = g->G * g->Coutg * g->Cg * g->KH * g->KW;
    conv_run r = {kind, g, dnnl_type(dt), kn_dtype_size(dt), a, b, out, NULL, wsize, chunks - 1, KN_GEMM_DONE};
    if (kind == KN_CONV_WEIGHT_GRAD && chunks > 1) {
        r.part = malloc(sizeof(float) * (size_t)((chunks - 1) * wsize));
        if (!r.part) return KN_GEMM_NO_MEMORY;
    }
    kn_parallel_run(g->N, chunks, conv_chunk, &r);
    kn_gemm_result res = (kn_gemm_result)atomic_load(&r.worst);
    if (res == KN_GEMM_DONE && r.part) kn_parallel_for(wsize, chunks, sum_chunk, &r);
    free(r.part);
    return res;
}

#else /* no oneDNN in this build */

bool kn_conv_onednn_has(kn_conv_kind kind, kn_dtype dt) { return false; }
kn_gemm_result kn_conv_onednn(kn_conv_kind kind, const kn_conv_geom *g, kn_dtype dt, const void *a, const void *b,
                              float *out) {
    return KN_GEMM_TURNED_DOWN;
}

#endif
