/* The autocast policy (kiln/autocast.h) as the dispatcher applies it to every op it records. */
#ifndef KILN_EXEC_AUTOCAST_H
#define KILN_EXEC_AUTOCAST_H

#include "ops/op_table.h"

/* Under autocast, the inputs op runs on: out[i] is in[i] or a recorded cast of it (the caller
 * releases those with kn_autocast_release). Returns false (error kept) if a cast failed, and
 * *changed false with out untouched when op keeps its inputs as they are. n_in at most
 * KN_NODE_MAX_IN for an op the policy names. */
bool kn_autocast_inputs(kn_op_id op, int n_in, kn_tensor *const *in, kn_tensor **out, bool *changed);
void kn_autocast_release(int n_in, kn_tensor *const *in, kn_tensor *const *out);
/* How autocast casts x to dtype, a recorded op (autograd sees it): installed before main by the
 * op functions' layer (ops/elementwise.c), which exec sits below. Unset (no op functions
 * linked), autocast casts nothing. */
void kn_autocast_install_cast(kn_tensor *(*cast)(kn_tensor *x, kn_dtype dtype));

/* The dtype an input of dtype d of an op that autocasts to the low dtype is brought to: the
 * autocast dtype, or d itself when autocast is off or d is not cast (f64, integers). For
 * ops made of several nodes whose extra inputs join the product (linear's bias). */
kn_dtype kn_autocast_low_for(kn_dtype d);

#endif
