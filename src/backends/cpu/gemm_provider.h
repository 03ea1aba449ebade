/* Which library runs a float matrix product of the cpu backend, per dtype: openblas (f32/f64
 * directly, 16-bit floats widened to f32; k_linalg.c), onednn (f32, bf16 and f16 where this
 * oneDNN has them; gemm_onednn.c) or ref (a plain loop with float64 accumulation, for checks).
 * KILN_GEMM=openblas|onednn|ref forces one for every dtype it has; a dtype it lacks takes the
 * default and counts a fallback. The default (docs/decisions.md, "oneDNN as a matmul provider",
 * "kiln's thread pool"): f32 on openblas where it runs AVX-512 kernels on an AVX-512 CPU, else
 * on onednn (a fixed rule, so f32 results are the same in every run on a machine);
 * f64 on openblas; bf16 and f16 on onednn where oneDNN has the dtype (a CPU whose ISA has it),
 * else openblas. The decode path (k_linalg_skinny.c) and integer products stay outside. */
#ifndef KILN_BACKENDS_CPU_GEMM_PROVIDER_H
#define KILN_BACKENDS_CPU_GEMM_PROVIDER_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/cpu/gemm_tiles.h"
#include "core/runtime_impl.h"

typedef enum kn_gemm_provider {
    KN_GEMM_OPENBLAS,
    KN_GEMM_ONEDNN,
    KN_GEMM_REF,
    KN_GEMM_PROVIDER_COUNT
} kn_gemm_provider;

const char *kn_gemm_provider_name(kn_gemm_provider p);

/* The provider for a product of dtype dt (a float dtype): the forced one if it has dt, else the
 * default. Counts the selection, and a fallback when the forced one lacks dt. An unknown
 * KILN_GEMM is KN_ERR_ARG naming the value and the choices. */
kn_status kn_gemm_select(kn_dtype dt, kn_gemm_provider *out);
/* The block function (gemm_tiles.h) of the provider kn_gemm_select picks for dt, for a kernel
 * whose products are its own pieces (convolution's im2col): onednn's or openblas's (which
 * also stands in for ref there). Not counted here: such kernels keep counts of their own. */
kn_status kn_gemm_select_block(kn_dtype dt, kn_gemm_block_fn *out);
/* The provider a product of dt would get now, without counting (kiln info, tests). */
kn_status kn_gemm_choice(kn_dtype dt, kn_gemm_provider *out);
/* Counts a fallback of a product the chosen provider turned down at run time (a layout it
 * cannot take); the product then runs on openblas. */
void kn_gemm_count_fallback(kn_dtype dt);

/* Selections per provider and dtype, and fallbacks per dtype, since start or the last reset. */
typedef struct kn_gemm_counts {
    int64_t selected[KN_GEMM_PROVIDER_COUNT][KN_DTYPE_COUNT];
    int64_t fallbacks[KN_DTYPE_COUNT];
} kn_gemm_counts;
void kn_gemm_counts_get(kn_gemm_counts *out);
void kn_gemm_counts_reset(void);
/* A counts table (matmul's, convolution's) read into out, or zeroed, entry by entry atomically. */
void kn_gemm_counts_read(kn_gemm_counts *table, kn_gemm_counts *out);
void kn_gemm_counts_clear(kn_gemm_counts *table);
/* The provider KILN_GEMM forces (KN_GEMM_PROVIDER_COUNT when it is unset or empty), for other
 * op families that follow it (convolution); KN_ERR_ARG for a value that names no provider. */
kn_status kn_gemm_forced(kn_gemm_provider *out);
/* Reads KILN_GEMM again (it is read once, at first use; tests change it). */
void kn_gemm_reload(void);

/* Whether the CPU has AVX-512 and OpenBLAS runs AVX-512 kernels on it (Debian's 0.3.21 runs its
 * Haswell kernels on AMD Zen 4). */
bool kn_gemm_openblas_runs_avx512(void);

/* Whether the provider can run products of dt in this build on this CPU. */
bool kn_gemm_has(kn_gemm_provider p, kn_dtype dt);

/* The openblas provider (k_linalg.c): a and b have out's rank; out is contiguous. */
kn_status kn_gemm_openblas(kn_tensor *a, kn_tensor *b, kn_tensor *out, int64_t batches, int64_t M, int64_t N,
                           int64_t K);

/* The plain loop: C[b] = A[b] B[b] with float64 sums, any float dtype, any strides. a and b
 * have out's rank; out is contiguous. */
void kn_gemm_ref(const kn_tensor *a, const kn_tensor *b, kn_tensor *out, int64_t batches, int64_t M, int64_t N,
                 int64_t K);

/* oneDNN's matmul primitive (f32 accumulation, output in out's dtype). KN_OK when it ran;
 * KN_ERR_UNSUPPORTED when oneDNN turns the layout down (the caller falls back); other errors
 * as they come. Without oneDNN in the build: always KN_ERR_UNSUPPORTED. */
kn_status kn_gemm_onednn(const kn_tensor *a, const kn_tensor *b, kn_tensor *out, int64_t batches, int64_t M,
                         int64_t N, int64_t K);
/* Whether oneDNN is built in and has dt (a small primitive is created once per dtype to see). */
bool kn_gemm_onednn_has(kn_dtype dt);

/* Element offset of the bi-th matrix of a [..., R, C] operand (broadcast batch dims of size 1). */
int64_t kn_gemm_batch_offset(const kn_tensor *t, int64_t bi);

#endif
