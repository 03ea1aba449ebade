/* The workload of test_thread_count, shared by its static probe (the test itself) and its
 * shared-library probe (thread_probe.c). */
#ifndef KILN_TESTS_THREAD_PROBE_H
#define KILN_TESTS_THREAD_PROBE_H

#include <dirent.h>
#include <stdio.h>

#include <kiln/kiln.h>

/* The process's threads, from /proc/self/task. */
static int probe_thread_count(void) {
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

/* Runs the workload in strict and fused mode; prints "threads N" or the error. */
static int probe_main(void) {
    const kn_mode modes[] = {KN_MODE_STRICT, KN_MODE_FUSED};
    for (int m = 0; m < 2; m++) {
        kn_set_mode(modes[m]);
        kn_scope_push();
        kn_tensor *a = kn_rand(KN_SHAPE(256, 384), KN_F32), *b = kn_rand(KN_SHAPE(384, 512), KN_F32);
        kn_tensor *c = kn_matmul(a, b);                                               /* f32 product */
        kn_tensor *h = kn_matmul(kn_cast(a, KN_BF16), kn_cast(b, KN_BF16));   /* bf16 product */
        kn_tensor *x = kn_rand(KN_SHAPE(4, 8, 32, 32), KN_F32), *w = kn_rand(KN_SHAPE(16, 8, 3, 3), KN_F32);
        kn_tensor *y = kn_conv2d(x, w, NULL, (kn_conv_opts){.stride = {1, 1}, .padding = {1, 1}, .dilation = {1, 1}, .groups = 1});
        kn_tensor *s = kn_softmax(kn_add(kn_mul_scalar(c, 0.5), kn_exp(c)), -1);      /* fusable chain */
        kn_tensor *r = kn_sum(kn_add(s, kn_cast(h, KN_F32)), KN_SHAPE0, false);
        kn_tensor *q = kn_mean(y, KN_SHAPE0, false);
        if (!r || !q || kn_sync() != KN_OK) {
            printf("error: %s\n", kn_last_error());
            return 1;
        }
        kn_scope_pop();
    }
    printf("threads %d\n", probe_thread_count());
    return 0;
}

#endif
