/* Constant folding over a piece of the graph seen whole (a compiled program): a `fill` makes a
 * tensor of one value, every view of it reads that value, and an elementwise op whose inputs
 * are all such tensors (made in the program, not written in place since) makes one value too.
 * Such an op becomes a `fill` of its output, so a chain of scalar work on constants
 * (`x / sqrt(full(d))`, `mask * full(-inf)`) costs one fill instead of a kernel per op, and the
 * fills it read are left for dead-code elimination. The value is the op's own kernel's on one
 * element (the caller's evaluator), so folding changes no bit. */
#ifndef KILN_GRAPH_CONST_FOLD_H
#define KILN_GRAPH_CONST_FOLD_H

#include <stdbool.h>

#include "graph/node.h"

/* Evaluates n (an elementwise node) on one element whose inputs hold in[0..n->n_in) (each
 * converted to its input's dtype as `fill` converts its value): *out is the output element as a
 * double, exactly. False when it cannot (the value is then not folded). */
typedef bool (*kn_fold_eval_fn)(const kn_node *n, const double *in, double *out, void *ctx);

/* Replaces, in nodes[0..n), each foldable node by a `fill` node of the same output (the old
 * node freed); returns how many it folded. */
int kn_const_fold(kn_node **nodes, int n, kn_fold_eval_fn eval, void *ctx);

#endif
