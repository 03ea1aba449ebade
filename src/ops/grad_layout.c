/* Gradients of layout ops. */
#include <stdlib.h>

#include "core/error.h"
#include "kiln/ops.h"
#include "ops/grad.h"
#include "ops/ops_internal.h"

/* cat: each input's gradient is its stretch of the output's along the dim. */
kn_status kn_grad_cat(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    int64_t dim = c->attrs->cat.dim, at = 0;
    for (int i = 0; i < c->n_in; i++) {
        const kn_shape *s = &c->in_shape[i];
        if (s->n == 1 && s->v[0] == 0 && kn_ndim(gout[0]) != 1) continue; /* skipped by the forward */
        int64_t len = s->v[dim];
        if (c->needs[i] && !(gin[i] = kn_narrow(gout[0], dim, at, len))) return kn_last_status();
        at += len;
    }
    return KN_OK;
}

/* Remap modes of defs/layout.def. */
enum { REMAP_CONSTANT, REMAP_REFLECT, REMAP_REPLICATE, REMAP_CIRCULAR };

/* The input index output index o of a dim reads (the remap kernel's map; no constant mode). */
static int64_t source_index(int64_t o, int64_t before, int64_t size, int mode) {
    int64_t j = o - before;
    if (j >= 0 && j < size) return j;
    if (mode == REMAP_REFLECT) return j < 0 ? -j : 2 * (size - 1) - j;
    if (mode == REMAP_REPLICATE) return j < 0 ? 0 : size - 1;
    return ((j % size) + size) % size;
}

/* g summed back along dim d through the remap's index map: index_add of g's slices into a
 * zero tensor with the input's size along d. */
static kn_tensor *unmap_dim(kn_tensor *g, int d, int64_t before, int64_t size, int mode) {
    kn_shape shape = kn_shape_of(g);
    int64_t n = shape.v[d];
    int64_t *map = malloc(sizeof *map * (size_t)(n ? n : 1));
    if (!map) return kn_error_null(KN_ERR_OOM, "pad backward: out of host memory for an index map of %lld", (long long)n);
    for (int64_t o = 0; o < n; o++) map[o] = source_index(o, before, size, mode);
    kn_tensor *index = kn_from_host(map, KN_I64, KN_SHAPE(n), kn_device_of(g));
    free(map);
    shape.v[d] = size;
    return kn_index_add(kn_full_on(shape, 0, kn_dtype_of(g), kn_device_of(g)), d, index, g, 1);
}

/* pad: constant padding is undone by the opposite padding (cropping what was added, adding
 * zeros for what negative padding cropped); the other modes add every output element into
 * the input element it copied, one dim at a time. */
kn_status kn_grad_pad(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    kn_shape in = c->in_shape[0], out = kn_shape_of(gout[0]);
    const int64_t *before = c->attrs->pad.before.v;
    int mode = (int)c->attrs->pad.mode;
    kn_tensor *g = gout[0];
    if (mode == REMAP_CONSTANT) {
        int64_t pads[2 * KN_MAX_DIMS];
        for (int i = 0; i < in.n; i++) {
            int d = in.n - 1 - i; /* pad lists the last dim first */
            pads[2 * i] = -before[d];
            pads[2 * i + 1] = -(out.v[d] - in.v[d] - before[d]);
        }
        gin[0] = kn_pad(g, pads, 2 * in.n, KN_PAD_CONSTANT, 0);
        return gin[0] ? KN_OK : kn_last_status();
    }
    for (int d = 0; d < in.n && g; d++)
        if (before[d] || out.v[d] != in.v[d]) g = unmap_dim(g, d, before[d], in.v[d], mode);
    gin[0] = g;
    return g ? KN_OK : kn_last_status();
}

/* roll: rolled back by the opposite shifts. */
kn_status kn_grad_roll(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    int n = c->in_shape[0].n;
    int64_t shifts[KN_MAX_DIMS];
    kn_shape dims = {.n = n};
    for (int d = 0; d < n; d++) shifts[d] = -c->attrs->roll.before.v[d], dims.v[d] = d;
    gin[0] = n ? kn_roll(gout[0], shifts, dims) : gout[0];
    return gin[0] ? KN_OK : kn_last_status();
}

/* repeat: the copies of each dim summed, one dim at a time as [before, copies, size, after]
 * (the input already has the repeats' rank: the API function viewed it so). */
kn_status kn_grad_repeat(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    kn_shape in = c->in_shape[0], cur = kn_shape_of(gout[0]);
    kn_tensor *g = gout[0];
    for (int d = 0; d < in.n && g; d++) {
        if (cur.v[d] == in.v[d]) continue;
        int64_t lead = 1, trail = 1;
        for (int k = 0; k < in.n; k++) {
            if (k < d) lead *= cur.v[k];
            if (k > d) trail *= cur.v[k];
        }
        int64_t copies = in.v[d] ? cur.v[d] / in.v[d] : 0;
        g = kn_sum(kn_reshape(g, KN_SHAPE(lead, copies, in.v[d], trail)), KN_DIMS(1), false);
        cur.v[d] = in.v[d];
        g = kn_reshape(g, cur);
    }
    gin[0] = g;
    return g ? KN_OK : kn_last_status();
}

kn_status kn_grad_tril(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    gin[0] = kn_tril(gout[0], c->attrs->tril.diagonal);
    return gin[0] ? KN_OK : kn_last_status();
}

kn_status kn_grad_triu(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    gin[0] = kn_triu(gout[0], c->attrs->triu.diagonal);
    return gin[0] ? KN_OK : kn_last_status();
}
