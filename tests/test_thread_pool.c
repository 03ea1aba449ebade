/* kiln's thread pool: every item of a loop runs exactly once, in the chunks the pool promised,
 * whatever the pool's size; loops inside loops and loops from two threads at once finish; the
 * chunk count depends only on the work and the size; a forked child has a working pool; many
 * tiny loops in a row never lose a wake-up (a hang would end in ctest's timeout); and stalled
 * workers send loops to their owner alone for a while. */
#define _DEFAULT_SOURCE /* usleep */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/thread_pool.h"
#include "harness.h"

typedef struct cover {
    int64_t n;
    int chunks;
    atomic_int *hits;
    atomic_int bad_bounds;
} cover;

static void cover_chunk(void *ctx, int64_t begin, int64_t end, int chunk) {
    cover *c = ctx;
    if (begin != c->n * chunk / c->chunks || end != c->n * (chunk + 1) / c->chunks) atomic_fetch_add(&c->bad_bounds, 1);
    for (int64_t i = begin; i < end; i++) atomic_fetch_add(&c->hits[i], 1);
}

/* Runs a loop of n items in `chunks` chunks and checks each item ran once at its chunk's place. */
static void check_cover(int64_t n, int chunks) {
    cover c = {.n = n, .chunks = chunks < 1 ? 1 : chunks > n ? (int)n : chunks};
    if (c.chunks > KN_MAX_CHUNKS) c.chunks = KN_MAX_CHUNKS;
    c.hits = calloc((size_t)(n > 0 ? n : 1), sizeof *c.hits);
    kn_parallel_run(n, chunks, cover_chunk, &c);
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; i++) wrong += atomic_load(&c.hits[i]) != 1;
    CHECK_MSG(wrong == 0 && atomic_load(&c.bad_bounds) == 0, "n=%lld chunks=%d: %lld items not run once, %d chunks misplaced",
              (long long)n, chunks, (long long)wrong, atomic_load(&c.bad_bounds));
    free(c.hits);
}

static void test_every_item_runs_once(void) {
    const int sizes[] = {1, 2, 3, 8};
    const int64_t ns[] = {0, 1, 2, 7, 100, 4096, 100003};
    const int chunks[] = {1, 2, 3, 8, 64, 5000};
    for (int s = 0; s < 4; s++) {
        kn_set_num_threads(sizes[s]);
        CHECK(kn_get_num_threads() == sizes[s]);
        for (int i = 0; i < 7; i++)
            for (int j = 0; j < 6; j++) check_cover(ns[i], chunks[j]);
    }
    kn_set_num_threads(2);
}

static void test_chunk_count_follows_work_and_size(void) {
    kn_set_num_threads(1);
    CHECK(kn_parallel_chunks(1 << 20, 100) == 1);
    kn_set_num_threads(2);
    CHECK(kn_parallel_chunks(100, 1) == 1);                      /* under two grains */
    CHECK(kn_parallel_chunks(1, 1 << 30) == 1);                  /* one item */
    CHECK(kn_parallel_chunks(3, 1 << 30) == 3);                  /* never more chunks than items */
    CHECK(kn_parallel_chunks(1 << 20, 1 << 10) == 8);            /* four per thread */
    CHECK(kn_parallel_chunks(4 * KN_PARALLEL_GRAIN, 1) == 4);    /* one per grain */
    CHECK(kn_parallel_chunks(INT64_MAX / 2, INT64_MAX / 2) == 8); /* no overflow */
    kn_set_num_threads(3);
    CHECK(kn_parallel_chunks(1 << 20, 1 << 10) == 12);
    kn_set_num_threads(2);
}

/* Per-chunk partial sums combined in chunk order: the same bits every run. */
typedef struct sum_ctx {
    const float *x;
    double part[KN_MAX_CHUNKS];
} sum_ctx;

static void sum_chunk(void *ctx, int64_t begin, int64_t end, int chunk) {
    sum_ctx *s = ctx;
    float acc = 0;
    for (int64_t i = begin; i < end; i++) acc += s->x[i];
    s->part[chunk] = acc;
}

static void test_chunk_order_sums_repeat(void) {
    const int64_t n = 1 << 20;
    float *x = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) x[i] = (float)((i * 7919 % 1000) - 500) / 7.0f;
    double first = 0;
    for (int run = 0; run < 20; run++) {
        sum_ctx *s = calloc(1, sizeof *s);
        s->x = x;
        int chunks = kn_parallel_chunks(n, 1);
        kn_parallel_run(n, chunks, sum_chunk, s);
        double total = 0;
        for (int c = 0; c < chunks; c++) total += s->part[c];
        if (run == 0) first = total;
        CHECK_MSG(total == first, "run %d: %.17g, first run %.17g", run, total, first);
        free(s);
    }
    free(x);
}

typedef struct nest_ctx {
    atomic_long inner_items;
} nest_ctx;

static void inner_chunk(void *ctx, int64_t begin, int64_t end, int chunk) {
    atomic_fetch_add(&((nest_ctx *)ctx)->inner_items, end - begin);
}

static void outer_chunk(void *ctx, int64_t begin, int64_t end, int chunk) {
    for (int64_t i = begin; i < end; i++) kn_parallel_run(1000, 8, inner_chunk, ctx);
}

