/* Products of a few rows (decode) with a weight stored [N, K] (a linear layer's weight, used
 * transposed), in f32, bf16 or f16: each weight row streams through once per row of a, tiles of
 * weight rows spread over kiln's pool. Widening the whole matrix into an f32 copy first, as the
 * general 16-bit path does, writes twice the bytes the product reads, on every call. Sums are
 * f32. The vector tiles are chosen at run time, so that a library built for a portable
 * baseline (an installed kiln) has them too:
 * - bf16 on a CPU with AVX512-BF16 multiplies pairs of bf16 as they are (vdpbf16ps): no widening
 *   of either operand, half the instructions per weight byte of the widening tile;
 * - otherwise 16-bit weights are widened to f32 in registers, against rows of a widened once,
 *   in AVX-512 or, on a CPU without it, AVX2 with FMA and F16C (the scalar tile ran bf16 at half
 *   f32's rate and f16 at a third, on weights of half the bytes).
 * f32 rows of a with unit stride are read in place, so a decode step allocates nothing. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define KN_SKINNY_X86 1
#endif

#include "backends/cpu/k_linalg_skinny.h"
#include "core/half.h"
#include "core/thread_pool.h"

/* Weight rows per tile: independent FMA chains sharing each load of a. The f32 tile streams
 * best with 8 (110M shape: ~10% over 4); the bf16 pair tile, doing twice the elements per
 * instruction, with 4 (finer tiles balance the chunks of the small products). */
enum { ROWS = 8, ROWS_BF16 = 4 };
enum { STAGE_ON_STACK = 4096 }; /* rows of a up to this many elements in all are staged on the stack */
/* Weight rows at most this long (bytes) have the next tile prefetched while a tile runs: a tile
 * of short rows is many short streams, which the hardware prefetcher follows too late (Zen 1,
 * 2 threads, weights cold: the 288-wide classifier 1.3x, bf16 products up to 2x); on longer
 * rows it keeps up alone, and the extra hints cost (f32 rows of 8 KB: ~10%). */
enum { PREFETCH_ROW_BYTES = 2048 };

static inline float load_one(kn_dtype dt, const void *w, int64_t i) {
    switch (dt) {
    case KN_BF16: return kn_half_to_f32_bf16(((const uint16_t *)w)[i]);
    case KN_F16: return kn_half_to_f32_f16(((const uint16_t *)w)[i]);
    default: return ((const float *)w)[i];
    }
}

/* f32 lanes of a widening tile's vectors; bf16 weights go 2 * lanes elements a step (below). */
static int tile_lanes(kn_skinny_tile t) { return t == KN_SKINNY_AVX512 ? 16 : t == KN_SKINNY_AVX2 ? 8 : 0; }

#ifdef KN_SKINNY_X86
__attribute__((target("avx2"))) static inline float reduce_add_avx2(__m256 v) {
    const __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
}

/* A widening tile for one instruction set: dot_rows_ISA sums n (8 or 4) weight rows (rows past
 * nr read row nr - 1 again, their sums dropped) with one FMA chain of LANES lanes a row, and
 * returns how far along K it got. f16 is widened by vcvtph2ps, LANES elements a step. bf16 goes
 * 2 * LANES a step: one full-width load holds LANES pairs, the even elements widened by a shift
 * and the odd by a mask (one instruction each, where vpmovzxwd + shift took two for half as
 * many); a is staged for it with each block's even elements before its odd ones. With next set,
 * the tile prefetches the next tile's bytes in step with its own. V is the vector type, P its
 * intrinsics' prefix, HLOAD the load of LANES 16-bit values, SI the integer vector's width. */
