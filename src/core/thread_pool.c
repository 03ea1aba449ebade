/* kiln's thread pool (thread_pool.h). One loop runs at a time. Its chunks are claimed through
 * one 64-bit word, `claim` = loop id << 32 | chunks << 16 | next chunk, so a worker that wakes
 * late can never take a chunk of a loop that has ended: its compare-and-swap names the loop.
 * The owner waits only for chunks that were claimed, never for a worker that did not start. */
#include "core/thread_pool.h"

#include "core/stats.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Idle spin, in pause instructions (~20 ns each here): about 50 us, enough to cover the gap
 * between two kernels of a stream, short enough that a sleeping pool costs no core. */
#define SPINS 2500


typedef struct pool {
    pthread_mutex_t lock;       /* resizing and starting workers */
    atomic_int size;            /* threads, the owner included */
    int started;                /* workers running; changed with `held` taken */
    pthread_t *workers;
    atomic_bool held;           /* a loop owns the pool */
    atomic_bool quit;           /* workers exit (resize) */

    /* The current loop: written by its owner before `claim` publishes it. */
    kn_chunk_fn fn;
    void *ctx;
    int64_t n;
    uint32_t id;
    _Atomic uint64_t claim;
    _Alignas(64) atomic_uint finished;  /* chunks run; the owner sleeps on it */
    atomic_int owner_sleeping;
    _Alignas(64) atomic_uint wake;      /* the newest loop id; idle workers sleep on it */
    atomic_int sleepers;

    /* Stall tracking, read and written by the loop's owner only (the pool is held). */
    unsigned window_loops, window_stalls;
    int64_t solo_until; /* CLOCK_MONOTONIC ns */
} pool;

static pool P = {.lock = PTHREAD_MUTEX_INITIALIZER, .size = 1};
static _Thread_local bool in_pool; /* a worker, or an owner running its chunks */

static void futex_wait(atomic_uint *addr, unsigned value) {
    syscall(SYS_futex, (unsigned *)addr, FUTEX_WAIT_PRIVATE, value, NULL, NULL, 0);
}