static void test_loops_inside_loops_run_inline(void) {
    nest_ctx c = {0};
    kn_parallel_run(16, 8, outer_chunk, &c);
    CHECK(atomic_load(&c.inner_items) == 16 * 1000);
}

static void *loops_from_a_thread(void *arg) {
    for (int i = 0; i < 300; i++) check_cover(5000 + i, 8);
    return arg;
}

static void test_two_threads_run_loops_at_once(void) {
    pthread_t t;
    CHECK(pthread_create(&t, NULL, loops_from_a_thread, NULL) == 0);
    loops_from_a_thread(NULL);
    pthread_join(t, NULL);
}

static void test_many_tiny_loops(void) {
    const int sizes[] = {2, 3};
    for (int s = 0; s < 2; s++) {
        kn_set_num_threads(sizes[s]);
        nest_ctx c = {0};
        for (int i = 0; i < 100000; i++) kn_parallel_run(4, 4, inner_chunk, &c);
        CHECK(atomic_load(&c.inner_items) == 4L * 100000);
        /* with pauses long enough for the workers to fall asleep between loops */
        for (int i = 0; i < 20; i++) {
            usleep(2000);
            kn_parallel_run(4, 4, inner_chunk, &c);
        }
        CHECK(atomic_load(&c.inner_items) == 4L * 100020);
    }
    kn_set_num_threads(2);
}

/* A chunk that a worker (not the loop's owner) runs sleeps `worker_sleep_us`, as a worker whose
 * core another process holds would stall; `by_worker` counts such chunks. The owner's chunks
 * take 200 us, which gives a sleeping worker time to wake and claim one. */
typedef struct stall_ctx {
    pthread_t owner;
    int worker_sleep_us;
    atomic_int by_worker;
} stall_ctx;

static void stall_chunk(void *ctx, int64_t begin, int64_t end, int chunk) {
    stall_ctx *c = ctx;
    if (pthread_equal(pthread_self(), c->owner)) {
        usleep(200);
        return;
    }
    atomic_fetch_add(&c->by_worker, 1);
    if (c->worker_sleep_us) usleep((useconds_t)c->worker_sleep_us);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Runs loops until one has a chunk on a worker, at most `tries` of them; whether one did. */
static bool a_worker_joins(stall_ctx *c, int tries) {
    for (int i = 0; i < tries; i++) {
        int before = atomic_load(&c->by_worker);
        kn_parallel_run(64, 8, stall_chunk, c);
        if (atomic_load(&c->by_worker) > before) return true;
    }
    return false;
}

/* Loops whose workers stall run on their owner alone for a while (thread_pool.h, "Stalls"),
 * and then use the workers again. */
static void test_stalled_workers_send_loops_solo(void) {
    kn_set_num_threads(2);
    /* a worker's chunk far longer than the owner's eight, however slow a sanitizer makes them */
    stall_ctx c = {.owner = pthread_self(), .worker_sleep_us = 40 * KN_POOL_STALL_NS / 1000};
    int stalled = 0;
    for (int i = 0; i < KN_POOL_STALLS_TO_SOLO; i++) stalled += a_worker_joins(&c, 100);
    CHECK_MSG(stalled == KN_POOL_STALLS_TO_SOLO, "only %d of %d loops reached a worker", stalled, KN_POOL_STALLS_TO_SOLO);
    /* now solo: every chunk of the next loops runs on the owner (checked only when they ended
     * within the solo period, which a slow sanitizer run may overrun) */
    int before = atomic_load(&c.by_worker);
    const double start = now_s();
    for (int i = 0; i < 4; i++) kn_parallel_run(64, 8, stall_chunk, &c);
    const bool within = now_s() - start < 0.5e-9 * KN_POOL_SOLO_NS;
    CHECK_MSG(!within || atomic_load(&c.by_worker) == before, "%d chunks ran on a worker during the solo period",
              atomic_load(&c.by_worker) - before);
    kn_stats st;
    kn_stats_get(&st);
    CHECK_MSG(st.pool_stalls >= KN_POOL_STALLS_TO_SOLO && st.pool_solo_periods >= 1, "stats: %lld stalls, %lld solo periods",
              (long long)st.pool_stalls, (long long)st.pool_solo_periods);
    /* after it, the workers take chunks again */
    usleep(2 * KN_POOL_SOLO_NS / 1000);
    c.worker_sleep_us = 0;
    CHECK(a_worker_joins(&c, 100));
}

static void test_forked_child_has_a_pool(void) {
#if defined(__SANITIZE_THREAD__)
    printf("  skip: ThreadSanitizer cannot start threads in a child forked from a threaded process\n");
    return;
#endif
    check_cover(10000, 8); /* the parent's workers are running */
    pid_t pid = fork();
    if (pid == 0) {
        nest_ctx c = {0};
        kn_parallel_run(1000, 8, inner_chunk, &c);
        _exit(atomic_load(&c.inner_items) == 1000 ? 0 : 1);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
}

int main(void) {
    RUN(test_every_item_runs_once);
    RUN(test_chunk_count_follows_work_and_size);
    RUN(test_chunk_order_sums_repeat);
    RUN(test_loops_inside_loops_run_inline);
    RUN(test_two_threads_run_loops_at_once);
    RUN(test_many_tiny_loops);
    RUN(test_stalled_workers_send_loops_solo);
    RUN(test_forked_child_has_a_pool);
    return test_summary();
}
