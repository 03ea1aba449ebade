/* Gradient checks: kiln's backward against float64 central finite differences. */
#ifndef KILN_TESTS_GRADCHECK_H
#define KILN_TESTS_GRADCHECK_H

#include "harness.h"

/* The function under test: builds one output from the inputs (which it must not release). */
typedef kn_tensor *(*gc_fn)(kn_tensor *const *in, const void *ctx);

/* One input: random float64 values in [lo, hi) of this shape, differentiated; or, when
 * `fixed` is set, that tensor as it is (indices, masks), not differentiated. */
typedef struct gc_input {
    kn_shape shape;
    double lo, hi;
    kn_tensor *fixed;
} gc_input;

/* Computes sum(f(in) * r) for a random r, backpropagates, and compares every differentiated
 * input's gradient element with (L(x + eps) - L(x - eps)) / 2eps, eps = 1e-6, at
 * |got - want| <= 1e-7 + 1e-5 |want| (float64 throughout). Reports the first mismatch with
 * the input, the element and both values. */
bool gradcheck_at(const char *what, gc_fn f, const void *ctx, int n, const gc_input *in, const char *file, int line);
#define GRADCHECK(what, f, ctx, n, ...) gradcheck_at((what), (f), (ctx), (n), (const gc_input[]){__VA_ARGS__}, __FILE__, __LINE__)
/* A random differentiated input. */
#define GC_IN(shape_, lo_, hi_) ((gc_input){.shape = (shape_), .lo = (lo_), .hi = (hi_)})
#define GC_FIXED(t) ((gc_input){.fixed = (t)})

#endif