#define DOT_ROWS_TILE(ISA, TARGET, V, P, LANES, HLOAD, SI, REDUCE)                                                   \
    __attribute__((target(TARGET), always_inline)) static inline int64_t dot_rows_##ISA(                              \
        kn_dtype dt, const float *a, const char *w, int64_t ldw_bytes, int nr, int64_t K, float *y, const int n,     \
        const char *next) {                                                                                          \
        const int es = dt == KN_F32 ? 4 : 2, step = dt == KN_BF16 ? 2 * LANES : LANES;                               \
        V s[ROWS];                                                                                                   \
        for (int r = 0; r < n; r++) s[r] = P##_setzero_ps();                                                         \
        int64_t k = 0;                                                                                               \
        for (; k + step <= K; k += step) {                                                                           \
            if (next)                                                                                                \
                for (int b = 0; b < n * step * es; b += 64) _mm_prefetch(next + k * es * n + b, _MM_HINT_T0);       \
            const V x = P##_loadu_ps(a + k), xo = dt == KN_BF16 ? P##_loadu_ps(a + k + LANES) : x;                   \
            _Pragma("GCC unroll 8") for (int r = 0; r < n; r++) {                                                    \
                const void *p = w + (r < nr ? r : nr - 1) * ldw_bytes + k * es;                                      \
                if (dt == KN_BF16) {                                                                                 \
                    const __m##SI##i pairs = P##_loadu_si##SI(p);                                                    \
                    s[r] = P##_fmadd_ps(x, P##_castsi##SI##_ps(P##_slli_epi32(pairs, 16)), s[r]);                   \
                    s[r] = P##_fmadd_ps(                                                                             \
                        xo, P##_castsi##SI##_ps(P##_and_si##SI(pairs, P##_set1_epi32((int)0xffff0000u))), s[r]);     \
                } else {                                                                                             \
                    const V v = dt == KN_F32 ? P##_loadu_ps(p) : P##_cvtph_ps(HLOAD(p));                             \
                    s[r] = P##_fmadd_ps(x, v, s[r]);                                                                 \
                }                                                                                                    \
            }                                                                                                        \
        }                                                                                                            \
        for (int r = 0; r < n; r++) y[r] = REDUCE(s[r]);                                                             \
        return k;                                                                                                    \
    }                                                                                                                \
    DOT_ROWS_DTYPE(ISA, TARGET, f32, KN_F32)                                                                         \
    DOT_ROWS_DTYPE(ISA, TARGET, bf16, KN_BF16)                                                                       \
    DOT_ROWS_DTYPE(ISA, TARGET, f16, KN_F16)

/* The tile of one instruction set for one dtype, every size folded in: a full tile of ROWS rows,
 * or a partial one as tiles of 4 (whose rows take the same steps as in a full one). */
#define DOT_ROWS_DTYPE(ISA, TARGET, NAME, DT)                                                                        \
    __attribute__((target(TARGET))) static int64_t dot_rows_##ISA##_##NAME(                                          \
        const float *a, const char *w, int64_t ldw_bytes, int nr, int64_t K, float *y, const char *next) {           \
        if (nr == ROWS) return dot_rows_##ISA(DT, a, w, ldw_bytes, ROWS, K, y, ROWS, next);                          \
        int64_t k = 0;                                                                                               \
        for (int r0 = 0; r0 < nr; r0 += 4)                                                                           \
            k = dot_rows_##ISA(DT, a, w + r0 * ldw_bytes, ldw_bytes, nr - r0 < 4 ? nr - r0 : 4, K, y + r0, 4, NULL); \
        return k;                                                                                                    \
    }

DOT_ROWS_TILE(avx512, "avx512f", __m512, _mm512, 16, _mm256_loadu_si256, 512, _mm512_reduce_add_ps)
DOT_ROWS_TILE(avx2, "avx2,fma,f16c", __m256, _mm256, 8, _mm_loadu_si128, 256, reduce_add_avx2)

/* y[r] = a . w_r for the nr rows of a tile, bf16 a and w: pairs of products summed into f32
 * lanes by vdpbf16ps, 32 elements a step, the tail of K by masked loads. A partial tile reads
 * its last row again in place of the missing ones, whose sums are dropped. With next set, the
 * next tile is prefetched as in the widening tile. */
__attribute__((target("avx512f,avx512bw,avx512bf16"))) static void dot_rows_bf16(const uint16_t *a, const char *w,
                                                                                int64_t ldw_bytes, int nr,
                                                                                int64_t K, float *y,
                                                                                const char *next) {
    const uint16_t *wr[ROWS_BF16];
    __m512 s[ROWS_BF16];
    for (int r = 0; r < ROWS_BF16; r++) {
        wr[r] = (const uint16_t *)(const void *)(w + (r < nr ? r : nr - 1) * ldw_bytes);
        s[r] = _mm512_setzero_ps();
    }
    int64_t k = 0;
    for (; k + 32 <= K; k += 32) {
        if (next) /* the next tile's bytes in step with this one's, as in the widening tile */
            for (int b = 0; b < ROWS_BF16 * 64; b += 64) _mm_prefetch(next + k * 2 * ROWS_BF16 + b, _MM_HINT_T0);
        const __m512bh x = (__m512bh)_mm512_loadu_si512(a + k);
#pragma GCC unroll 4
        for (int r = 0; r < ROWS_BF16; r++) s[r] = _mm512_dpbf16_ps(s[r], x, (__m512bh)_mm512_loadu_si512(wr[r] + k));
    }
    if (k < K) {
        const __mmask32 m = (__mmask32)((1u << (K - k)) - 1);
        const __m512bh x = (__m512bh)_mm512_maskz_loadu_epi16(m, a + k);
        for (int r = 0; r < ROWS_BF16; r++)
            s[r] = _mm512_dpbf16_ps(s[r], x, (__m512bh)_mm512_maskz_loadu_epi16(m, wr[r] + k));
    }
    for (int r = 0; r < nr; r++) y[r] = _mm512_reduce_add_ps(s[r]);
}
#endif

