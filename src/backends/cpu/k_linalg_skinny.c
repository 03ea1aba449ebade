/* Products of a few rows (decode) with a weight stored [N, K] (a linear layer's weight, used
 * transposed), in f32, bf16 or f16: each weight row streams through once per row of a, 16-bit
 * ones widened to f32 in registers, tiles of weight rows spread over kiln's pool. Widening the
 * whole matrix into an f32 copy first, as the general 16-bit path does, writes twice the bytes
 * the product reads, on every call. Sums are f32. The AVX-512
 * tile is chosen at run time, so that a library built for a portable baseline (an installed
 * kiln) has it too. */
#include <stdbool.h>
#include <stdlib.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define KN_SKINNY_AVX512 1
#endif

#include "backends/cpu/k_linalg_skinny.h"
#include "core/thread_pool.h"

enum { ROWS = 4 }; /* weight rows per tile: independent FMA chains, and a tile that stays in L1 */

static inline float load_one(kn_dtype dt, const void *w, int64_t i) {
    switch (dt) {
    case KN_BF16: return kn_half_to_f32_bf16(((const uint16_t *)w)[i]);
    case KN_F16: return kn_half_to_f32_f16(((const uint16_t *)w)[i]);
    default: return ((const float *)w)[i];
    }
}

#ifdef KN_SKINNY_AVX512
/* The sums of a full tile over the multiples of 16 of K, 16 lanes a row; returns how far it got. */
__attribute__((target("avx512f"))) static int64_t dot_rows_avx512(kn_dtype dt, const float *a, const char *w,
                                                                  int64_t ldw_bytes, int64_t K, float *y) {
    int64_t k = 0;
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    const char *w0 = w, *w1 = w + ldw_bytes, *w2 = w + 2 * ldw_bytes, *w3 = w + 3 * ldw_bytes;
    const int64_t es = dt == KN_F32 ? 4 : 2;
#define KN_WIDEN(p)                                                                                        \
    (dt == KN_F32    ? _mm512_loadu_ps((const float *)(const void *)(p))                                   \
     : dt == KN_BF16 ? _mm512_castsi512_ps(_mm512_slli_epi32(                                              \
                           _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(p))), 16)) \
                     : _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(p))))
    for (; k + 16 <= K; k += 16) {
        __m512 x = _mm512_loadu_ps(a + k);
        s0 = _mm512_fmadd_ps(x, KN_WIDEN(w0 + k * es), s0);
        s1 = _mm512_fmadd_ps(x, KN_WIDEN(w1 + k * es), s1);
        s2 = _mm512_fmadd_ps(x, KN_WIDEN(w2 + k * es), s2);
        s3 = _mm512_fmadd_ps(x, KN_WIDEN(w3 + k * es), s3);
    }
#undef KN_WIDEN
    y[0] = _mm512_reduce_add_ps(s0), y[1] = _mm512_reduce_add_ps(s1);
    y[2] = _mm512_reduce_add_ps(s2), y[3] = _mm512_reduce_add_ps(s3);
    return k;
}
#endif

/* y[r] = a . w_r for the ROWS (or fewer, nr) rows of a tile, over K elements. */
static void dot_rows(kn_dtype dt, const float *a, const char *w, int64_t ldw_bytes, int nr, int64_t K, float *y,
                     bool avx512) {
    int64_t k = 0;
#ifdef KN_SKINNY_AVX512
    if (avx512 && nr == ROWS) k = dot_rows_avx512(dt, a, w, ldw_bytes, K, y);
    else
#endif
    {
        for (int r = 0; r < nr; r++) y[r] = 0;
    }
    /* The tail (and the whole product where no vector path applies): 8 partial sums per row,
     * which the compiler keeps in one vector. */
    for (int r = 0; r < nr; r++) {
        const char *wr = w + r * ldw_bytes;
        float part[8] = {0};
        int64_t j = k;
        for (; j + 8 <= K; j += 8)
            for (int l = 0; l < 8; l++) part[l] += a[j + l] * load_one(dt, wr, j + l);
        float s = 0;
        for (int l = 0; l < 8; l++) s += part[l];
        for (; j < K; j++) s += a[j] * load_one(dt, wr, j);
        y[r] += s;
    }
}

typedef struct skinny_job {
    kn_dtype dt;
    const float *af; /* a widened, [M, K] */
    const char *w;
    void *c;
    int64_t ldw, M, N, K;
    bool avx512;
} skinny_job;

/* Tiles [begin, end) of ROWS weight rows each; a tile's rows stay in cache across a's M rows. */
static void skinny_tiles(void *ctx, int64_t begin, int64_t end, int chunk) {
    const skinny_job *j = ctx;
    const int64_t es = j->dt == KN_F32 ? 4 : 2;
    for (int64_t t = begin; t < end; t++) {
        const int64_t n0 = t * ROWS;
        const int nr = j->N - n0 < ROWS ? (int)(j->N - n0) : ROWS;
        for (int64_t i = 0; i < j->M; i++) {
            float y[ROWS];
            dot_rows(j->dt, j->af + i * j->K, j->w + n0 * j->ldw * es, j->ldw * es, nr, j->K, y, j->avx512);
            for (int r = 0; r < nr; r++) {
                int64_t o = i * j->N + n0 + r;
                if (j->dt == KN_F32) ((float *)j->c)[o] = y[r];
                else
                    ((uint16_t *)j->c)[o] =
                        j->dt == KN_BF16 ? kn_half_from_f32_bf16(y[r]) : kn_half_from_f32_f16(y[r]);
            }
        }
    }
}

bool kn_cpu_skinny(kn_dtype dt, const void *a, int64_t ars, int64_t acs, const void *w, int64_t ldw, void *c,
                   int64_t M, int64_t N, int64_t K) {
    float *af = malloc(sizeof(float) * (size_t)(M * K));
    if (!af) return false;
    for (int64_t i = 0; i < M; i++)
        for (int64_t k = 0; k < K; k++) af[i * K + k] = load_one(dt, a, i * ars + k * acs);
#ifdef KN_SKINNY_AVX512
    const bool avx512 = __builtin_cpu_supports("avx512f");
#else
    const bool avx512 = false;
#endif
    skinny_job job = {dt, af, w, c, ldw, M, N, K, avx512};
    const int64_t tiles = (N + ROWS - 1) / ROWS;
    kn_parallel_for(tiles, M * K * ROWS / 4, skinny_tiles, &job);
    free(af);
    return true;
}
