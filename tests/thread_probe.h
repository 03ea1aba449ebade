/* The workload of test_thread_count, shared by its static probe (the test itself) and its
 * shared-library probe (thread_probe.c). */
#ifndef KILN_TESTS_THREAD_PROBE_H
#define KILN_TESTS_THREAD_PROBE_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <kiln/kiln.h>

/* The process's threads, from /proc/self/task: how many are kiln's (named kiln-pool or
 * kiln-stream), how many are others, and the CPU time (ms) all others but the main thread have
 * used. */
typedef struct probe_threads {
    int kiln, others;
    double others_ms;
} probe_threads;

static probe_threads probe_thread_census(void) {
    probe_threads c = {0, 0, 0.0};
    DIR *d = opendir("/proc/self/task");
    long main_tid = (long)getpid(), ticks = sysconf(_SC_CLK_TCK);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.' || atol(e->d_name) == main_tid) continue;
        char path[300], comm[64] = "", stat[1024] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f) {
            if (!fgets(comm, sizeof comm, f)) comm[0] = 0;
            fclose(f);
        }
        if (strncmp(comm, "kiln-", 5) == 0) {
            c.kiln++;
            continue;
        }
        c.others++;
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
        f = fopen(path, "r");
        unsigned long utime = 0, stime = 0;
        if (f) { /* utime and stime are fields 14 and 15, after the ")" that ends comm */
            if (fgets(stat, sizeof stat, f)) {
                const char *p = strrchr(stat, ')');
                if (p) sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime);
            }
            fclose(f);
        }
        c.others_ms += 1e3 * (double)(utime + stime) / (double)(ticks > 0 ? ticks : 100);
    }
    if (d) closedir(d);
    return c;
}

/* Runs the workload in strict and fused mode; prints the census or the error. */
static int probe_main(void) {
    /* Libraries may spin threads of their own when they load (OpenBLAS's pthread build starts
     * idle threads that spin ~0.1 s before they sleep, before kiln can set it to one thread):
     * the count starts once the runtime is up and they have gone to sleep. */
    kn_release(kn_ones(KN_SHAPE(1), KN_F32));
    nanosleep(&(struct timespec){.tv_nsec = 400000000}, NULL);
    probe_threads before = probe_thread_census();
    const kn_mode modes[] = {KN_MODE_STRICT, KN_MODE_FUSED};
    for (int m = 0; m < 2; m++) {
        kn_set_mode(modes[m]);
        kn_scope_push();
        kn_tensor *a = kn_rand(KN_SHAPE(256, 384), KN_F32), *b = kn_rand(KN_SHAPE(384, 512), KN_F32);
        kn_tensor *c = kn_matmul(a, b);                                             /* f32 product */
        kn_tensor *c64 = kn_matmul(kn_cast(a, KN_F64), kn_cast(b, KN_F64));         /* OpenBLAS */
        kn_tensor *h = kn_matmul(kn_cast(a, KN_BF16), kn_cast(b, KN_BF16));         /* bf16 product */
        kn_tensor *x = kn_rand(KN_SHAPE(4, 8, 32, 32), KN_F32), *w = kn_rand(KN_SHAPE(16, 8, 3, 3), KN_F32);
        kn_tensor *y = kn_conv2d(x, w, NULL, (kn_conv_opts){.stride = {1, 1}, .padding = {1, 1}, .dilation = {1, 1}, .groups = 1});
        kn_tensor *s = kn_softmax(kn_add(kn_mul_scalar(c, 0.5), kn_exp(c)), -1);    /* fusable chain */
        kn_tensor *r = kn_sum(kn_add(s, kn_cast(h, KN_F32)), KN_SHAPE0, false);
        kn_tensor *q = kn_mean(y, KN_SHAPE0, false), *q64 = kn_sum(c64, KN_SHAPE0, false);
        if (!r || !q || !q64 || kn_sync() != KN_OK) {
            printf("error: %s\n", kn_last_error());
            return 1;
        }
        kn_scope_pop();
    }
    probe_threads after = probe_thread_census();
    printf("kiln threads %d, other threads %d using %.0f ms of CPU\n", after.kiln, after.others,
           after.others_ms - before.others_ms);
    return 0;
}

#endif
