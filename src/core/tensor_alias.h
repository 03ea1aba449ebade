/* Finding the handles of a list that show the same tensor (tied weights), in O(n log n). */
#ifndef KILN_CORE_TENSOR_ALIAS_H
#define KILN_CORE_TENSOR_ALIAS_H

#include <stdbool.h>

#include "kiln/tensor.h"

/* Handles that share storage and offset are candidates; same() decides (an equivalence
 * finer than that, e.g. kn_tensor_same_view). first[i] receives the index of the first
 * handle of the list that is the same as t[i] (i itself when none before it is). False with a
 * KN_ERR_OOM error on out-of-memory. */
bool kn_tensor_first_alias(kn_tensor *const *t, int n, bool (*same)(const kn_tensor *a, const kn_tensor *b),
                           int *first);

#endif
