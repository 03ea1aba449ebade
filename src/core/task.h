/* Work handed to a stream, and the completion list that gives finished work back to its
 * owner on a host thread. A backend runs tasks and reports them complete; it never frees
 * what it ran (exec owns nodes, DESIGN.md "Backends: one interface"). */
#ifndef KILN_CORE_TASK_H
#define KILN_CORE_TASK_H

#include <stdbool.h>

#include "kiln/status.h"

struct kn_stream;

typedef struct kn_task {
    kn_status (*run)(void *ctx); /* on the stream's thread; an error becomes the stream's */
    void (*done)(void *ctx);     /* on a host thread after run (see kn_tasks_drain); NULL: run owns
                                    the task and may free it, nothing is reported back */
    void *ctx;
    bool (*settle)(void *ctx);   /* optional, on the stream's thread after run: lets go of what
                                    is safe to let go of there; true if that was everything (the
                                    task is then finished, and done is not called) */
    struct kn_task *next;        /* the completion list's link */
} kn_task;

/* Runs t on the calling thread as stream s's: an error is noted on s, and a task with `done`
 * that `settle` did not finish goes to the completion list. Backends' stream workers call this for every task. */
void kn_task_run(struct kn_stream *s, kn_task *t);
/* Calls `done` of every completed task, on this thread. Cheap when nothing completed: exec
 * calls it when it records an op, and every synchronization calls it. */
void kn_tasks_drain(void);

#endif
