/* Common-subexpression elimination: a node of a recorded stretch that computes what an earlier
 * one computes (kn_node_same: the same pure op and attributes over the same input views) does
 * not run, where no one outside the stretch can see its values; the stretch's later readers
 * read the earlier node's values instead. */
#ifndef KILN_GRAPH_CSE_H
#define KILN_GRAPH_CSE_H

#include "graph/node.h"

/* Frees each such node of nodes[0..n) and sets its slot to NULL (record order kept for the
 * others); the number freed. Without host memory for the bookkeeping it merges nothing. */
int kn_cse(kn_node **nodes, int n);

#endif
