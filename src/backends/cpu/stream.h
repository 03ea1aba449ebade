/* The CPU device's stream: one worker thread runs queued tasks in order. */
#ifndef KILN_BACKENDS_CPU_STREAM_H
#define KILN_BACKENDS_CPU_STREAM_H

#include "kiln/status.h"

typedef kn_status (*kn_task_fn)(void *arg);

/* Queues fn(arg); blocks only while the queue is full. */
void kn_cpu_stream_push(kn_task_fn fn, void *arg);
/* Waits until every queued task has run; returns (and clears) the first error a task
 * reported, with its message set as this thread's last error. */
kn_status kn_cpu_stream_sync(void);

#endif
