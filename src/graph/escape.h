/* Whether a value a program makes can be seen outside a stretch of its nodes: the question
 * fusion (may a chain's value stay in registers?) and common subexpressions (may two values
 * share memory?) both ask. Answered from reference counts: every reference the stretch's nodes
 * hold is accounted for, and any other one is someone outside. */
#ifndef KILN_GRAPH_ESCAPE_H
#define KILN_GRAPH_ESCAPE_H

#include <stdbool.h>

#include "graph/node.h"

/* Whether something outside nodes[first .. first + count) can still see t, a value one of
 * them makes: another reference than the producing node's and those nodes' uses, or another
 * tensor on its storage (a view) that is not merely a handle those nodes hold to the same
 * elements (an op's API function may hand its node a fresh handle of an input). */
bool kn_value_escapes(kn_node *const *nodes, int first, int count, kn_tensor *t);

#endif
