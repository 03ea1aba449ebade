/* Convolutions through oneDNN, and the choice between them and im2col + GEMM (k_nn_conv.c).
 * Each oneDNN convolution is split over kiln's pool by images: one primitive per chunk of the
 * batch, run on one thread (onednn.h); the weight gradient sums one f32 partial per chunk in
 * chunk order, so results do not change from run to run. Operands are plain NCHW / (G)OIHW,
 * contiguous, in f32 or bf16 (bf16 with f32 accumulation), reordered per chunk into the
 * blocked layouts oneDNN's direct kernels choose; results are always f32 and the caller adds
 * the bias and narrows, as on the im2col path. Which one runs (docs/decisions.md, "Convolution
 * on the pool and through oneDNN"): KILN_GEMM=onednn forces oneDNN wherever it has the dtype,
 * openblas or ref force im2col (there is no plain-loop convolution); otherwise oneDNN for bf16
 * and f32 convolutions with enough output positions per image (f32: and an image per thread),
 * im2col for the rest and for f16 and f64. */
#ifndef KILN_BACKENDS_CPU_CONV_ONEDNN_H
#define KILN_BACKENDS_CPU_CONV_ONEDNN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/cpu/gemm_provider.h"
#include "backends/cpu/gemm_tiles.h"

/* x [N, G*Cg, H, W] -> y [N, G*Coutg, OH, OW] with weights [G*Coutg, Cg, KH, KW]. */
typedef struct kn_conv_geom {
    int64_t N, G, Cg, H, W, Coutg, KH, KW, OH, OW;
    int64_t sh, sw, ph, pw, dh, dw;
} kn_conv_geom;

typedef enum kn_conv_kind {
    KN_CONV_FORWARD,     /* y = conv(x, w) */
    KN_CONV_BACKWARD_DATA, /* conv2d's input gradient, i.e. conv_transpose2d: x plays y's role */
    KN_CONV_WEIGHT_GRAD, /* dw = conv2d_backward_weight(gy, x) */
    KN_CONV_KIND_COUNT
} kn_conv_kind;

/* Whether a convolution of this kind and geometry on tensors of dtype dt runs on oneDNN: the
 * forced provider if it has dt, else the default; counts the selection and a forced fallback.
 * An unknown KILN_GEMM is KN_ERR_ARG. */
kn_status kn_conv_select(kn_conv_kind kind, kn_dtype dt, const kn_conv_geom *g, bool *onednn);
/* What a convolution of dt gets now, in words for kiln info: "onednn", "im2col", or "onednn
 * from N positions/image" (im2col below). An unknown KILN_GEMM is KN_ERR_ARG. */
kn_status kn_conv_choice(kn_dtype dt, char *buf, size_t size);
/* Whether oneDNN is built in and has convolutions of this kind in dt on this CPU. */
bool kn_conv_onednn_has(kn_conv_kind kind, kn_dtype dt);

/* Runs one convolution of geometry g through oneDNN, over the pool. Operands in dt, contiguous:
 * FORWARD a = x [N, G*Cg, H, W], b = w [G*Coutg, Cg, KH, KW], out = y [N, G*Coutg, OH, OW];
 * BACKWARD_DATA (g is the convolution whose input gradient this is) a = dy [N, G*Coutg, OH,
 * OW], b = w, out = dx [N, G*Cg, H, W]; WEIGHT_GRAD a = dy, b = x, out = dw. out is f32.
 * KN_GEMM_TURNED_DOWN when oneDNN cannot take the geometry (the caller falls back). */
kn_gemm_result kn_conv_onednn(kn_conv_kind kind, const kn_conv_geom *g, kn_dtype dt, const void *a, const void *b,
                              float *out);

/* Convolutions run per provider and dtype, and fallbacks (forced or turned down) per dtype. */
void kn_conv_counts_get(kn_gemm_counts *out);
void kn_conv_counts_reset(void);
/* Counts a convolution oneDNN turned down at run time (it then runs on im2col). */
void kn_conv_count_fallback(kn_dtype dt);

#endif
