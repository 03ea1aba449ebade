/* The onednn matmul provider: oneDNN's matmul primitive over kiln's strided operands, described
 * by memory descriptors with strides (no copies), f32 accumulation, output in the product's
 * dtype. Products are split over kiln's pool (gemm_tiles.h); each piece is one primitive run on
 * one thread (onednn.h), consecutive whole products of a batch as one 3-D primitive. oneDNN
 * caches the compiled primitives by descriptor. */
#include "backends/cpu/gemm_provider.h"

#ifdef KILN_HAVE_ONEDNN
#include <pthread.h>
#include <string.h>

#include "backends/cpu/gemm_tiles.h"
#include "backends/cpu/onednn.h"
#include "core/error.h"
#include "core/tensor_impl.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool has_dt[KN_DTYPE_COUNT];

static dnnl_data_type_t dnnl_type(kn_dtype dt) {
    switch (dt) {
    case KN_F32: return dnnl_f32;
    case KN_BF16: return dnnl_bf16;
    case KN_F16: return dnnl_f16;
    default: return dnnl_data_type_undef;
    }
}

/* A primitive descriptor for C[batch, M, N] (+)= A[ab, M, K] B[bb, K, N] with these strides. */
static dnnl_status_t make_pd(dnnl_engine_t engine, dnnl_primitive_desc_t *pd, dnnl_data_type_t t, int64_t ab,
                             int64_t bb, int64_t batch, int64_t M, int64_t N, int64_t K, const int64_t as[3],
                             const int64_t bs[3], const int64_t cs[3], bool accumulate) {
    dnnl_memory_desc_t a_md, b_md, c_md;
    dnnl_matmul_desc_t desc;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t ops = NULL;
    dnnl_dims_t ad = {ab, M, K}, bd = {bb, K, N}, cd = {batch, M, N};
    dnnl_dims_t ast = {as[0], as[1], as[2]}, bst = {bs[0], bs[1], bs[2]}, cst = {cs[0], cs[1], cs[2]};
    dnnl_status_t s = dnnl_memory_desc_init_by_strides(&a_md, 3, ad, t, ast);
    if (s == dnnl_success) s = dnnl_memory_desc_init_by_strides(&b_md, 3, bd, t, bst);
    if (s == dnnl_success) s = dnnl_memory_desc_init_by_strides(&c_md, 3, cd, t, cst);
    if (s == dnnl_success) s = dnnl_matmul_desc_init(&desc, &a_md, &b_md, NULL, &c_md);
    if (s == dnnl_success && accumulate) { /* C += A B: a sum post-op */
        s = dnnl_primitive_attr_create(&attr);
        if (s == dnnl_success) s = dnnl_post_ops_create(&ops);
        if (s == dnnl_success) s = dnnl_post_ops_append_sum(ops, 1.0f);
        if (s == dnnl_success) s = dnnl_primitive_attr_set_post_ops(attr, ops);
    }
    if (s == dnnl_success) s = dnnl_primitive_desc_create(pd, &desc, attr, engine, NULL);
    dnnl_post_ops_destroy(ops);
    dnnl_primitive_attr_destroy(attr);
    return s;
}

/* A dtype is there when oneDNN has an implementation of a small product of it. */
static void find_dtypes(void) {
    dnnl_engine_t engine = kn_onednn_engine();
    const kn_dtype dts[] = {KN_F32, KN_BF16, KN_F16};
    for (int i = 0; engine && i < 3; i++) {
        dnnl_primitive_desc_t pd;
        const int64_t st[3] = {64, 8, 1};
        if (make_pd(engine, &pd, dnnl_type(dts[i]), 1, 1, 1, 8, 8, 8, st, st, st, false) == dnnl_success) {
            has_dt[dts[i]] = true;
            dnnl_primitive_desc_destroy(pd);
        }
    }
}

bool kn_gemm_onednn_has(kn_dtype dt) {
    pthread_once(&once, find_dtypes);
    return dt >= 0 && dt < KN_DTYPE_COUNT && has_dt[dt];
}

