/* The matmul provider table: KILN_GEMM, the fixed defaults per dtype, the counters, and the
 * reference loop. */
#include "backends/cpu/gemm_provider.h"

#include <cblas.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/cpu/cpu_kernels.h"
#include "core/error.h"
#include "core/tensor_impl.h"

static const char *const provider_names[KN_GEMM_PROVIDER_COUNT] = {"openblas", "onednn", "ref"};

const char *kn_gemm_provider_name(kn_gemm_provider p) {
    return p >= 0 && p < KN_GEMM_PROVIDER_COUNT ? provider_names[p] : "?";
}

/* KILN_GEMM as read: FORCED_UNREAD until first use, FORCED_NONE when unset or empty,
 * FORCED_BAD for a value that names no provider, else the provider. */
enum { FORCED_UNREAD = -3, FORCED_BAD = -2, FORCED_NONE = -1 };
static int forced = FORCED_UNREAD;

static int read_forced(void) {
    int f = __atomic_load_n(&forced, __ATOMIC_ACQUIRE);
    if (f != FORCED_UNREAD) return f;
    const char *env = getenv("KILN_GEMM");
    f = env && *env ? FORCED_BAD : FORCED_NONE;
    for (int p = 0; env && p < KN_GEMM_PROVIDER_COUNT; p++)
        if (strcmp(env, provider_names[p]) == 0) f = p;
    __atomic_store_n(&forced, f, __ATOMIC_RELEASE);
    return f;
}

void kn_gemm_reload(void) { __atomic_store_n(&forced, FORCED_UNREAD, __ATOMIC_RELEASE); }

bool kn_gemm_has(kn_gemm_provider p, kn_dtype dt) {
    if (!kn_dtype_is_float(dt)) return false;
    return p == KN_GEMM_ONEDNN ? kn_gemm_onednn_has(dt) : p == KN_GEMM_OPENBLAS || p == KN_GEMM_REF;
}

bool kn_gemm_openblas_runs_avx512(void) {
    if (!__builtin_cpu_supports("avx512f")) return false;
    char core[64];
    snprintf(core, sizeof core, "%s", openblas_get_corename());
    for (char *c = core; *c; c++) *c = (char)tolower((unsigned char)*c);
    return strstr(core, "skylakex") || strstr(core, "cooperlake") || strstr(core, "sapphire");
}

/* f32: openblas where it runs AVX-512 kernels on an AVX-512 CPU (level with oneDNN there), else
 * onednn: Debian's OpenBLAS 0.3.21 runs its Haswell kernels on AMD Zen 4 at about half
 * oneDNN's rate, and on an AVX2-only Zen 1 its 2-thread panels of model-sized products (128
 * rows, 288-768 wide) ran at 20-27 GFLOP/s against oneDNN's 59-63 (equal from 2048 wide). f64:
 * openblas; bf16 and f16: onednn where oneDNN has the dtype (only on a CPU whose ISA has it:
 * AVX512-BF16, AMX or AVX512-FP16, where it ran 2.5-4x widened OpenBLAS), else openblas. Fixed
 * rules rather than a timing, so a machine gives the same results in every run (exact resume). */
static kn_gemm_provider default_for(kn_dtype dt) {
    if (dt == KN_F32) return kn_gemm_onednn_has(dt) && !kn_gemm_openblas_runs_avx512() ? KN_GEMM_ONEDNN : KN_GEMM_OPENBLAS;
    return (dt == KN_BF16 || dt == KN_F16) && kn_gemm_onednn_has(dt) ? KN_GEMM_ONEDNN : KN_GEMM_OPENBLAS;
}

static kn_gemm_counts counts;

kn_status kn_gemm_forced(kn_gemm_provider *out) {
    int f = read_forced();
    if (f == FORCED_BAD)
        return kn_error(KN_ERR_ARG, "KILN_GEMM=%s names no matmul provider (openblas, onednn or ref)",
                        getenv("KILN_GEMM") ? getenv("KILN_GEMM") : "");
    *out = f == FORCED_NONE ? KN_GEMM_PROVIDER_COUNT : (kn_gemm_provider)f;
    return KN_OK;
}

