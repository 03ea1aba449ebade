/* CPU kernels of the elementwise ops, instantiated from the expressions in the op table's
 * .def lists for every dtype of each op's class. Each inner loop has a contiguous form the
 * compiler vectorizes, forms for a broadcast scalar operand, and a strided form. */
#include "backends/cpu/cpu_kernels.h"
#include "core/error.h"

#define OUT_ST_SAME(ST) ST
#define OUT_ST_BOOL(ST) uint8_t
#define OUT_STORE_SAME(STORE, v) STORE(v)
#define OUT_STORE_BOOL(STORE, v) KN_ST_BOOL(v)

#define UNARY_INNER(name, out, attrs, expr, SUF, DT, ST, CT, LOAD, STORE)                          \
    static int name##_##SUF(char *const *p, const int64_t *s, int64_t n, const void *ctx) {        \
        typedef CT kn_ct;                                                                          \
        const kn_attrs_##name *A_ = &((const kn_attrs *)ctx)->name;                                \
        (void)A_;                                                                                  \
        attrs int bad = 0;                                                                         \
        OUT_ST_##out(ST) *restrict o = (OUT_ST_##out(ST) *)p[0];                                   \
        const ST *restrict xs = (const ST *)p[1];                                                  \
        if (s[0] == 1 && s[1] == 1) {                                                              \
            for (int64_t i = 0; i < n; i++) {                                                      \
                CT x = LOAD(xs[i]);                                                                \
                o[i] = OUT_STORE_##out(STORE, (expr));                                             \
            }                                                                                      \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++) {                                                      \
                CT x = LOAD(xs[i * s[1]]);                                                         \
                o[i * s[0]] = OUT_STORE_##out(STORE, (expr));                                      \
            }                                                                                      \
        }                                                                                          \
        return bad;                                                                                \
    }

#define BINARY_INNER(name, out, attrs, expr, SUF, DT, ST, CT, LOAD, STORE)                         \
    static int name##_##SUF(char *const *p, const int64_t *s, int64_t n, const void *ctx) {        \
        typedef CT kn_ct;                                                                          \
        const kn_attrs_##name *A_ = &((const kn_attrs *)ctx)->name;                                \
        (void)A_;                                                                                  \
        attrs int bad = 0;                                                                         \
        OUT_ST_##out(ST) *restrict o = (OUT_ST_##out(ST) *)p[0];                                   \
        const ST *restrict xs = (const ST *)p[1], *restrict ys = (const ST *)p[2];                 \
        if (s[0] == 1 && s[1] == 1 && s[2] == 1) {                                                 \
            for (int64_t i = 0; i < n; i++) {                                                      \
                CT x = LOAD(xs[i]), y = LOAD(ys[i]);                                               \
                o[i] = OUT_STORE_##out(STORE, (expr));                                             \
            }                                                                                      \
        } else if (s[0] == 1 && s[1] == 1 && s[2] == 0) {                                          \
            const CT y = LOAD(ys[0]);                                                              \
            for (int64_t i = 0; i < n; i++) {                                                      \
                CT x = LOAD(xs[i]);                                                                \
                o[i] = OUT_STORE_##out(STORE, (expr));                                             \
            }                                                                                      \
        } else if (s[0] == 1 && s[1] == 0 && s[2] == 1) {                                          \
            const CT x = LOAD(xs[0]);                                                              \
            for (int64_t i = 0; i < n; i++) {                                                      \
                CT y = LOAD(ys[i]);                                                                \
                o[i] = OUT_STORE_##out(STORE, (expr));                                             \
            }                                                                                      \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++) {                                                      \
                CT x = LOAD(xs[i * s[1]]), y = LOAD(ys[i * s[2]]);                                 \
                o[i * s[0]] = OUT_STORE_##out(STORE, (expr));                                      \
            }                                                                                      \
        }                                                                                          \
        return bad;                                                                                \
    }

