/* Token batches for the tasks that train on a token file (gpt2, llama, qwen2, qwen3, lm). */
#ifndef KILN_TOOLS_TRAIN_DATA_H
#define KILN_TOOLS_TRAIN_DATA_H

#include <kiln/kiln.h>

#include "train_options.h"

/* Opens --data for a model of `vocab` ids and `positions` positions; a trace opens nothing
 * (*out = NULL) and reads zeros. Prints what was wrong ("kiln train TASK: ...") and returns
 * false. */
bool train_tokens_open(const train_options *o, const char *task, int64_t vocab, int64_t positions, kn_token_loader **out);
/* Micro-batch g's [B, T] int64 inputs and targets: from the loader (CPU tensors), or zeros on
 * the default device when it is NULL (a trace, where only the shapes count). */
kn_status train_tokens_batch(kn_token_loader *l, const train_options *o, int64_t g, kn_tensor **x, kn_tensor **y);

#endif
