/* The onednn matmul provider: oneDNN's matmul primitive over kiln's strided operands, described
 * by memory descriptors with strides (no copies), f32 accumulation, output in the product's
 * dtype. Batches whose matrices lie at one stride from each other are one 3-D primitive; other
 * batch layouts run one matrix at a time. oneDNN caches the compiled primitives by descriptor.
 * On Linux a process must ask the kernel for AMX's tile state before AMX code runs; kiln asks
 * once, before oneDNN first dispatches, on a CPU that has AMX (docs/decisions.md). */
#include "backends/cpu/gemm_provider.h"

#ifdef KILN_HAVE_ONEDNN
#include <cpuid.h>
#include <errno.h>
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/error.h"
#include "core/tensor_impl.h"

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static pthread_once_t once = PTHREAD_ONCE_INIT;
static dnnl_engine_t engine;
static char amx_state[96] = "not needed (no AMX)";
static bool has_dt[KN_DTYPE_COUNT];

static bool cpu_has_amx(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    return (d >> 24) & 1; /* AMX-TILE */
}

static dnnl_data_type_t dnnl_type(kn_dtype dt) {
    switch (dt) {
    case KN_F32: return dnnl_f32;
    case KN_BF16: return dnnl_bf16;
    case KN_F16: return dnnl_f16;
    default: return dnnl_data_type_undef;
    }
}

/* A primitive descriptor for C[batch, M, N] = A[ab, M, K] B[bb, K, N] with these strides. */
static dnnl_status_t make_pd(dnnl_primitive_desc_t *pd, dnnl_data_type_t t, int64_t ab, int64_t bb, int64_t batch,
                             int64_t M, int64_t N, int64_t K, const int64_t as[3], const int64_t bs[3]) {
    dnnl_memory_desc_t a_md, b_md, c_md;
    dnnl_matmul_desc_t desc;
    dnnl_dims_t ad = {ab, M, K}, bd = {bb, K, N}, cd = {batch, M, N}, cs = {M * N, N, 1};
    dnnl_dims_t ast = {as[0], as[1], as[2]}, bst = {bs[0], bs[1], bs[2]};
    dnnl_status_t s = dnnl_memory_desc_init_by_strides(&a_md, 3, ad, t, ast);
    if (s == dnnl_success) s = dnnl_memory_desc_init_by_strides(&b_md, 3, bd, t, bst);
    if (s == dnnl_success) s = dnnl_memory_desc_init_by_strides(&c_md, 3, cd, t, cs);
    if (s == dnnl_success) s = dnnl_matmul_desc_init(&desc, &a_md, &b_md, NULL, &c_md);
    if (s == dnnl_success) s = dnnl_primitive_desc_create(pd, &desc, NULL, engine, NULL);
    return s;
}

static void start(void) {
    if (cpu_has_amx()) {
        if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0)
            snprintf(amx_state, sizeof amx_state, "granted");
        else {
            snprintf(amx_state, sizeof amx_state, "refused by the kernel (errno %d, %s)", errno, strerror(errno));
            /* oneDNN must not dispatch to AMX code that would fault. */
            dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx512_core_bf16);
            fprintf(stderr, "kiln: warning: AMX permission %s; oneDNN matmul uses AVX512-BF16\n", amx_state);
        }
    }
    if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success) {
        engine = NULL;
        return;
    }
    /* A dtype is there when oneDNN has an implementation of a small product of it. */
    const kn_dtype dts[] = {KN_F32, KN_BF16, KN_F16};
    for (int i = 0; i < 3; i++) {
        dnnl_primitive_desc_t pd;
        const int64_t s[3] = {64, 8, 1};
        if (make_pd(&pd, dnnl_type(dts[i]), 1, 1, 1, 8, 8, 8, s, s) == dnnl_success) {
            has_dt[dts[i]] = true;
            dnnl_primitive_desc_destroy(pd);
        }
    }
}

bool kn_gemm_onednn_has(kn_dtype dt) {
    pthread_once(&once, start);
    return engine && dt >= 0 && dt < KN_DTYPE_COUNT && has_dt[dt];
}

const char *kn_gemm_onednn_isa(void) {
    pthread_once(&once, start);
    switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "other";
    }
}

