/* Gradients of pooling and resampling over the last two dims. max_pool2d routes each
 * output's gradient to its maximum (the indices output) with scatter_add. The other four
 * are separable linear maps, y = A_h x A_w^T per plane, so dx = A_h^T gy A_w: each matrix is
 * the forward op itself applied to identity planes along one axis (the op's exact window,
 * divisor and coordinate rules, without restating them here), and the two products are
 * batched matmuls. */
#include "kiln/ops.h"
#include "ops/grad.h"

kn_status kn_grad_max_pool2d(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    kn_tensor *gy = gout[0];
    if (!gy) return KN_OK;
    kn_shape x = c->in_shape[0], y = kn_shape_of(gy);
    int64_t hw = x.v[x.n - 2] * x.v[x.n - 1], ohw = y.v[y.n - 2] * y.v[y.n - 1], planes = hw ? kn_shape_numel(x) / hw : 0;
    kn_shape flat = KN_SHAPE(planes, ohw);
    kn_tensor *dx = kn_scatter_add(kn_zeros(KN_SHAPE(planes, hw), kn_dtype_of(gy)), 1, kn_reshape(c->out[1], flat),
                                   kn_reshape(gy, flat));
    return (gin[0] = kn_reshape(dx, x)) ? KN_OK : kn_last_status();
}

/* The op on `planes` [in, n, 1] (axis 0) or [in, 1, n] (axis 1), resized to out along the axis. */
typedef kn_tensor *(*resize_fn)(const kn_grad_ctx *c, kn_tensor *planes, int axis, int64_t out);

/* A [in, out]: row p is the op's output for the unit plane e_p along the axis. */
static kn_tensor *axis_matrix(const kn_grad_ctx *c, resize_fn f, int axis, int64_t in, int64_t out, kn_dtype dt) {
    kn_tensor *eye = kn_eye(in, in, dt);
    kn_tensor *m = f(c, kn_reshape(eye, axis ? KN_SHAPE(in, 1, in) : KN_SHAPE(in, in, 1)), axis, out);
    return kn_reshape(m, KN_SHAPE(in, out));
}

static kn_status separable(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin, resize_fn f) {
    kn_tensor *gy = gout[0];
    if (!gy) return KN_OK;
    kn_shape x = c->in_shape[0], y = kn_shape_of(gy);
    kn_dtype dt = kn_dtype_of(gy);
    kn_tensor *ah = axis_matrix(c, f, 0, x.v[x.n - 2], y.v[y.n - 2], dt); /* [H, OH] */
    kn_tensor *aw = axis_matrix(c, f, 1, x.v[x.n - 1], y.v[y.n - 1], dt); /* [W, OW] */
    gin[0] = kn_matmul(kn_matmul(ah, gy), kn_transpose(aw, 0, 1));
    return gin[0] ? KN_OK : kn_last_status();
}

/* avg_pool2d along one axis: the node's kernel, stride and padding there, 1 and 0 across.
 * ceil_mode is not kept in the node: it is the one of the two that gives the output size. */
static kn_tensor *avg_pool_axis(const kn_grad_ctx *c, kn_tensor *planes, int axis, int64_t out) {
    const kn_attrs_avg_pool2d *a = &c->attrs->avg_pool2d;
    kn_pool_opts o = {.kernel = {1, 1}, .stride = {1, 1}, .exclude_pad = a->exclude_pad};
    o.kernel[axis] = a->kernel[axis], o.stride[axis] = a->stride[axis], o.padding[axis] = a->padding[axis];
    kn_tensor *r = kn_avg_pool2d(planes, o);
    if (r && kn_shape_of(r).v[1 + axis] != out) o.ceil_mode = true, r = kn_avg_pool2d(planes, o);
    return r;
}
static kn_tensor *adaptive_axis(const kn_grad_ctx *c, kn_tensor *planes, int axis, int64_t out) {
    return kn_adaptive_avg_pool2d(planes, axis ? 1 : out, axis ? out : 1);
}
static kn_tensor *nearest_axis(const kn_grad_ctx *c, kn_tensor *planes, int axis, int64_t out) {
    return kn_upsample_nearest2d(planes, axis ? 1 : out, axis ? out : 1);
}
static kn_tensor *bilinear_axis(const kn_grad_ctx *c, kn_tensor *planes, int axis, int64_t out) {
    return kn_upsample_bilinear2d(planes, axis ? 1 : out, axis ? out : 1, c->attrs->upsample_bilinear2d.align_corners);
}

kn_status kn_grad_avg_pool2d(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    return separable(c, gout, gin, avg_pool_axis);
}
kn_status kn_grad_adaptive_avg_pool2d(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    return separable(c, gout, gin, adaptive_axis);
}
kn_status kn_grad_upsample_nearest2d(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    return separable(c, gout, gin, nearest_axis);
}
kn_status kn_grad_upsample_bilinear2d(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    return separable(c, gout, gin, bilinear_axis);
}
