/* Compiled mode (include/kiln/compile.h): its scheduler and kn_compile. The scheduler is a
 * window (exec/window.h) that nothing flushes but a read, a sync, a mode change or the end of
 * a compiled step; at the flush the window is one program: constants fold (graph/const_fold.h),
 * dead code goes (graph/dce.h), common subexpressions merge and elementwise chains and
 * reductions fuse across all of it (fused mode's planning half, exec/fused.h), the values only
 * the program sees are placed in the stream's arena (exec/compiled.h), and the nodes launch in
 * order. A step run through
 * kn_compiled_run is guarded: its inputs' guard (exec/compiled_guard.h) and the structural keys
 * of the programs it records (graph/program_key.h) name its variant; a new one is a recompile. */
#include "kiln/compile.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/hash.h"
#include "core/runtime_impl.h"
#include "core/stats.h"
#include "exec/compiled.h"
#include "exec/compiled_guard.h"
#include "exec/compiled_shadow.h"
#include "exec/dispatch.h"
#include "exec/fused.h"
#include "exec/scheduler.h"
#include "exec/window.h"
#include "graph/const_fold.h"
#include "graph/dce.h"
#include "graph/program_key.h"

/* A program this long is cut even without a read (bounded host memory for a loop that never
 * reads); the cut is a graph break, which changes no value. */
enum { MAX_PROGRAM = 1 << 16 };

static int program_limit(void) { return MAX_PROGRAM; }

/* The compiled step being run, whose programs' keys the flushes fold into key (under the
 * window's lock); NULL outside kn_compiled_run. */
typedef struct step_trace {
    kn_tensor *const *inputs;
    int n_inputs;
    uint64_t key;
} step_trace;
static _Atomic(step_trace *) tracing;

/* Set while this thread checks a program under the shadow: its reads must not flush the window
 * whose flush is running (the program they read has been launched). */
static _Thread_local bool checking;

static kn_status plan_and_launch(kn_node **nodes, kn_backend **backends, int n) {
    static int64_t programs; /* for the dumps' names; the window's lock is held */
    const int64_t program = programs++;
    kn_compiled_dump(nodes, n, program, "0-recorded", NULL);
    step_trace *trace = atomic_load(&tracing);
    if (trace) {
        uint64_t key[2] = {trace->key, kn_program_key(nodes, n, trace->inputs, trace->n_inputs)};
        trace->key = kn_hash_bytes(KN_HASH_SEED, key, sizeof key);
    }
    const int folded = kn_const_fold(nodes, n, kn_compiled_fold_eval, NULL);
    kn_stat_add(KN_STAT_OPS_FOLDED, folded);
    const int dead = kn_dce(nodes, n);
    if (dead) {
        n = kn_nodes_compact(nodes, backends, n);
        kn_stat_add(KN_STAT_OPS_ELIMINATED, dead);
    }
    kn_compiled_dump(nodes, n, program, "1-dce", NULL);
    kn_program_shadow *shadow; /* a failure to copy it is reported once the program has run */
    const kn_status copied = kn_program_shadow_begin(nodes, backends, n, program, &shadow);
    kn_status st;
    const bool dumping = kn_compiled_dumping();
    char *source = NULL;
    n = kn_fused_rewrite(nodes, backends, n, &st, dumping ? &source : NULL);
    kn_compiled_dump(nodes, n, program, "2-fused", NULL);
    kn_compiled_dump_source(program, source);
    free(source);
    /* Without a plan (no memory for it) every value still gets memory at its launch. */
    kn_plan_summary plan = {0};
    kn_status placed = kn_compiled_place(nodes, n, dumping ? &plan : NULL);
    kn_compiled_dump(nodes, n, program, "3-planned", &plan);
    for (int j = 0; j < n; j++) kn_node_launch(nodes[j]);
    if (n) kn_stat_add(KN_STAT_PROGRAMS, 1);
    if (shadow) {
        checking = true;
        kn_status checked = kn_program_shadow_check(shadow);
        checking = false;
        if (st == KN_OK) st = checked;
    }
    return st != KN_OK ? st : copied != KN_OK ? copied : placed;
}