static kn_gemm_result run(dnnl_engine_t engine, dnnl_primitive_desc_t pd, const void *a, const void *b, void *c) {
    dnnl_primitive_t prim = NULL;
    dnnl_stream_t stream = NULL;
    dnnl_memory_t mem[3] = {NULL, NULL, NULL};
    const dnnl_query_t q[3] = {dnnl_query_src_md, dnnl_query_weights_md, dnnl_query_dst_md};
    void *ptr[3] = {(void *)a, (void *)b, c};
    dnnl_status_t s = dnnl_primitive_create(&prim, pd);
    if (s == dnnl_success) s = dnnl_stream_create(&stream, engine, dnnl_stream_default_flags);
    for (int i = 0; i < 3 && s == dnnl_success; i++)
        s = dnnl_memory_create(&mem[i], dnnl_primitive_desc_query_md(pd, q[i], 0), engine, ptr[i]);
    if (s == dnnl_success) {
        dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, mem[0]}, {DNNL_ARG_WEIGHTS, mem[1]}, {DNNL_ARG_DST, mem[2]}};
        s = dnnl_primitive_execute(prim, stream, 3, args);
    }
    if (s == dnnl_success) s = dnnl_stream_wait(stream);
    for (int i = 0; i < 3; i++) dnnl_memory_destroy(mem[i]);
    dnnl_stream_destroy(stream);
    dnnl_primitive_destroy(prim);
    return s == dnnl_success ? KN_GEMM_DONE : s == dnnl_out_of_memory ? KN_GEMM_NO_MEMORY : KN_GEMM_FAILED;
}

/* The onednn provider's block (gemm_tiles.h), on the calling thread. */
kn_gemm_result kn_gemm_onednn_block(const kn_gemm_block *k) {
    dnnl_engine_t engine = kn_onednn_engine();
    if (!engine) return KN_GEMM_TURNED_DOWN;
    const int64_t M = k->M, N = k->N, K = k->K;
    if (K == 0) { /* no products to sum: zeros, which are all-zero bits in every float dtype */
        const size_t es = kn_dtype_size(k->dt);
        for (int64_t bi = 0; bi < k->batches && !k->accumulate; bi++)
            for (int64_t i = 0; i < M; i++) memset((char *)k->c + es * (size_t)(bi * k->c_bs + i * k->ldc), 0, es * (size_t)N);
        return KN_GEMM_DONE;
    }
    int64_t as[3] = {k->a_bs, k->ars, k->acs}, bs[3] = {k->b_bs, k->brs, k->bcs}, cs[3] = {k->c_bs, k->ldc, 1};
    /* oneDNN wants positive strides of the dims it walks (a dim of one may have any). */
    if ((as[1] <= 0 && M > 1) || as[2] <= 0 || bs[1] <= 0 || (bs[2] <= 0 && N > 1)) return KN_GEMM_TURNED_DOWN;
    if (as[1] <= 0) as[1] = K * as[2];
    if (bs[2] <= 0) bs[2] = 1;
    if (cs[1] <= 0) cs[1] = N;
    const int64_t ab = k->a_bs > 0 ? k->batches : 1, bb = k->b_bs > 0 ? k->batches : 1;
    if (as[0] <= 0) as[0] = M * K * as[2] + M * as[1];
    if (bs[0] <= 0) bs[0] = K * bs[1] + N * bs[2];
    if (cs[0] <= 0) cs[0] = M * cs[1];
    dnnl_primitive_desc_t pd;
    dnnl_status_t s = make_pd(engine, &pd, dnnl_type(k->dt), ab, bb, k->batches, M, N, K, as, bs, cs, k->accumulate);
    if (s == dnnl_unimplemented || s == dnnl_invalid_arguments) return KN_GEMM_TURNED_DOWN;
    if (s != dnnl_success) return KN_GEMM_FAILED;
    kn_gemm_result r = run(engine, pd, k->a, k->b, k->c);
    dnnl_primitive_desc_destroy(pd);
    return r;
}

kn_status kn_gemm_onednn(const kn_tensor *a, const kn_tensor *b, kn_tensor *out, int64_t batches, int64_t M,
                         int64_t N, int64_t K) {
    if (!kn_gemm_onednn_has(out->dtype)) return KN_ERR_UNSUPPORTED;
    switch (kn_gemm_tensors(a, b, out, batches, M, N, K, kn_gemm_onednn_block)) {
    case KN_GEMM_DONE: return KN_OK;
    case KN_GEMM_TURNED_DOWN: return KN_ERR_UNSUPPORTED;
    case KN_GEMM_NO_MEMORY: return kn_error(KN_ERR_OOM, "matmul: oneDNN is out of memory");
    default: return kn_error(KN_ERR_INTERNAL, "matmul: oneDNN failed");
    }
}

#else /* no oneDNN in this build */

bool kn_gemm_onednn_has(kn_dtype dt) { return false; }
kn_gemm_result kn_gemm_onednn_block(const kn_gemm_block *blk) { return KN_GEMM_TURNED_DOWN; }
kn_status kn_gemm_onednn(const kn_tensor *a, const kn_tensor *b, kn_tensor *out, int64_t batches, int64_t M,
                         int64_t N, int64_t K) {
    return KN_ERR_UNSUPPORTED;
}

#endif