static kn_status choose(kn_dtype dt, kn_gemm_provider *out, bool *fell_back) {
    kn_gemm_provider f = KN_GEMM_PROVIDER_COUNT;
    kn_status st = kn_gemm_forced(&f);
    *fell_back = false;
    if (st != KN_OK) return st;
    *fell_back = f != KN_GEMM_PROVIDER_COUNT && !kn_gemm_has(f, dt);
    *out = f != KN_GEMM_PROVIDER_COUNT && !*fell_back ? f : default_for(dt);
    return KN_OK;
}

kn_status kn_gemm_choice(kn_dtype dt, kn_gemm_provider *out) {
    bool fell_back;
    return choose(dt, out, &fell_back);
}

kn_status kn_gemm_select(kn_dtype dt, kn_gemm_provider *out) {
    bool fell_back;
    kn_status st = choose(dt, out, &fell_back);
    if (st != KN_OK) return st;
    __atomic_fetch_add(&counts.selected[*out][dt], 1, __ATOMIC_RELAXED);
    if (fell_back) kn_gemm_count_fallback(dt);
    return KN_OK;
}

kn_status kn_gemm_select_block(kn_dtype dt, kn_gemm_block_fn *out) {
    kn_gemm_provider p = KN_GEMM_OPENBLAS;
    kn_status st = kn_gemm_choice(dt, &p);
    *out = p == KN_GEMM_ONEDNN ? kn_gemm_onednn_block : kn_gemm_openblas_block;
    return st;
}

void kn_gemm_count_fallback(kn_dtype dt) { __atomic_fetch_add(&counts.fallbacks[dt], 1, __ATOMIC_RELAXED); }

void kn_gemm_counts_read(kn_gemm_counts *table, kn_gemm_counts *out) {
    for (int p = 0; p < KN_GEMM_PROVIDER_COUNT; p++)
        for (int d = 0; d < KN_DTYPE_COUNT; d++)
            out->selected[p][d] = __atomic_load_n(&table->selected[p][d], __ATOMIC_RELAXED);
    for (int d = 0; d < KN_DTYPE_COUNT; d++)
        out->fallbacks[d] = __atomic_load_n(&table->fallbacks[d], __ATOMIC_RELAXED);
}

void kn_gemm_counts_clear(kn_gemm_counts *table) {
    for (int p = 0; p < KN_GEMM_PROVIDER_COUNT; p++)
        for (int d = 0; d < KN_DTYPE_COUNT; d++) __atomic_store_n(&table->selected[p][d], 0, __ATOMIC_RELAXED);
    for (int d = 0; d < KN_DTYPE_COUNT; d++) __atomic_store_n(&table->fallbacks[d], 0, __ATOMIC_RELAXED);
}

void kn_gemm_counts_get(kn_gemm_counts *out) { kn_gemm_counts_read(&counts, out); }
void kn_gemm_counts_reset(void) { kn_gemm_counts_clear(&counts); }

int64_t kn_gemm_batch_offset(const kn_tensor *t, int64_t bi) {
    int64_t off = 0;
    for (int d = t->ndim - 3; d >= 0; d--) {
        off += (bi % t->shape[d]) * t->stride[d];
        bi /= t->shape[d];
    }
    return off;
}

static double load(const char *base, kn_dtype dt, int64_t i) {
    switch (dt) {
    case KN_F32: return ((const float *)base)[i];
    case KN_F64: return ((const double *)base)[i];
    case KN_F16: return kn_half_to_f32_f16(((const uint16_t *)base)[i]);
    default: return kn_half_to_f32_bf16(((const uint16_t *)base)[i]);
    }
}

void kn_gemm_ref(const kn_tensor *a, const kn_tensor *b, kn_tensor *out, int64_t batches, int64_t M, int64_t N,
                 int64_t K) {
    const int nd = out->ndim;
    const int64_t ars = a->stride[nd - 2], acs = a->stride[nd - 1], brs = b->stride[nd - 2], bcs = b->stride[nd - 1];
    const char *a0 = kn_tensor_data(a), *b0 = kn_tensor_data(b);
    void *c = kn_tensor_data(out);
    const kn_dtype dt = out->dtype;
    for (int64_t bi = 0; bi < batches; bi++) {
        const int64_t ao = kn_gemm_batch_offset(a, bi), bo = kn_gemm_batch_offset(b, bi);
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double acc = 0;
                for (int64_t k = 0; k < K; k++)
                    acc += load(a0, dt, ao + i * ars + k * acs) * load(b0, dt, bo + k * brs + j * bcs);
                kn_cpu_store_f64(c, dt, (bi * M + i) * N + j, acc);
            }
    }
}
