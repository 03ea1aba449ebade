/* Variables read once at start-up (KILN_DEVICE, KILN_THREADS), each in a fresh process: the
 * test binary runs itself as the child, whose first kiln call creates a tensor. A child that
 * hangs (KILN_DEVICE once made start-up wait on itself) ends in ctest's timeout. */
#define _GNU_SOURCE /* mkstemp */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* The child's output (at most size - 1 bytes) with `setting` (NAME=VALUE) in its environment;
 * whether it exited with 0. */
static bool run_child(const char *setting, char *out, size_t size) {
    char path[] = "/tmp/kiln-start-env-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return false;
    close(fd);
    const char *args[] = {"--start-child", NULL}, *env[] = {setting, NULL};
    int code = run_program(self_executable(), args, NULL, path, NULL, env);
    char *text = read_text_file(path);
    snprintf(out, size, "%s", text ? text : "");
    free(text);
    unlink(path);
    return code == 0;
}

static int start_child(void) {
    kn_tensor *t = kn_randn(KN_SHAPE(4), KN_F32);
    if (!t) {
        printf("%s\n", kn_last_error());
        return 1;
    }
    printf("tensor on %s, default %s, %d threads\n", kn_device_type_name(kn_device_of(t).type),
           kn_device_type_name(kn_default_device().type), kn_get_num_threads());
    kn_release(t);
    return 0;
}

static void test_kiln_device_sets_the_default_device(void) {
    char out[1024];
    CHECK_MSG(run_child("KILN_DEVICE=cpu", out, sizeof out) && strstr(out, "tensor on cpu, default cpu"), "child: %s", out);
    CHECK_MSG(run_child("KILN_DEVICE=meta", out, sizeof out) && strstr(out, "tensor on meta, default meta"), "child: %s",
              out);
    CHECK_MSG(!run_child("KILN_DEVICE=nonsense", out, sizeof out) &&
                  strstr(out, "KILN_DEVICE=nonsense: no such device available (try cpu or meta)"),
              "child: %s", out);
}

static void test_kiln_threads_sets_the_pool(void) {
    char out[1024];
    CHECK_MSG(run_child("KILN_THREADS=3", out, sizeof out) && strstr(out, ", 3 threads"), "child: %s", out);
    CHECK_MSG(!run_child("KILN_THREADS=none", out, sizeof out) &&
                  strstr(out, "KILN_THREADS=none: expected a positive number of threads"),
              "child: %s", out);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--start-child") == 0) return start_child();
    RUN(test_kiln_device_sets_the_default_device);
    RUN(test_kiln_threads_sets_the_pool);
    return test_summary();
}