static kn_window window = KN_WINDOW_INIT(plan_and_launch, program_limit);

static kn_status compiled_submit(kn_backend *b, kn_node *n) { return kn_window_submit(&window, b, n); }

static kn_status compiled_realize(void) { return checking ? KN_OK : kn_window_flush(&window); }

const kn_scheduler kn_compiled_scheduler = {"compiled", compiled_submit, compiled_realize, true};

enum { STORM_VARIANTS = 4 }; /* a step with more variants than this keeps recompiling: said once */

typedef struct variant {
    uint64_t guard, key; /* the inputs' guard hash, and the key of what the step recorded */
} variant;

struct kn_compiled {
    kn_step_fn fn;
    void *ctx;
    int64_t runs, recompiles;
    kn_compile_dim *dynamic;
    int n_dynamic;
    variant *variants;
    int n_variants, cap_variants;
    kn_step_guard last; /* the guard of the last call in compiled mode */
    bool warned;
    char name[64];
};

kn_compiled *kn_compile(kn_step_fn fn, void *ctx, const kn_compile_options *opt) {
    if (!kn_runtime_ready()) return NULL;
    if (!fn) return kn_error_null(KN_ERR_ARG, "compile: no step function (fn is NULL)");
    const char *name = opt && opt->name ? opt->name : "step";
    int n_dyn = opt ? opt->n_dynamic_dims : 0;
    if (n_dyn < 0 || (n_dyn && !opt->dynamic_dims))
        return kn_error_null(KN_ERR_ARG, "compile(%s): %d dynamic dims with %s", name, n_dyn,
                             n_dyn < 0 ? "a negative count" : "a NULL array");
    for (int k = 0; k < n_dyn; k++) {
        const kn_compile_dim *d = &opt->dynamic_dims[k];
        if (d->input < 0 || d->dim < 0 || d->dim >= KN_MAX_DIMS || d->max < 0)
            return kn_error_null(KN_ERR_ARG, "compile(%s): dynamic dim %d is input %d, dim %d, max %lld (want input >= 0, "
                                 "0 <= dim < %d, max >= 0)", name, k, d->input, d->dim, (long long)d->max, KN_MAX_DIMS);
    }
    kn_compiled *p = calloc(1, sizeof *p);
    if (p && n_dyn && (p->dynamic = malloc((size_t)n_dyn * sizeof *p->dynamic)))
        memcpy(p->dynamic, opt->dynamic_dims, (size_t)n_dyn * sizeof *p->dynamic);
    if (!p || (n_dyn && !p->dynamic)) {
        free(p);
        return kn_error_null(KN_ERR_OOM, "compile: out of host memory");
    }
    p->fn = fn;
    p->ctx = ctx;
    p->n_dynamic = n_dyn;
    snprintf(p->name, sizeof p->name, "%s", name);
    return p;
}

static bool seen(const kn_compiled *p, uint64_t guard, uint64_t key, bool any_key) {
    for (int i = 0; i < p->n_variants; i++)
        if (p->variants[i].guard == guard && (any_key || p->variants[i].key == key)) return true;
    return false;
}

/* A new variant of p: counted, said once when they keep coming, an error when
 * KILN_RECOMPILE=error; the first is no recompile. */