const char *kn_gemm_onednn_amx(void) {
    pthread_once(&once, start);
    return amx_state;
}

/* The batch stride of t when its b-th matrix is at b * stride for every b (0: one matrix
 * shared by all), or -1. */
static int64_t uniform_batch_stride(const kn_tensor *t, int64_t batches) {
    if (batches == 1) return 0;
    const int64_t s = kn_gemm_batch_offset(t, 1);
    for (int64_t bi = 2; bi < batches; bi++)
        if (kn_gemm_batch_offset(t, bi) != bi * s) return -1;
    return s;
}

static kn_status run(dnnl_primitive_desc_t pd, const char *a, const char *b, char *c) {
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
    if (s == dnnl_out_of_memory) return kn_error(KN_ERR_OOM, "matmul: oneDNN is out of memory");
    return s == dnnl_success ? KN_OK : kn_error(KN_ERR_INTERNAL, "matmul: oneDNN failed (status %d)", (int)s);
}

kn_status kn_gemm_onednn(const kn_tensor *a, const kn_tensor *b, kn_tensor *out, int64_t batches, int64_t M,
                         int64_t N, int64_t K) {
    const kn_dtype dt = out->dtype;
    if (!kn_gemm_onednn_has(dt)) return KN_ERR_UNSUPPORTED;
    const int nd = out->ndim;
    const size_t es = kn_dtype_size(dt);
    char *c = kn_tensor_data(out);
    if (K == 0) { /* no products to sum: zeros, which are all-zero bits in every float dtype */
        memset(c, 0, es * (size_t)(batches * M * N));
        return KN_OK;
    }
    int64_t as[3] = {0, a->stride[nd - 2], a->stride[nd - 1]}, bs[3] = {0, b->stride[nd - 2], b->stride[nd - 1]};
    /* oneDNN wants positive strides of the dims it walks (a dim of one may have any). */
    if ((as[1] <= 0 && M > 1) || (as[2] <= 0) || (bs[1] <= 0) || (bs[2] <= 0 && N > 1)) return KN_ERR_UNSUPPORTED;
    if (as[1] <= 0) as[1] = K * as[2];
    if (bs[2] <= 0) bs[2] = 1;
    const int64_t sa = uniform_batch_stride(a, batches), sb = uniform_batch_stride(b, batches);
    const bool one = sa >= 0 && sb >= 0; /* all batches as one 3-D product */
    const int64_t ab = one && sa > 0 ? batches : 1, bb = one && sb > 0 ? batches : 1;
    as[0] = sa > 0 && one ? sa : M * K, bs[0] = sb > 0 && one ? sb : K * N;
    dnnl_primitive_desc_t pd;
    dnnl_status_t s = make_pd(&pd, dnnl_type(dt), ab, bb, one ? batches : 1, M, N, K, as, bs);
    if (s == dnnl_unimplemented || s == dnnl_invalid_arguments) return KN_ERR_UNSUPPORTED;
    if (s != dnnl_success)
        return kn_error(KN_ERR_INTERNAL, "matmul: oneDNN turned the product down (status %d)", (int)s);
    const char *a0 = kn_tensor_data(a), *b0 = kn_tensor_data(b);
    kn_status st = KN_OK;
    for (int64_t bi = 0; bi < (one ? 1 : batches) && st == KN_OK; bi++)
        st = run(pd, a0 + es * (size_t)kn_gemm_batch_offset(a, bi), b0 + es * (size_t)kn_gemm_batch_offset(b, bi),
                 c + es * (size_t)(bi * M * N));
    dnnl_primitive_desc_destroy(pd);
    return st;
}

#else /* no oneDNN in this build */

bool kn_gemm_onednn_has(kn_dtype dt) { return false; }
const char *kn_gemm_onednn_isa(void) { return "not built in"; }
const char *kn_gemm_onednn_amx(void) { return "not built in"; }
kn_status kn_gemm_onednn(const kn_tensor *a, const kn_tensor *b, kn_tensor *out, int64_t batches, int64_t M,
                         int64_t N, int64_t K) {
    return KN_ERR_UNSUPPORTED;
}

#endif
