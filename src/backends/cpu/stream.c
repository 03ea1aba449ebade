/* A CPU stream: a bounded ring of tasks and one worker thread, started with the first task.
 * The host spins briefly before sleeping, and so does the worker, so that a steady flow of
 * small ops costs no system calls. */
#include "backends/cpu/stream.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#define RING 4096
/* Spin budgets, in pause instructions (~20 ns each here). The worker waits ~100 us for the
 * next op before sleeping; a host waiting for results spins only ~10 us, because while it
 * spins it holds a core the kernels (and OpenBLAS's threads) need. */
#define WORKER_SPINS 5000
#define SYNC_SPINS 500

struct kn_cpu_queue {
    kn_stream *stream;
    atomic_bool started;
    bool stop;                   /* guarded by lock: the worker exits once the ring is empty */
    pthread_t worker;
    pthread_mutex_t lock;
    pthread_cond_t has_work, has_room, idle;
    kn_task *ring[RING];
    size_t head, count;          /* guarded by lock */
    atomic_size_t queued;        /* pushed and not yet finished */
    atomic_int worker_sleeping, room_waiters, idle_waiters;
    struct kn_cpu_queue *next;   /* every live queue, for the drain at exit */
};

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static kn_cpu_queue *live;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void *worker_main(void *arg) {
    kn_cpu_queue *q = arg;
    pthread_setname_np(pthread_self(), "kiln-stream"); /* what top, perf and gdb show */
    for (;;) {
        for (int i = 0; i < WORKER_SPINS && atomic_load_explicit(&q->queued, memory_order_acquire) == 0; i++) cpu_relax();
        pthread_mutex_lock(&q->lock);
        while (q->count == 0 && !q->stop) {
            atomic_store(&q->worker_sleeping, 1);
            pthread_cond_wait(&q->has_work, &q->lock);
            atomic_store(&q->worker_sleeping, 0);
        }
        if (q->count == 0) { /* stopped and drained */
            pthread_mutex_unlock(&q->lock);
            return NULL;
        }
        kn_task *t = q->ring[q->head];
        q->head = (q->head + 1) % RING;
        q->count--;
        if (atomic_load(&q->room_waiters)) pthread_cond_signal(&q->has_room);
        pthread_mutex_unlock(&q->lock);

        kn_task_run(q->stream, t);
        if (atomic_fetch_sub(&q->queued, 1) == 1 && atomic_load(&q->idle_waiters)) {
            pthread_mutex_lock(&q->lock);
            pthread_cond_broadcast(&q->idle);
            pthread_mutex_unlock(&q->lock);
        }
    }
}

/* Work still queued when the program exits is finished first, so that no kernel runs while
 * the process tears down. */
static void drain_at_exit(void) {
    pthread_mutex_lock(&live_lock);
    for (kn_cpu_queue *q = live; q; q = q->next) kn_cpu_queue_wait(q);
    pthread_mutex_unlock(&live_lock);
}

static void register_exit_drain(void) { atexit(drain_at_exit); }

kn_cpu_queue *kn_cpu_queue_new(kn_stream *s) {
    kn_cpu_queue *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    q->stream = s;
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->has_work, NULL);
    pthread_cond_init(&q->has_room, NULL);
    pthread_cond_init(&q->idle, NULL);
    pthread_once(&exit_once, register_exit_drain);
    pthread_mutex_lock(&live_lock);
    q->next = live;
    live = q;
    pthread_mutex_unlock(&live_lock);
    return q;
}

void kn_cpu_queue_free(kn_cpu_queue *q) {
    if (!q) return;
    pthread_mutex_lock(&live_lock);
    for (kn_cpu_queue **p = &live; *p; p = &(*p)->next)
        if (*p == q) {
            *p = q->next;
            break;
        }
    pthread_mutex_unlock(&live_lock);
    pthread_mutex_lock(&q->lock);
    q->stop = true;
    pthread_cond_signal(&q->has_work);
    pthread_mutex_unlock(&q->lock);
    if (atomic_load(&q->started)) pthread_join(q->worker, NULL);
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->has_work);
    pthread_cond_destroy(&q->has_room);
    pthread_cond_destroy(&q->idle);
    free(q);
}

static void start_worker(kn_cpu_queue *q) {
    pthread_mutex_lock(&q->lock);
    if (!atomic_load(&q->started)) {
        pthread_create(&q->worker, NULL, worker_main, q);
        atomic_store_explicit(&q->started, true, memory_order_release);
    }
    pthread_mutex_unlock(&q->lock);
}

void kn_cpu_queue_push(kn_cpu_queue *q, kn_task *t) {
    if (!atomic_load_explicit(&q->started, memory_order_acquire)) start_worker(q);
    atomic_fetch_add(&q->queued, 1);
    pthread_mutex_lock(&q->lock);
    while (q->count == RING) {
        atomic_fetch_add(&q->room_waiters, 1);
        pthread_cond_wait(&q->has_room, &q->lock);
        atomic_fetch_sub(&q->room_waiters, 1);
    }
    q->ring[(q->head + q->count) % RING] = t;
    q->count++;
    if (atomic_load(&q->worker_sleeping)) pthread_cond_signal(&q->has_work);
    pthread_mutex_unlock(&q->lock);
}

void kn_cpu_queue_wait(kn_cpu_queue *q) {
    for (int i = 0; i < SYNC_SPINS && atomic_load_explicit(&q->queued, memory_order_acquire) != 0; i++) cpu_relax();
    if (atomic_load_explicit(&q->queued, memory_order_acquire) == 0) return;
    pthread_mutex_lock(&q->lock);
    if (atomic_load(&q->queued) != 0) {
        atomic_fetch_add(&q->idle_waiters, 1);
        while (atomic_load(&q->queued) != 0) pthread_cond_wait(&q->idle, &q->lock);
        atomic_fetch_sub(&q->idle_waiters, 1);
    }
    pthread_mutex_unlock(&q->lock);
}
