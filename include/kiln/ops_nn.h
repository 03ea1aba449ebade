/* nn ops. */
#ifndef KILN_OPS_NN_H
#define KILN_OPS_NN_H

#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