#define TERNARY_INNER(name, out, attrs, expr, SUF, DT, ST, CT, LOAD, STORE)                        \
    static int name##_##SUF(char *const *p, const int64_t *s, int64_t n, const void *ctx) {        \
        typedef CT kn_ct;                                                                          \
        const kn_attrs_##name *A_ = &((const kn_attrs *)ctx)->name;                                \
        (void)A_;                                                                                  \
        attrs int bad = 0;                                                                         \
        OUT_ST_##out(ST) *restrict o = (OUT_ST_##out(ST) *)p[0];                                   \
        const ST *xs = (const ST *)p[1], *ys = (const ST *)p[2], *zs = (const ST *)p[3];           \
        if (s[0] == 1 && s[1] == 1 && s[2] == 1 && s[3] == 1) {                                    \
            for (int64_t i = 0; i < n; i++) {                                                      \
                CT x = LOAD(xs[i]), y = LOAD(ys[i]), z = LOAD(zs[i]);                              \
                o[i] = OUT_STORE_##out(STORE, (expr));                                             \
            }                                                                                      \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++) {                                                      \
                CT x = LOAD(xs[i * s[1]]), y = LOAD(ys[i * s[2]]), z = LOAD(zs[i * s[3]]);         \
                o[i * s[0]] = OUT_STORE_##out(STORE, (expr));                                      \
            }                                                                                      \
        }                                                                                          \
        return bad;                                                                                \
    }

/* The node kernel: picks the inner loop for the input dtype and reports domain errors. */
#define DISPATCH_CASE(name, SUF, DT, ST, CT, LOAD, STORE) \
    case DT: fn = name##_##SUF; break;
#define NODE_KERNEL(name, cls)                                                                   \
    static kn_status name##_kernel(kn_node *n) {                                                 \
        kn_ew_inner_fn fn = NULL;                                                                \
        switch (n->in[n->n_in - 1]->dtype) {                                                     \
            KN_DTYPES_CLASS_##cls(DISPATCH_CASE, name) default : break;                          \
        }                                                                                        \
        if (!fn) return kn_error(KN_ERR_INTERNAL, #name ": no CPU loop for %s",                  \
                                 kn_dtype_name(n->in[n->n_in - 1]->dtype));                      \
        if (kn_ew_run(n, fn))                                                                    \
            return kn_error(KN_ERR_ARG, #name ": integer division by zero");                     \
        return KN_OK;                                                                            \
    }

/* Each attribute of the entry (a, b) becomes a constant of the compute type; the parentheses
 * keep the conversion's commas out of the macro arguments it passes through. */
#define KN_A(T, nm) const kn_ct nm = (KN_ATTR(kn_ct, A_->nm)); (void)nm;
#define INSTANTIATE(INNER, name, out, attrs, expr, SUF, DT, ST, CT, LOAD, STORE) \
    INNER(name, out, attrs, expr, SUF, DT, ST, CT, LOAD, STORE)
#define KN_OP(name, ...)
#define KN_UNARY(name, cls, out, attrs, expr) \
    KN_DTYPES_CLASS_##cls(INSTANTIATE, UNARY_INNER, name, out, attrs, expr) NODE_KERNEL(name, cls)
#define KN_BINARY(name, cls, out, attrs, expr) \
    KN_DTYPES_CLASS_##cls(INSTANTIATE, BINARY_INNER, name, out, attrs, expr) NODE_KERNEL(name, cls)
#define KN_TERNARY(name, cls, out, attrs, expr) \
    KN_DTYPES_CLASS_##cls(INSTANTIATE, TERNARY_INNER, name, out, attrs, expr) NODE_KERNEL(name, cls)
#include "ops/defs/unary.def"
#include "ops/defs/binary.def"
#include "ops/defs/elementwise_backward.def"
#include "ops/defs/scalar.def"
#undef KN_UNARY
#undef KN_BINARY
#undef KN_TERNARY

const kn_kernel_reg kn_cpu_kernels_elementwise[] = {
#define KN_UNARY(name, cls, ...) {KN_OP_##name, name##_kernel, KN_KERNEL_DTS_##cls},
#define KN_BINARY KN_UNARY
#define KN_TERNARY KN_UNARY
#include "ops/defs/unary.def"
#include "ops/defs/binary.def"
#include "ops/defs/elementwise_backward.def"
#include "ops/defs/scalar.def"
#undef KN_UNARY
#undef KN_BINARY
#undef KN_TERNARY
#undef KN_OP
#undef KN_A
    {0},
};
