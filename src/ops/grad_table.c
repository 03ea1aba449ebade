/* The gradient half of the op table, expanded from defs/grad.def. */
#include "ops/grad.h"

const kn_grad_def kn_grad_table[KN_OP_COUNT] = {
#define KN_GRAD(name, saves_) [KN_OP_##name] = {.fn = kn_grad_##name, .saves = (saves_)},
#define KN_NO_GRAD(name) [KN_OP_##name] = {.nondiff = true},
#include "ops/defs/grad.def"
#undef KN_GRAD
#undef KN_NO_GRAD
};
