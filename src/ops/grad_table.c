/* The gradient half of the op table, expanded from defs/grad.def. */
#include "ops/grad.h"

const kn_grad_def kn_grad_table[KN_OP_COUNT] = {
#define KN_GRAD(name, saves_) [KN_OP_##name] = {.fn = kn_grad_##name, .saves = (saves_)},
#define KN_NO_GRAD(name) [KN_OP_##name] = {.nondiff = true},
#include "ops/defs/grad.def"
#undef KN_GRAD
#undef KN_NO_GRAD
};

/* The link to the op table, checked when this file compiles: every entry names an op (its
 * KN_OP_<name> above), no op is listed twice (the constants below would collide), and every
 * op is listed, as a formula or as carrying no gradient. */
enum {
#define KN_GRAD(name, saves_) KN_GRAD_LISTED_##name,
#define KN_NO_GRAD(name) KN_GRAD_LISTED_##name,
#include "ops/defs/grad.def"
#undef KN_GRAD
#undef KN_NO_GRAD
};
#define KN_OP(name, ...) _Static_assert(KN_GRAD_LISTED_##name >= 0, #name " needs KN_GRAD or KN_NO_GRAD");
#include "ops/defs/all.def"
#undef KN_OP
