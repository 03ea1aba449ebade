/* Compiled mode (include/kiln/compile.h): its scheduler and kn_compile. The scheduler is a
 * window (exec/window.h) that nothing flushes but a read, a sync, a mode change or the end of
 * a compiled step; at the flush the window is one program: dead code goes (graph/dce.h),
 * common subexpressions merge and elementwise chains and reductions fuse across all of it
 * (fused mode's planning half, exec/fused.h), the values only the program sees are placed in
 * the stream's arena (exec/compiled.h), and the nodes launch in order. */
#include "kiln/compile.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/runtime_impl.h"
#include "core/stats.h"
#include "exec/compiled.h"
#include "exec/dispatch.h"
#include "exec/fused.h"
#include "exec/scheduler.h"
#include "exec/window.h"
#include "graph/dce.h"

/* A program this long is cut even without a read (bounded host memory for a loop that never
 * reads); the cut is a graph break, which changes no value. */
enum { MAX_PROGRAM = 1 << 16 };

static int program_limit(void) { return MAX_PROGRAM; }

static kn_status plan_and_launch(kn_node **nodes, kn_backend **backends, int n) {
    static int64_t programs; /* for the dumps' names; the window's lock is held */
    const int64_t program = programs++;
    kn_compiled_dump(nodes, n, program, "recorded");
    const int dead = kn_dce(nodes, n);
    if (dead) {
        int kept = 0;
        for (int j = 0; j < n; j++)
            if (nodes[j]) backends[kept] = backends[j], nodes[kept++] = nodes[j];
        n = kept;
        kn_stat_add(KN_STAT_OPS_ELIMINATED, dead);
    }
    kn_status st;
    n = kn_fused_rewrite(nodes, backends, n, &st);
    /* Without a plan (no memory for it) every value still gets memory at its launch. */
    kn_status placed = kn_compiled_place(nodes, n);
    kn_compiled_dump(nodes, n, program, "planned");
    for (int j = 0; j < n; j++) kn_node_launch(nodes[j]);
    if (n) kn_stat_add(KN_STAT_PROGRAMS, 1);
    return st != KN_OK ? st : placed;
}

static kn_window window = KN_WINDOW_INIT(plan_and_launch, program_limit);

static kn_status compiled_submit(kn_backend *b, kn_node *n) { return kn_window_submit(&window, b, n); }

static kn_status compiled_realize(void) { return kn_window_flush(&window); }

const kn_scheduler kn_compiled_scheduler = {"compiled", compiled_submit, compiled_realize, true};

struct kn_compiled {
    kn_step_fn fn;
    void *ctx;
    int64_t runs;
    char name[64];
};

kn_compiled *kn_compile(kn_step_fn fn, void *ctx, const kn_compile_options *opt) {
    if (!kn_runtime_ready()) return NULL;
    if (!fn) return kn_error_null(KN_ERR_ARG, "compile: no step function (fn is NULL)");
    kn_compiled *p = calloc(1, sizeof *p);
    if (!p) return kn_error_null(KN_ERR_OOM, "compile: out of host memory");
    p->fn = fn;
    p->ctx = ctx;
    snprintf(p->name, sizeof p->name, "%s", opt && opt->name ? opt->name : "step");
    return p;
}

kn_status kn_compiled_run(kn_compiled *p, kn_tensor *const *inputs, int n_in, kn_tensor **outputs, int n_out) {
    if (!p) return kn_error(KN_ERR_ARG, "compiled_run: no program (NULL)");
    if (n_in < 0 || n_out < 0 || (n_in && !inputs) || (n_out && !outputs))
        return kn_error(KN_ERR_ARG, "compiled_run(%s): %d inputs and %d outputs, with %s", p->name, n_in, n_out,
                        n_in < 0 || n_out < 0 ? "a negative count" : "a NULL array");
    for (int i = 0; i < n_in; i++)
        if (!inputs[i]) return kn_error(KN_ERR_ARG, "compiled_run(%s): input %d is NULL", p->name, i);
    for (int i = 0; i < n_out; i++) outputs[i] = NULL;
    p->runs++;
    /* What was recorded before the step is a program of its own. */
    const bool compiled = kn_get_mode() == KN_MODE_COMPILED;
    kn_status st = compiled ? kn_realize(NULL) : KN_OK;
    if (st != KN_OK) return st;
    kn_scope_push(); /* the step's temporaries go before the flush, so that they do not escape */
    st = p->fn(p->ctx, inputs, n_in, outputs, n_out);
    for (int i = 0; i < n_out; i++)
        if (st == KN_OK) kn_keep(outputs[i]);
    kn_scope_pop();
    if (st != KN_OK)
        for (int i = 0; i < n_out; i++) outputs[i] = NULL; /* released with the step's scope */
    kn_status flushed = compiled ? kn_realize(NULL) : KN_OK;
    if (st == KN_OK && flushed != KN_OK) {
        for (int i = 0; i < n_out; i++) kn_release(outputs[i]), outputs[i] = NULL;
        st = flushed;
    }
    return st;
}

int64_t kn_compiled_runs(const kn_compiled *p) { return p ? p->runs : 0; }

void kn_compiled_free(kn_compiled *p) { free(p); }
