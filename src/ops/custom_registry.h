/* The registry of custom ops (include/kiln/custom_op.h): id -> definition, for the API
 * function, the kernels and the gradient of the one table op `custom`. */
#ifndef KILN_OPS_CUSTOM_REGISTRY_H
#define KILN_OPS_CUSTOM_REGISTRY_H

#include "kiln/custom_op.h"
#include "ops/op_table.h"

/* A registered op: the caller's definition with name and source copied. Immutable once
 * registered, so it is read without locks from any thread. */
typedef struct kn_custom_entry {
    kn_custom_op_def def;
    int id;
} kn_custom_entry;

/* The op with this id, or NULL. */
const kn_custom_entry *kn_custom_get(int id);
/* The entry of a `custom` node's op (its id is valid: the API function checked it). */
static inline const kn_custom_entry *kn_custom_of(const kn_attrs *a) { return kn_custom_get((int)a->custom.id); }

/* The name errors give an op: the registered name for `custom` nodes, else the table's. */
const char *kn_op_name_in(kn_op_id op, const kn_attrs *attrs);

#endif
