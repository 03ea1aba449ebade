/* Dead-code elimination over a piece of the graph seen whole (a compiled program): a pure node
 * (graph/node.h) whose every output no one can read — no later node, no handle the user or
 * autograd holds, no view — need not run. */
#ifndef KILN_GRAPH_DCE_H
#define KILN_GRAPH_DCE_H

#include "graph/node.h"

/* Frees the dead nodes of nodes[0..n) (and with them, through the references they drop, the
 * nodes that only they read), leaving NULL in their slots for the caller to compact (with
 * whatever arrays run beside nodes). Returns how many it freed. */
int kn_dce(kn_node **nodes, int n);

#endif
