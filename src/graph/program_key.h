/* The structure of a recorded program, as a compiled step's guard compares it between calls:
 * which ops, wired how, over which dtypes, ranks and devices. Sizes and integer or float
 * attributes are not part of it: kiln's generated kernels take them as launch arguments
 * (graph/fused_ir.h), so a sequence length, a KV position or a learning rate that changes
 * between calls runs the same program. What the key does not see, the step's input guards
 * do (exec/compiled.c: exact input shapes, apart from the dimensions declared dynamic). */
#ifndef KILN_GRAPH_PROGRAM_KEY_H
#define KILN_GRAPH_PROGRAM_KEY_H

#include <stdint.h>

#include "graph/node.h"

/* The key of nodes[0..n) (NULL slots skipped). An input a node reads is named by the node
 * and output that made its storage inside the program, else by its position among
 * inputs[0..n_inputs) (the step's inputs, matched by storage), else as "from outside".
 * UINT64_MAX (never a key) when there is no host memory for the bookkeeping. */
uint64_t kn_program_key(kn_node *const *nodes, int n, kn_tensor *const *inputs, int n_inputs);

#endif
