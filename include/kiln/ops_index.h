/* index ops. */
#ifndef KILN_OPS_INDEX_H
#define KILN_OPS_INDEX_H

#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
