/* The kernel profile: per-op sums of kernel time, taken where every kernel runs
 * (kn_node_execute), so strict, debug and fused mode, and every stream, are measured alike. */
#include "exec/profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/strbuf.h"
#include "kiln/profile.h"
#include "kiln/runtime.h"

atomic_bool kn_profiling;
static _Atomic int64_t op_ns[KN_OP_COUNT], op_calls[KN_OP_COUNT];
static int64_t started_ns, stopped_ns;

int64_t kn_profile_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void kn_profile_add(kn_op_id op, int64_t ns) {
    atomic_fetch_add_explicit(&op_ns[op], ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&op_calls[op], 1, memory_order_relaxed);
}

void kn_profile_start(void) {
    kn_sync();
    for (int op = 0; op < KN_OP_COUNT; op++) atomic_store(&op_ns[op], 0), atomic_store(&op_calls[op], 0);
    started_ns = kn_profile_now();
    stopped_ns = 0;
    atomic_store(&kn_profiling, true);
}

void kn_profile_stop(void) {
    kn_sync();
    atomic_store(&kn_profiling, false);
    stopped_ns = kn_profile_now();
}

static int by_total(const void *a, const void *b) {
    const kn_profile_row *x = a, *y = b;
    return x->total_ms < y->total_ms ? 1 : x->total_ms > y->total_ms ? -1 : strcmp(x->op, y->op);
}

int kn_profile_rows(kn_profile_row *rows, int max) {
    kn_profile_row all[KN_OP_COUNT];
    int n = 0;
    for (int op = 0; op < KN_OP_COUNT; op++) {
        int64_t calls = atomic_load(&op_calls[op]);
        if (calls) all[n++] = (kn_profile_row){kn_op_name(op), calls, (double)atomic_load(&op_ns[op]) * 1e-6};
    }
    qsort(all, (size_t)n, sizeof *all, by_total);
    if (rows)
        for (int i = 0; i < n && i < max; i++) rows[i] = all[i];
    return n;
}

size_t kn_profile_report(char *buf, size_t size) {
    kn_profile_row rows[KN_OP_COUNT];
    int n = kn_profile_rows(rows, KN_OP_COUNT);
    double kernels = 0;
    for (int i = 0; i < n; i++) kernels += rows[i].total_ms;
    double wall = (double)((stopped_ns ? stopped_ns : kn_profile_now()) - started_ns) * 1e-6;
    size_t len = 0;
    if (size) buf[0] = '\0';
    len = kn_snappend(buf, size, len, "%-36s %9s %12s %10s %6s\n", "op", "calls", "total_ms", "mean_us", "share");
    for (int i = 0; i < n; i++)
        len = kn_snappend(buf, size, len, "%-36s %9lld %12.3f %10.2f %5.1f%%\n", rows[i].op, (long long)rows[i].calls, rows[i].total_ms,
               rows[i].total_ms * 1e3 / (double)rows[i].calls, kernels > 0 ? 100 * rows[i].total_ms / kernels : 0);
    len = kn_snappend(buf, size, len, "kernels %.3f ms of %.3f ms wall (%.1f%%)\n", kernels, wall, wall > 0 ? 100 * kernels / wall : 0);
    return len;
}

void kn_profile_print(FILE *out, const char *line_prefix) {
    size_t want = kn_profile_report(NULL, 0) + 1;
    char *text = malloc(want);
    if (!text) return;
    kn_profile_report(text, want);
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) fprintf(out, "%s%s\n", line_prefix, line);
    free(text);
}

static void print_at_exit(void) {
    kn_profile_stop();
    kn_profile_print(stderr, "kiln-profile: ");
}

/* KILN_PROFILE=1 profiles from the first op to exit. */
__attribute__((constructor)) static void profile_from_environment(void) {
    const char *s = getenv("KILN_PROFILE");
    if (!s || !*s || strcmp(s, "0") == 0) return;
    started_ns = kn_profile_now();
    atomic_store(&kn_profiling, true);
    atexit(print_at_exit);
}
