/* `kiln train TASK --device meta`: the task's training steps traced on a device that holds
 * shapes and no values, for their ops, FLOPs and peak memory. */
#ifndef KILN_TOOLS_TRAIN_TRACE_H
#define KILN_TOOLS_TRAIN_TRACE_H

#include "train_loop.h"

/* Records o->steps steps of the job (forward, backward, AdamW) and prints the trace. Reads no
 * loss, evaluates nothing, writes nothing. 0 on success; on failure prints the error and
 * returns 1. */
int train_trace(const train_options *o, const train_job *job, kn_optimizer *opt);

#endif