static kn_status note_variant(kn_compiled *p, const kn_step_guard *g, uint64_t key) {
    const bool guard_seen = seen(p, g->hash, 0, true);
    if (p->n_variants == p->cap_variants) {
        int grown = p->cap_variants ? 2 * p->cap_variants : 4;
        variant *v = realloc(p->variants, (size_t)grown * sizeof *v);
        if (!v) return kn_error(KN_ERR_OOM, "compiled_run(%s): out of host memory", p->name);
        p->variants = v, p->cap_variants = grown;
    }
    p->variants[p->n_variants++] = (variant){g->hash, key};
    if (p->n_variants == 1) return KN_OK;
    char why[400];
    /* inputs seen before: the structure changed (a guard against itself says so) */
    kn_recompile_reason reason = kn_step_guard_diff(guard_seen ? g : &p->last, g, why, sizeof why);
    p->recompiles++;
    kn_stat_recompile(reason);
    if (kn_recompile_is_error())
        return kn_error(KN_ERR_UNSUPPORTED, "compiled step %s recompiled (KILN_RECOMPILE=error): %s changed", p->name, why);
    if (p->n_variants > STORM_VARIANTS && !p->warned) {
        p->warned = true;
        fprintf(stderr, "kiln: compiled step %s has %d variants; the last changed %s (KILN_RECOMPILE=error stops here)\n",
                p->name, p->n_variants, why);
    }
    return KN_OK;
}

/* Calls the step function in a scope of its own: its temporaries go at the end (in compiled
 * mode before the flush, so that they do not escape the program), its results are kept. */
static kn_status call_step(kn_compiled *p, kn_tensor *const *inputs, int n_in, kn_tensor **outputs, int n_out) {
    kn_scope_push();
    kn_status st = p->fn(p->ctx, inputs, n_in, outputs, n_out);
    for (int i = 0; i < n_out; i++)
        if (st == KN_OK) kn_keep(outputs[i]);
        else outputs[i] = NULL; /* released with the scope */
    kn_scope_pop();
    return st;
}

/* Runs the step in compiled mode: guards, the programs it records, and its variant. */
static kn_status run_compiled(kn_compiled *p, kn_tensor *const *inputs, int n_in, kn_tensor **outputs, int n_out) {
    kn_step_guard g;
    kn_status st = kn_step_guard_make(&g, inputs, n_in, p->dynamic, p->n_dynamic, p->name);
    if (st != KN_OK) return st;
    if (p->n_variants && !seen(p, g.hash, 0, true) && kn_recompile_is_error()) {
        char why[400];
        kn_step_guard_diff(&p->last, &g, why, sizeof why);
        kn_step_guard_free(&g);
        return kn_error(KN_ERR_UNSUPPORTED, "compiled step %s would recompile (KILN_RECOMPILE=error): %s changed", p->name,
                        why);
    }
    st = kn_realize(NULL); /* what was recorded before the step is a program of its own */
    step_trace trace = {inputs, n_in, KN_HASH_SEED}, *outer = atomic_exchange(&tracing, &trace);
    if (st == KN_OK) {
        st = call_step(p, inputs, n_in, outputs, n_out);
        kn_status flushed = kn_realize(NULL);
        if (st == KN_OK) st = flushed;
    }
    atomic_store(&tracing, outer);
    if (st == KN_OK && !seen(p, g.hash, trace.key, false)) st = note_variant(p, &g, trace.key);
    kn_step_guard_free(&p->last);
    p->last = g;
    return st;
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
    if (kn_get_mode() == KN_MODE_COMPILED) {
        kn_status st = run_compiled(p, inputs, n_in, outputs, n_out);
        if (st != KN_OK)
            for (int i = 0; i < n_out; i++) kn_release(outputs[i]), outputs[i] = NULL;
        return st;
    }
    return call_step(p, inputs, n_in, outputs, n_out);
}

int64_t kn_compiled_runs(const kn_compiled *p) { return p ? p->runs : 0; }

int64_t kn_compiled_recompiles(const kn_compiled *p) { return p ? p->recompiles : 0; }

void kn_compiled_free(kn_compiled *p) {
    if (!p) return;
    kn_step_guard_free(&p->last);
    free(p->variants);
    free(p->dynamic);
    free(p);
}
