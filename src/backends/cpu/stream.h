/* A CPU stream's queue: one worker thread runs queued tasks in order. */
#ifndef KILN_BACKENDS_CPU_STREAM_H
#define KILN_BACKENDS_CPU_STREAM_H

#include "backends/backend.h"

typedef struct kn_cpu_queue kn_cpu_queue;

/* A queue for stream s; its worker starts when the first task is pushed. NULL if out of memory. */
kn_cpu_queue *kn_cpu_queue_new(kn_stream *s);
/* Waits for the queued work, stops the worker and frees the queue. */
void kn_cpu_queue_free(kn_cpu_queue *q);
/* Queues t; blocks only while the queue is full. */
void kn_cpu_queue_push(kn_cpu_queue *q, kn_task *t);
/* Waits until every queued task has run. */
void kn_cpu_queue_wait(kn_cpu_queue *q);

#endif
