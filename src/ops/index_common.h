/* Argument helpers the index family's API files share. */
#ifndef KILN_OPS_INDEX_COMMON_H
#define KILN_OPS_INDEX_COMMON_H

#include "exec/dispatch.h"

/* In a shape rule: index is i32 or i64, else KN_ERR_DTYPE with the reason (naming `what`)
 * in why. */
kn_status kn_index_dtype_why(const kn_tensor *index, const char *what, char *why, size_t why_size);
/* Replaces input i with t and drops the caller's reference; t NULL frees the node, false. */
bool kn_index_set_input(kn_opctx *c, int i, kn_tensor *t);

#endif
