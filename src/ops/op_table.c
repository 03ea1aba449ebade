/* The op table, expanded from the .def lists. */
#include "ops/op_table.h"

#include <string.h>

const kn_op_def kn_op_table[KN_OP_COUNT] = {
#define KN_OP(name_, kind_, dtypes_, flags_, expr_) \
    [KN_OP_##name_] = {.name = #name_, .kind = kind_, .dtypes = dtypes_, .flags = flags_, .expr = expr_},
#include "ops/defs/all.def"
#undef KN_OP
};

int kn_op_lookup(const char *name) {
    for (int i = 0; i < KN_OP_COUNT; i++)
        if (strcmp(kn_op_table[i].name, name) == 0) return i;
    return -1;
}
