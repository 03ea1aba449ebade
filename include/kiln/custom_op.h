/* Custom ops: a new op registered from C at run time, which then works in every mode, on
 * every backend it has a kernel for, and under autograd, like a built-in op.
 *
 * An op has a name, a shape rule, and either a C function per device type or an elementwise
 * source string that kiln compiles for the CPU (through the compilation cache), plus an
 * optional gradient written with kiln ops:
 *
 *     static kn_status softplus_cpu(const kn_custom_tensor *in, int n_in, const kn_custom_tensor *out,
 *                                   int n_out, const kn_custom_attrs *attrs, void *user) { ... }
 *     int id = kn_custom_op_register(&(kn_custom_op_def){
 *         .name = "my_softplus", .n_inputs = 1, .n_outputs = 1,
 *         .kernels[KN_DEVICE_CPU] = softplus_cpu, .backward = softplus_backward});
 *     kn_tensor *y = kn_custom_call1(id, 1, &x, NULL);
 *
 *     int swish = kn_custom_op_register(&(kn_custom_op_def){
 *         .name = "my_swish", .n_inputs = 1, .n_outputs = 1, .source = "x * kn_sigmoid(a * x)"});
 *     kn_tensor *z = kn_custom_call1(swish, 1, &x, &(kn_custom_attrs){.f = {1.5}});
 *
 * Registration is thread-safe; ops are never unregistered (their ids stay valid for the
 * life of the process). At most KN_CUSTOM_MAX_OPS ops can be registered. */
#ifndef KILN_CUSTOM_OP_H
#define KILN_CUSTOM_OP_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KN_CUSTOM_MAX_OPS 1024
#define KN_CUSTOM_MAX_INPUTS 8
#define KN_CUSTOM_MAX_OUTPUTS 4
#define KN_CUSTOM_MAX_ATTRS 8

/* The attributes of one call: up to 8 doubles and 8 integers, whose meaning the op defines.
 * A source kernel sees f[0] as `a` and f[1] as `b`. */
typedef struct kn_custom_attrs {
    double f[KN_CUSTOM_MAX_ATTRS];
    int64_t i[KN_CUSTOM_MAX_ATTRS];
} kn_custom_attrs;

/* What a C kernel sees of a tensor. On the CPU `data` is host memory, the first element
 * (NULL when there are no elements). Outputs are fresh and contiguous. */
typedef struct kn_custom_tensor {
    void *data;
    kn_dtype dtype;
    int ndim;
    int64_t shape[KN_MAX_DIMS];
    int64_t strides[KN_MAX_DIMS]; /* in elements; 0 along broadcast dims, may be negative */
    int64_t numel;
} kn_custom_tensor;

/* The shape and dtype rule: fills out_shapes[j] and out_dtypes[j] for each output from the
 * inputs (read them with kn_shape_of, kn_dtype_of...). Refuses inputs by returning an error,
 * with a message set by kn_set_error; kiln prefixes it with the op's name and inputs. */
typedef kn_status (*kn_custom_infer_fn)(kn_tensor *const *in, int n_in, const kn_custom_attrs *attrs,
                                        kn_shape *out_shapes, kn_dtype *out_dtypes, void *user);

/* A kernel: computes every output from the inputs. Runs on the device's stream (in strict
 * mode on a worker thread, after the call returned), so it must touch nothing but its
 * arguments and thread-safe state. An error (with kn_set_error) is reported like any
 * kernel's: by the next kn_sync or read in strict mode, by the call itself in debug mode. */
typedef kn_status (*kn_custom_kernel_fn)(const kn_custom_tensor *in, int n_in, const kn_custom_tensor *out,
                                         int n_out, const kn_custom_attrs *attrs, void *user);

/* What a gradient function sees of the call it differentiates. */
typedef struct kn_custom_grad_ctx {
    int n_in, n_out;
    kn_tensor *const *in;   /* the inputs as the kernel saw them (promoted and broadcast for elementwise ops) */
    kn_tensor *const *out;  /* the outputs */
    const kn_custom_attrs *attrs;
    const bool *needs;      /* needs[i]: input i wants a gradient */
    void *user;
} kn_custom_grad_ctx;

/* The gradient, written with kiln ops: sets grad_in[i] for each input with needs[i] (NULL
 * means zero) from grad_out (one per output, zeros where no gradient reached it). A result
 * may have another float dtype, or the shape an input had before broadcasting: kiln sums
 * and casts it. Runs with grad mode off inside a scope, which owns the results. */
typedef kn_status (*kn_custom_backward_fn)(const kn_custom_grad_ctx *c, kn_tensor *const *grad_out,
                                           kn_tensor **grad_in);

typedef struct kn_custom_op_def {
    const char *name;          /* unique among custom ops, e.g. "my_softplus" (copied) */
    int n_inputs;              /* 0..KN_CUSTOM_MAX_INPUTS (1..3 for a source kernel: x, y, z) */
    int n_outputs;             /* 1..KN_CUSTOM_MAX_OUTPUTS (1 for a source kernel) */
    /* NULL makes the op elementwise: the inputs are promoted to one dtype (a float one for a
     * source kernel) and broadcast to one shape, which every output has. */
    kn_custom_infer_fn infer;
    /* A C kernel per device type (NULL where the op has none). */
    kn_custom_kernel_fn kernels[KN_DEVICE_TYPE_COUNT];
    /* Or an elementwise scalar expression in x, y, z (the inputs) and a, b (f[0], f[1]), in the
     * language of the op table's expressions: C arithmetic, kiln's scalar math (kn_exp,
     * kn_log, kn_sigmoid, kn_tanh, ...) and KC(v) for a constant of the compute type (float
     * for f32/f16/bf16, double for f64). Compiled for the CPU, where the op has no C kernel,
     * on its first call per dtype; the compilation cache keeps it across processes. Needs
     * infer == NULL. Copied. */
    const char *source;
    /* The gradient, or NULL: then calling the op on inputs that require grad is an error. */
    kn_custom_backward_fn backward;
    void *user;                /* passed to infer, the kernels and backward */
} kn_custom_op_def;

/* Registers an op; returns its id (>= 0), or -1 with kn_last_error() for a bad definition
 * (no name, a name taken, no kernel and no source, counts out of range...). Thread-safe. */
KN_API int kn_custom_op_register(const kn_custom_op_def *def);
/* The id of the op with this name, or -1 (with an error set) if there is none. */
KN_API int kn_custom_op_lookup(const char *name);
/* The op's name, or NULL for an id that names no op. */
KN_API const char *kn_custom_op_name(int id);

/* Calls op id on n_in inputs with attrs (NULL: all zero) and writes its n_outputs results to
 * out[]. Errors (a NULL input, the wrong count, the shape rule refusing the inputs, a
 * device without a kernel for the op, a source kernel that does not compile) name the op
 * and its inputs: "my_softplus(f32[2, 3]): ...". */
KN_API kn_status kn_custom_call(int id, int n_in, kn_tensor *const *in, const kn_custom_attrs *attrs, kn_tensor **out);
/* The same for output 0 (any others are released); NULL on error. */
KN_API kn_tensor *kn_custom_call1(int id, int n_in, kn_tensor *const *in, const kn_custom_attrs *attrs);

#ifdef __cplusplus
}
#endif
#endif
