/* layout ops. */
#ifndef KILN_OPS_LAYOUT_H
#define KILN_OPS_LAYOUT_H

#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
