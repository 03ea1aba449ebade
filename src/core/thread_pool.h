/* kiln's thread pool: the one set of threads that runs every parallel loop of the CPU kernels,
 * of the generated kernels and of the matrix products (each BLAS or oneDNN call in a chunk runs
 * on one thread). The thread that asks for a loop (a stream's worker, or the host in debug mode)
 * takes chunks itself, so a pool of N threads is N - 1 workers plus that thread: nothing is
 * ever oversubscribed by construction (docs/decisions.md, "kiln's thread pool").
 *
 * Chunks go to whichever thread is free, so a thread whose core another process holds takes
 * fewer of them and the loop ends about when the free threads finish. Chunk boundaries depend
 * only on the item count, the work and the pool's size, never on which thread ran what: a
 * kernel that keeps one partial result per chunk and combines them in chunk order gives the
 * same bits run after run. Idle workers spin briefly (~50 us) and then sleep on a futex. */
#ifndef KILN_CORE_THREAD_POOL_H
#define KILN_CORE_THREAD_POOL_H

#include <stdint.h>

/* One chunk: items [begin, end) of the loop, and the chunk's index. */
typedef void (*kn_chunk_fn)(void *ctx, int64_t begin, int64_t end, int chunk);

/* The most chunks a loop is ever split into (per-chunk scratch can be sized by it). */
#define KN_MAX_CHUNKS 1024

/* Below about this much work (elements touched by simple code), one thread beats waking others. */
#define KN_PARALLEL_GRAIN 32768

/* How many chunks n items of `cost` work each are split into: 1 when the pool has one thread
 * or the whole is under two grains; else one per grain of work, at most n and at most four per
 * thread, so that a late thread leaves little behind. */
int kn_parallel_chunks(int64_t n, int64_t cost);

/* Runs fn on chunks 0 .. chunks - 1 of [0, n), chunk c covering [n*c/chunks, n*(c+1)/chunks),
 * on the pool and the calling thread, and returns when every chunk has run. From inside a
 * chunk, or while another thread's loop holds the pool, every chunk runs on the calling thread. */
void kn_parallel_run(int64_t n, int chunks, kn_chunk_fn fn, void *ctx);

/* Stalls. A loop whose owner, after its own chunks, waited over KN_POOL_STALL_NS for another
 * thread's chunk, and longer than it worked itself, met a worker that was not running: another
 * process holds that worker's core, and the owner waits out that process's time slice (ms).
 * When KN_POOL_STALLS_TO_SOLO of the last KN_POOL_WINDOW loops that used the workers stalled,
 * the owner runs every chunk itself for KN_POOL_SOLO_NS, then tries the workers again: with a
 * core taken, the pool runs at one thread's speed rather than below it. The chunks are the
 * same either way, so results do not change. */
#define KN_POOL_STALL_NS 1000000
#define KN_POOL_WINDOW 32
#define KN_POOL_STALLS_TO_SOLO 4
#define KN_POOL_SOLO_NS 50000000

/* kn_parallel_run with kn_parallel_chunks(n, cost) chunks. */
static inline void kn_parallel_for(int64_t n, int64_t cost, kn_chunk_fn fn, void *ctx) {
    kn_parallel_run(n, kn_parallel_chunks(n, cost), fn, ctx);
}

/* The pool's size, calling thread included (kn_set_num_threads / KILN_THREADS). */
int kn_pool_threads(void);
/* Sets the size; workers start when a loop first needs them and stop when the size shrinks. */
void kn_pool_resize(int threads);

#endif
