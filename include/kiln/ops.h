/* All ops, family by family. */
#ifndef KILN_OPS_H
#define KILN_OPS_H

#include "kiln/ops_create.h"
#include "kiln/ops_elementwise.h"
#include "kiln/ops_index.h"
#include "kiln/ops_layout.h"
#include "kiln/ops_linalg.h"
#include "kiln/ops_loss.h"
#include "kiln/ops_nn.h"
#include "kiln/ops_reduce.h"

#endif