static void futex_wake(atomic_uint *addr, int count) {
    syscall(SYS_futex, (unsigned *)addr, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void run_chunk(unsigned c, unsigned chunks) {
    int64_t begin = P.n * c / chunks, end = P.n * (c + 1) / chunks;
    P.fn(P.ctx, begin, end, (int)c);
    if (atomic_fetch_add_explicit(&P.finished, 1, memory_order_acq_rel) + 1 == chunks &&
        atomic_load(&P.owner_sleeping))
        futex_wake(&P.finished, 1);
}

/* Claims and runs chunks of loop `id` until none is left. */
static void take_chunks(uint32_t id) {
    uint64_t s = atomic_load_explicit(&P.claim, memory_order_acquire);
    for (;;) {
        unsigned next = (unsigned)(s & 0xffff), chunks = (unsigned)(s >> 16 & 0xffff);
        if ((uint32_t)(s >> 32) != id || next >= chunks) return;
        if (atomic_compare_exchange_weak_explicit(&P.claim, &s, s + 1, memory_order_acq_rel, memory_order_acquire)) {
            run_chunk(next, chunks);
            s = atomic_load_explicit(&P.claim, memory_order_acquire);
        }
    }
}

static void *worker_main(void *arg) {
    (void)arg;
    in_pool = true;
    pthread_setname_np(pthread_self(), "kiln-pool"); /* what top, perf and gdb show */
    unsigned seen = atomic_load(&P.wake);
    for (;;) {
        unsigned w;
        for (int spins = 0; (w = atomic_load_explicit(&P.wake, memory_order_acquire)) == seen;) {
            if (atomic_load_explicit(&P.quit, memory_order_relaxed)) return NULL;
            if (++spins < SPINS) {
                cpu_relax();
                continue;
            }
            atomic_fetch_add(&P.sleepers, 1);
            if (atomic_load(&P.wake) == seen && !atomic_load(&P.quit)) futex_wait(&P.wake, seen);
            atomic_fetch_sub(&P.sleepers, 1);
        }
        if (atomic_load(&P.quit)) return NULL;
        seen = w;
        take_chunks(w);
    }
}

static void stop_workers(void) {
    atomic_store(&P.quit, true);
    atomic_fetch_add(&P.wake, 1);
    futex_wake(&P.wake, INT_MAX);
    for (int i = 0; i < P.started; i++) pthread_join(P.workers[i], NULL);
    P.started = 0;
    atomic_store(&P.quit, false);
}

/* Starts the workers the size asks for; `held` is taken. A worker that cannot start leaves
 * its share to the others and the owner. */
static void start_workers(int want) {
    pthread_mutex_lock(&P.lock);
    if (P.started != want) {
        if (P.started) stop_workers();
        free(P.workers);
        P.workers = calloc((size_t)want, sizeof *P.workers);
        for (int i = 0; P.workers && i < want; i++) {
            if (pthread_create(&P.workers[P.started], NULL, worker_main, NULL) != 0) break;
            P.started++;
        }
    }
    pthread_mutex_unlock(&P.lock);
}

static bool take_pool(void) {
    bool expected = false;
    return atomic_compare_exchange_strong(&P.held, &expected, true);
}

/* Every chunk on the calling thread; loops inside them run inline too. */
static void run_inline(int64_t n, int chunks, kn_chunk_fn fn, void *ctx) {
    bool was = in_pool;
    in_pool = true;
    for (int c = 0; c < chunks; c++) fn(ctx, n * c / chunks, n * (c + 1) / chunks, c);
    in_pool = was;
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Counts a loop that used the workers (stalled or not) and starts a solo period when the
 * window holds enough stalls. */
static void count_loop(bool stalled, int64_t now) {
    if (stalled) kn_stat_add(KN_STAT_POOL_STALLS, 1);
    P.window_stalls += stalled;
    if (++P.window_loops < KN_POOL_WINDOW && P.window_stalls < KN_POOL_STALLS_TO_SOLO) return;
    if (P.window_stalls >= KN_POOL_STALLS_TO_SOLO) {
        P.solo_until = now + KN_POOL_SOLO_NS;
        kn_stat_add(KN_STAT_POOL_SOLO_PERIODS, 1);
    }
    P.window_loops = P.window_stalls = 0;
}

void kn_parallel_run(int64_t n, int chunks, kn_chunk_fn fn, void *ctx) {
    if (n <= 0) return;
    if (chunks > n) chunks = (int)n;
    if (chunks > KN_MAX_CHUNKS) chunks = KN_MAX_CHUNKS;
    int size = atomic_load_explicit(&P.size, memory_order_relaxed);
    if (chunks <= 1 || size <= 1 || in_pool || !take_pool()) {
        run_inline(n, chunks < 1 ? 1 : chunks, fn, ctx);
        return;
    }
    const int64_t start = now_ns();
    if (start < P.solo_until) {
        run_inline(n, chunks, fn, ctx);
        atomic_store_explicit(&P.held, false, memory_order_release);
        return;
    }
    if (P.started != size - 1) start_workers(size - 1);

    P.fn = fn, P.ctx = ctx, P.n = n;
    atomic_store_explicit(&P.finished, 0, memory_order_relaxed);
    uint32_t id = ++P.id;
    atomic_store_explicit(&P.claim, (uint64_t)id << 32 | (uint64_t)chunks << 16, memory_order_release);
    atomic_store(&P.wake, id);
    if (atomic_load(&P.sleepers)) futex_wake(&P.wake, INT_MAX);

    in_pool = true;
    take_chunks(id);
    in_pool = false;
    const int64_t own_done = now_ns();

    /* Wait for chunks other threads still run: spin briefly, then sleep, so that a worker that
     * shares its core with another process gets the core back sooner. */
    for (int spins = 0; atomic_load_explicit(&P.finished, memory_order_acquire) != (unsigned)chunks && spins < SPINS;
         spins++)
        cpu_relax();
    unsigned f;
    if ((f = atomic_load_explicit(&P.finished, memory_order_acquire)) != (unsigned)chunks) {
        atomic_store(&P.owner_sleeping, 1);
        while ((f = atomic_load(&P.finished)) != (unsigned)chunks) futex_wait(&P.finished, f);
        atomic_store(&P.owner_sleeping, 0);
    }
    const int64_t end = now_ns(), waited = end - own_done;
    count_loop(waited > KN_POOL_STALL_NS && waited > own_done - start, end);
    atomic_store_explicit(&P.held, false, memory_order_release);
}

int kn_parallel_chunks(int64_t n, int64_t cost) {
    int size = atomic_load_explicit(&P.size, memory_order_relaxed);
    if (size <= 1 || n <= 1) return 1;
    if (cost < 1) cost = 1;
    int64_t work = n > INT64_MAX / cost ? INT64_MAX : n * cost;
    if (work < 2 * KN_PARALLEL_GRAIN) return 1;
    int64_t chunks = work / KN_PARALLEL_GRAIN, most = 4 * (int64_t)size;
    if (chunks > most) chunks = most;
    if (chunks > n) chunks = n;
    return chunks > KN_MAX_CHUNKS ? KN_MAX_CHUNKS : (int)chunks;
}

int kn_pool_threads(void) { return atomic_load_explicit(&P.size, memory_order_relaxed); }

static void register_fork_handler(void);

void kn_pool_resize(int threads) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_fork_handler);
    if (threads < 1) threads = 1;
    if (threads == atomic_load(&P.size)) return;
    while (!take_pool()) sched_yield(); /* a loop in flight ends first */
    pthread_mutex_lock(&P.lock);
    if (P.started) stop_workers();
    atomic_store(&P.size, threads);
    pthread_mutex_unlock(&P.lock);
    atomic_store_explicit(&P.held, false, memory_order_release);
}

/* A forked child has none of the parent's workers: it starts its own when it needs them. */
static void forget_workers_in_child(void) {
    P.started = 0;
    P.window_loops = P.window_stalls = 0, P.solo_until = 0;
    atomic_store(&P.held, false);
    atomic_store(&P.sleepers, 0);
    atomic_store(&P.owner_sleeping, 0);
    pthread_mutex_init(&P.lock, NULL);
}

static void register_fork_handler(void) {
    pthread_atfork(NULL, NULL, forget_workers_in_child);
}
