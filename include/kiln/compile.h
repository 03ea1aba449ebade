/* Compiled mode (DESIGN.md's fourth mode): a step function — forward, loss, backward, anything
 * made of kiln ops — run as one program. In KN_MODE_COMPILED every stretch of recorded work
 * between two host reads is a program: nothing runs while it is recorded; then dead code is
 * dropped, common subexpressions merged, elementwise chains and reductions fused across the
 * whole stretch (forward and backward together), and every intermediate placed in one
 * arena by a memory plan, so that the program's values allocate nothing one by one. A read of
 * a value inside the step (kn_item, kn_to_host) ends the program there and starts another
 * (a graph break), so a step that branches on a value still runs, in two programs.
 *
 *     kn_compiled *step = kn_compile(train_step, &model, &(kn_compile_options){.name = "gpt2"});
 *     for (...) kn_compiled_run(step, (kn_tensor *[]){x, y}, 2, &loss, 1);
 *
 * Each call records the step again (kiln ops record in well under a microsecond each) and
 * plans it; the generated kernels come from the compilation cache, so only the first call
 * compiles. Outside KN_MODE_COMPILED, kn_compiled_run calls the step function as it is, in the
 * current mode: one code path, and strict or debug mode to check it against.
 *
 * Guards. A program is specialized to its inputs' dtypes, devices, ranks and shapes, and to
 * the structure of what the step records (which ops, wired how: the values that decided the
 * step's control flow show there). Sizes inside the step, integer attributes (a KV position)
 * and float attributes (a learning rate) are launch arguments, not part of the program. A call
 * whose inputs or structure match no earlier call's is a recompile: counted (KILN_STATS'
 * recompiles, with the reason: shape, dtype, rank, device, or ops for a changed structure),
 * said once on stderr when a step keeps recompiling, and an error with KILN_RECOMPILE=error
 * (before the step runs when the inputs changed; after it, with its results dropped, when
 * only the structure did). An input dimension listed in dynamic_dims may change size without
 * a recompile, up to its bound. One compiled step runs at a time in a process (the trace that
 * keys its programs is the process's). */
#ifndef KILN_COMPILE_H
#define KILN_COMPILE_H

#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A step: reads inputs[0..n_in), writes up to n_out result handles, returns KN_OK or an error.
 * Each result is a new reference, as an op returns (to hand back an input, kn_retain it); it
 * becomes the caller's to release. NULL slots are allowed. Parameters and optimizer state are
 * whatever the function reaches through ctx: they are updated in place across calls. */
typedef kn_status (*kn_step_fn)(void *ctx, kn_tensor *const *inputs, int n_in, kn_tensor **outputs, int n_out);

/* An input dimension whose size may change between calls: inputs[input]'s dimension dim, up to
 * max (0: no bound). A size past the bound is a recompile. */
typedef struct kn_compile_dim {
    int input, dim;
    int64_t max;
} kn_compile_dim;

typedef struct kn_compile_options {
    const char *name;                   /* for messages; NULL: "step" */
    const kn_compile_dim *dynamic_dims; /* copied; NULL: every input size is guarded */
    int n_dynamic_dims;
} kn_compile_options;

typedef struct kn_compiled kn_compiled;

/* A program for fn (nothing is recorded until the first run); opt may be NULL. NULL with an
 * error when fn is NULL, a dynamic dimension is out of range, or memory runs out. */
KN_API kn_compiled *kn_compile(kn_step_fn fn, void *ctx, const kn_compile_options *opt);
/* Runs the step once. The results are launched, not waited for (reading one waits). An error
 * from the step function or from planning is returned, with no result handed out. */
KN_API kn_status kn_compiled_run(kn_compiled *prog, kn_tensor *const *inputs, int n_in, kn_tensor **outputs,
                                 int n_out);
/* Runs so far (successful or not). */
KN_API int64_t kn_compiled_runs(const kn_compiled *prog);
/* Calls in compiled mode that matched no earlier call's guards (the first call is not one). */
KN_API int64_t kn_compiled_recompiles(const kn_compiled *prog);
KN_API void kn_compiled_free(kn_compiled *prog);

#ifdef __cplusplus
}
#endif
#endif
