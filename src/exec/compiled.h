/* Compiled mode's pieces inside exec (include/kiln/compile.h has the user's side). */
#ifndef KILN_EXEC_COMPILED_H
#define KILN_EXEC_COMPILED_H

#include "backends/backend.h"

/* What a program's memory plan came to: values placed, the arena's bytes, and the lower bound
 * (the largest aligned sum of values live at one step). */
typedef struct kn_plan_summary {
    int values;
    size_t arena_bytes, peak_bytes;
} kn_plan_summary;

/* Gives the intermediates of a program about to launch (nodes[0..n), one stream, in launch
 * order) their memory: those no one outside the program can see are placed by the memory
 * plan (graph/memory_plan.h) in the stream's arena, which grows when a plan needs more; the
 * others get their own memory at launch, as in every mode. An error (out of memory for the
 * bookkeeping or the arena) leaves every value to its launch. summary (NULL: not wanted, and
 * not computed) gets the plan's sizes. */
kn_status kn_compiled_place(kn_node *const *nodes, int n, kn_plan_summary *summary);

/* Constant folding's evaluator (graph/const_fold.h's kn_fold_eval_fn): the node's kernel on
 * its own backend over one element, so a folded value has the bits the op would have made. */
bool kn_compiled_fold_eval(const kn_node *n, const double *in, double *out, void *ctx);

/* With KILN_COMPILE_DUMP=DIR set: writes DIR/program-N-STAGE.txt (one line a node: its op,
 * inputs, outputs with dtype and shape, and where each value made here lives; with plan, a
 * first line of its sizes) and DIR/program-N-STAGE.dot (the same as a Graphviz graph:
 * `dot -Tsvg`). N counts the process's programs; STAGE names the point in the pipeline. */
void kn_compiled_dump(kn_node *const *nodes, int n, int64_t program, const char *stage,
                      const kn_plan_summary *plan);
/* With KILN_COMPILE_DUMP=DIR set and source not NULL: writes DIR/program-N-kernels.c, the
 * generated source of the program's kernels. */
void kn_compiled_dump_source(int64_t program, const char *source);
/* Whether KILN_COMPILE_DUMP is set. */
bool kn_compiled_dumping(void);

#endif