/* A widening tile's rows for one dtype: how far along K it summed them (the rest is dot_rows's). */
typedef int64_t (*dot_rows_fn)(const float *a, const char *w, int64_t ldw_bytes, int nr, int64_t K, float *y,
                               const char *next);

/* The widening tile for tile and dt; NULL for the portable tile. */
static dot_rows_fn widening_tile(kn_skinny_tile tile, kn_dtype dt) {
#ifdef KN_SKINNY_X86
    if (tile == KN_SKINNY_AVX512) return dt == KN_F32 ? dot_rows_avx512_f32 : dt == KN_BF16 ? dot_rows_avx512_bf16 : dot_rows_avx512_f16;
    if (tile == KN_SKINNY_AVX2) return dt == KN_F32 ? dot_rows_avx2_f32 : dt == KN_BF16 ? dot_rows_avx2_bf16 : dot_rows_avx2_f16;
#else
    (void)tile, (void)dt;
#endif
    return NULL;
}

/* y[r] = a . w_r for the ROWS (or fewer, nr) rows of a tile, over K elements of f32 a (staged
 * as the tile wants it): the vector steps by the widening tile vec, the tail past them (the
 * whole row without one) with 8 partial sums per row, which the compiler keeps in one vector.
 * Every row's sum takes the same steps whatever its place in a tile, so that a row gives the
 * same f32 bits in a full tile and a partial one. */
