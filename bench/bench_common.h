/* Shared pieces of the benchmark programs: the clock, medians of repeated runs, and the
 * result lines (a readable table as results come, one JSON line each at the end). Include
 * it first: it asks for POSIX clocks before any system header is read. */
#ifndef KILN_BENCH_COMMON_H
#define KILN_BENCH_COMMON_H

#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kiln/kiln.h"

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static inline double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* A kiln result that cannot be measured is a broken benchmark: say why and stop. */
static inline kn_tensor *bench_check(kn_tensor *t, const char *what) {
    if (!t) {
        fprintf(stderr, "bench: %s failed: %s\n", what, kn_last_error());
        exit(1);
    }
    return t;
}

typedef void (*bench_fn)(void *ctx);

/* Median seconds of `reps` runs of fn after `warmup` unmeasured ones. Each run is one scope
 * (its temporaries go back to the caching allocator) and ends when the queued work is done. */
static inline double bench_time(bench_fn fn, void *ctx, int warmup, int reps) {
    double t[64];
    if (reps > 64) reps = 64;
    for (int i = 0; i < warmup + reps; i++) {
        kn_scope_push();
        double t0 = bench_now();
        fn(ctx);
        kn_status st = kn_sync();
        double t1 = bench_now();
        kn_scope_pop();
        if (st != KN_OK) {
            fprintf(stderr, "bench: queued work failed: %s\n", kn_last_error());
            exit(1);
        }
        if (i >= warmup) t[i - warmup] = t1 - t0;
    }
    return bench_median(t, reps);
}

/* One result. impl: who ran it (kiln, openblas, memcpy, torch); bench and shape: what (the
 * pair run.sh joins on); unit: ns_per_op, ms, gflops or gbps. ratio (0: none) is value over
 * the named baseline's value measured in the same run. */
typedef struct bench_result {
    char impl[16], bench[48], shape[64], unit[16], baseline[16];
    double value, ratio;
} bench_result;

static bench_result bench_results[256];
static int bench_result_count;

static inline void bench_report(const char *impl, const char *bench, const char *shape, const char *unit,
                                double value, const char *baseline, double ratio) {
    if (bench_result_count == 0)
        printf("%-9s %-22s %-28s %12s %-10s %s\n", "impl", "bench", "shape", "value", "unit", "ratio");
    printf("%-9s %-22s %-28s %12.3f %-10s", impl, bench, shape, value, unit);
    if (ratio > 0) printf(" %.3f of %s", ratio, baseline);
    printf("\n");
    fflush(stdout);
    if (bench_result_count == (int)(sizeof bench_results / sizeof *bench_results)) return;
    bench_result *r = &bench_results[bench_result_count++];
    snprintf(r->impl, sizeof r->impl, "%s", impl);
    snprintf(r->bench, sizeof r->bench, "%s", bench);
    snprintf(r->shape, sizeof r->shape, "%s", shape);
    snprintf(r->unit, sizeof r->unit, "%s", unit);
    snprintf(r->baseline, sizeof r->baseline, "%s", ratio > 0 ? baseline : "");
    r->value = value;
    r->ratio = ratio;
}

/* The JSON lines, after the table, for BENCHMARKS.md and run.sh. */
static inline void bench_print_json(void) {
    for (int i = 0; i < bench_result_count; i++) {
        const bench_result *r = &bench_results[i];
        printf("{\"impl\": \"%s\", \"bench\": \"%s\", \"shape\": \"%s\", \"unit\": \"%s\", \"value\": %.6g", r->impl,
               r->bench, r->shape, r->unit, r->value);
        if (r->ratio > 0) printf(", \"baseline\": \"%s\", \"ratio\": %.4f", r->baseline, r->ratio);
        printf("}\n");
    }
}

/* The machine line every program starts with. */
static inline void bench_header(const char *program) {
    printf("# %s: kiln %s, %d threads, mode %s\n", program, kn_version(), kn_get_num_threads(),
           kn_mode_name(kn_get_mode()));
}

#endif
