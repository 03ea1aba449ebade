/* The CPU stream: a bounded ring of tasks and one worker thread. The host spins briefly
 * before sleeping, and so does the worker, so that a steady flow of small ops costs no
 * system calls. */
#include "backends/cpu/stream.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

#define RING 4096
/* Spin budgets, in pause instructions (~20 ns each here). The worker waits ~100 us for the
 * next op before sleeping; a host waiting for results spins only ~10 us, because while it
 * spins it holds a core the kernels (and OpenBLAS's threads) need. */
#define WORKER_SPINS 5000
#define SYNC_SPINS 500

typedef struct task {
    kn_task_fn fn;
    void *arg;
} task;

static struct {
    pthread_once_t once;
    pthread_t worker;
    pthread_mutex_t lock;
    pthread_cond_t has_work, has_room, idle;
    task ring[RING];
    size_t head, count;          /* guarded by lock */
    atomic_size_t queued;        /* pushed and not yet finished */
    atomic_int worker_sleeping, room_waiters, idle_waiters;
    kn_status error;             /* first asynchronous error, guarded by lock */
    char message[1024];
} S = {.once = PTHREAD_ONCE_INIT,
       .lock = PTHREAD_MUTEX_INITIALIZER,
       .has_work = PTHREAD_COND_INITIALIZER,
       .has_room = PTHREAD_COND_INITIALIZER,
       .idle = PTHREAD_COND_INITIALIZER};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void *worker_main(void *unused) {
    (void)unused;
    for (;;) {
        for (int i = 0; i < WORKER_SPINS && atomic_load_explicit(&S.queued, memory_order_acquire) == 0; i++) cpu_relax();
        pthread_mutex_lock(&S.lock);
        while (S.count == 0) {
            atomic_store(&S.worker_sleeping, 1);
            pthread_cond_wait(&S.has_work, &S.lock);
            atomic_store(&S.worker_sleeping, 0);
        }
        task t = S.ring[S.head];
        S.head = (S.head + 1) % RING;
        S.count--;
        if (atomic_load(&S.room_waiters)) pthread_cond_signal(&S.has_room);
        pthread_mutex_unlock(&S.lock);

        kn_status st = t.fn(t.arg);
        if (st != KN_OK) {
            pthread_mutex_lock(&S.lock);
            if (S.error == KN_OK) {
                S.error = st;
                snprintf(S.message, sizeof S.message, "%s (reported asynchronously)", kn_last_error());
            }
            pthread_mutex_unlock(&S.lock);
            kn_clear_error();
        }
        if (atomic_fetch_sub(&S.queued, 1) == 1 && atomic_load(&S.idle_waiters)) {
            pthread_mutex_lock(&S.lock);
            pthread_cond_broadcast(&S.idle);
            pthread_mutex_unlock(&S.lock);
        }
    }
    return NULL;
}

/* Work still queued when the program exits is finished first, so that no kernel runs while
 * the process tears down. */
static void drain_at_exit(void) { kn_cpu_stream_sync(); }

static void start_worker(void) {
    atexit(drain_at_exit);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_create(&S.worker, &attr, worker_main, NULL);
    pthread_attr_destroy(&attr);
}

void kn_cpu_stream_push(kn_task_fn fn, void *arg) {
    pthread_once(&S.once, start_worker);
    atomic_fetch_add(&S.queued, 1);
    pthread_mutex_lock(&S.lock);
    while (S.count == RING) {
        atomic_fetch_add(&S.room_waiters, 1);
        pthread_cond_wait(&S.has_room, &S.lock);
        atomic_fetch_sub(&S.room_waiters, 1);
    }
    S.ring[(S.head + S.count) % RING] = (task){fn, arg};
    S.count++;
    if (atomic_load(&S.worker_sleeping)) pthread_cond_signal(&S.has_work);
    pthread_mutex_unlock(&S.lock);
}

kn_status kn_cpu_stream_sync(void) {
    for (int i = 0; i < SYNC_SPINS && atomic_load_explicit(&S.queued, memory_order_acquire) != 0; i++) cpu_relax();
    pthread_mutex_lock(&S.lock);
    if (atomic_load(&S.queued) != 0) {
        atomic_fetch_add(&S.idle_waiters, 1);
        while (atomic_load(&S.queued) != 0) pthread_cond_wait(&S.idle, &S.lock);
        atomic_fetch_sub(&S.idle_waiters, 1);
    }
    kn_status st = S.error;
    if (st != KN_OK) {
        kn_error(st, "%s", S.message);
        S.error = KN_OK;
    }
    pthread_mutex_unlock(&S.lock);
    return st;
}