static void dot_rows(kn_dtype dt, dot_rows_fn vec, const float *a, const char *w, int64_t ldw_bytes, int nr,
                     int64_t K, float *y, const char *next) {
    const int64_t k = vec ? vec(a, w, ldw_bytes, nr, K, y, next) : 0;
    if (vec && k == K) return; /* the vector steps covered the rows (their sums are in y) */
    for (int r = 0; r < nr; r++) {
        const char *wr = w + r * ldw_bytes;
        float part[8] = {0};
        int64_t j = k;
        if (k == 0) y[r] = 0;
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
    kn_skinny_tile tile;
    dot_rows_fn vec; /* the widening tile, if tile is one */
    const void *a; /* rows of a at stride lda: bf16 as given for KN_SKINNY_AVX512_BF16, else f32 */
    int64_t lda;
    const char *w;
    void *c;
    int64_t ldw, M, N, K;
    int rows; /* weight rows per tile */
} skinny_job;

/* Tiles [begin, end) of j->rows weight rows each; a tile's rows stay in cache across a's M rows. */
static void skinny_tiles(void *ctx, int64_t begin, int64_t end, int chunk) {
    (void)chunk;
    const skinny_job *j = ctx;
    const int64_t es = j->dt == KN_F32 ? 4 : 2;
    for (int64_t t = begin; t < end; t++) {
        const int64_t n0 = t * j->rows;
        const int nr = j->N - n0 < j->rows ? (int)(j->N - n0) : j->rows;
        const char *wt = j->w + n0 * j->ldw * es;
        /* The next tile's bytes are fetched during the first row of a (the others find them in
         * cache); only a full one, so that no hint points past the weight. */
        const char *next = j->ldw * es <= PREFETCH_ROW_BYTES && n0 + 2 * j->rows <= j->N ? wt + j->rows * j->ldw * es
                                                                                           : NULL;
        for (int64_t i = 0; i < j->M; i++) {
            float y[ROWS];
#ifdef KN_SKINNY_X86
            if (j->tile == KN_SKINNY_AVX512_BF16)
                dot_rows_bf16((const uint16_t *)j->a + i * j->lda, wt, j->ldw * es, nr, j->K, y, i == 0 ? next : NULL);
            else
#endif
                dot_rows(j->dt, j->vec, (const float *)j->a + i * j->lda, wt, j->ldw * es, nr, j->K, y,
                         i == 0 ? next : NULL);
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

#ifdef KN_SKINNY_X86
/* F16C by CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports has no "f16c". Asked once:
 * under a hypervisor CPUID traps, a few microseconds a call (~3% of a 15M decode token). */
static int f16c_state = -1; /* -1 not asked yet, else 0 or 1 */

static bool has_f16c(void) {
    int state = __atomic_load_n(&f16c_state, __ATOMIC_RELAXED);
    if (state < 0) {
        unsigned eax, ebx, ecx, edx;
        state = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
        __atomic_store_n(&f16c_state, state, __ATOMIC_RELAXED);
    }
    return state;
}
#endif

bool kn_cpu_skinny_has(kn_skinny_tile t) {
#ifdef KN_SKINNY_X86
    switch (t) {
    case KN_SKINNY_AVX512_BF16: return __builtin_cpu_supports("avx512bf16");
    case KN_SKINNY_AVX512: return __builtin_cpu_supports("avx512f");
    case KN_SKINNY_AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
    default: return true;
    }
#else
    return t == KN_SKINNY_PORTABLE;
#endif
}

static _Atomic kn_skinny_tile tile_limit = KN_SKINNY_AVX512_BF16;

void kn_cpu_skinny_limit(kn_skinny_tile t) { tile_limit = t; }

/* The widest tile the CPU has for dt, up to the limit (the bf16 pair tile takes only bf16). */
static kn_skinny_tile pick_tile(kn_dtype dt) {
    for (kn_skinny_tile t = tile_limit; t > KN_SKINNY_PORTABLE; t--)
        if ((t != KN_SKINNY_AVX512_BF16 || dt == KN_BF16) && kn_cpu_skinny_has(t)) return t;
    return KN_SKINNY_PORTABLE;
}

bool kn_cpu_skinny(kn_dtype dt, const void *a, int64_t ars, int64_t acs, const void *w, int64_t ldw, void *c,
                   int64_t M, int64_t N, int64_t K) {
    const kn_skinny_tile tile = pick_tile(dt);
    skinny_job job = {dt,  tile, widening_tile(tile, dt), a, ars, w, c, ldw, M, N, K,
                      tile == KN_SKINNY_AVX512_BF16 ? ROWS_BF16 : ROWS};
    /* The tiles read a's rows contiguous and in their element type (bf16 for the bf16 tile, f32
     * otherwise): rows already so are read in place, others are staged. */
    const bool native = dt == KN_F32 || job.tile == KN_SKINNY_AVX512_BF16;
    union { float f[STAGE_ON_STACK]; uint16_t h[2 * STAGE_ON_STACK]; } stack;
    void *staged = NULL;
    if (!native || acs != 1) {
        const bool halves = native && dt != KN_F32;
        const size_t bytes = (size_t)(M * K) * (halves ? 2 : 4);
        staged = bytes <= sizeof stack ? (void *)&stack : malloc(bytes);
        if (!staged) return false;
        /* bf16 weights on a widening tile: each block of 2 * lanes elements of a is staged with
         * its even elements first (the order in which the tile widens the weight's pairs). */
        const int64_t block = dt == KN_BF16 ? 2 * tile_lanes(tile) : 0, paired = block ? K - K % block : 0;
        for (int64_t i = 0; i < M; i++)
            for (int64_t k = 0; k < K; k++) {
                const int64_t from = i * ars + k * acs;
                const int64_t to = k < paired ? k - k % block + (k % 2) * (block / 2) + k % block / 2 : k;
                if (halves) ((uint16_t *)staged)[i * K + k] = ((const uint16_t *)a)[from];
                else ((float *)staged)[i * K + to] = load_one(dt, a, from);
            }
        job.a = staged, job.lda = K;
    }
    const int64_t tiles = (N + job.rows - 1) / job.rows;
    /* A streamed weight element counts as 4 of the grain's elements of simple code: a 288-wide
     * product (decode of the 15M shape) then spreads over every chunk rather than running on one
     * thread, which was ~1.5x slower (f32, 2 threads), and a worker that loses its core mid-loop
     * holds back only a small chunk. */
    kn_parallel_for(tiles, M * K * job.rows * 4, skinny_tiles, &job);
    if (staged != (void *)&stack) free(staged);
    return true;
}
