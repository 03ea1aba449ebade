/* kiln: a deep-learning runtime in C. This header includes every subsystem. */
#ifndef KILN_H
#define KILN_H

#include "kiln/atomic_file.h"
#include "kiln/autocast.h"
#include "kiln/compile.h"
#include "kiln/dtype.h"
#include "kiln/io.h"
#include "kiln/hf.h"
#include "kiln/tokenizer.h"
#include "kiln/ops.h"
#include "kiln/optable.h"
#include "kiln/runtime.h"
#include "kiln/autograd.h"
#include "kiln/custom_op.h"
#include "kiln/nn.h"
#include "kiln/data.h"
#include "kiln/optim.h"
#include "kiln/profile.h"
#include "kiln/stats.h"
#include "kiln/stream.h"
#include "kiln/status.h"
#include "kiln/tensor.h"
#include "kiln/tokenizer.h"

#endif
