/* No oversubscription by construction: a program that links kiln (statically: this test run
 * again as a probe; and through libkiln.so: argv[1]), with no environment variable of any
 * threading library set, runs every kind of parallel work kiln has. Besides its own thread it
 * then has at most KILN_THREADS of kiln's (the CPU stream's worker, which takes chunks of
 * every loop itself, and the pool's KILN_THREADS - 1 workers), and no other thread has done
 * any work meanwhile: an OpenMP team of oneDNN's, OpenBLAS's own threads or a second pool
 * would. (OpenBLAS's pthread build starts idle threads when it loads, before kiln can set it to
 * one thread; they spin ~0.1 s, then sleep and never get work. The probe waits for that.) */
#define _POSIX_C_SOURCE 200809L /* setenv, readlink */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "thread_probe.h"

static char self_path[4096];
static const char *shared_probe;

static void check_program(const char *program, const char *const *args) {
    const int sizes[] = {1, 2, 3};
    for (int i = 0; i < 3; i++) {
        char threads[16];
        snprintf(threads, sizeof threads, "%d", sizes[i]);
        setenv("KILN_THREADS", threads, 1);
        const char *out_path = "thread_probe.out";
        int rc = run_program(program, args, NULL, out_path, NULL, NULL);
        char *out = read_text_file(out_path);
        int kiln = -1, others = -1;
        double others_ms = -1;
        CHECK_MSG(rc == 0 && out &&
                      sscanf(out, "kiln threads %d, other threads %d using %lf", &kiln, &others, &others_ms) == 3,
                  "%s: exit %d, printed: %s", program, rc, out ? out : "(nothing)");
        CHECK_MSG(kiln >= 1 && kiln <= sizes[i], "%s with KILN_THREADS=%d: %d kiln threads (at most %d)", program,
                  sizes[i], kiln, sizes[i]);
        CHECK_MSG(others_ms >= 0 && others_ms <= 10, "%s with KILN_THREADS=%d: other threads used %.0f ms of CPU",
                  program, sizes[i], others_ms);
        free(out);
        remove(out_path);
    }
    unsetenv("KILN_THREADS");
}

static void test_static_program_has_no_extra_threads(void) {
    const char *args[] = {"--probe", NULL};
    check_program(self_path, args);
}

static void test_shared_library_program_has_no_extra_threads(void) {
    const char *args[] = {NULL};
    check_program(shared_probe, args);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--probe") == 0) return probe_main();
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH_OF_thread_probe\n", argv[0]);
        return 2;
    }
    ssize_t n = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    if (n <= 0) return fprintf(stderr, "cannot read /proc/self/exe\n"), 1;
    self_path[n] = '\0';
    shared_probe = argv[1];
    const char *threading_vars[] = {"OMP_WAIT_POLICY", "OMP_NUM_THREADS", "KMP_BLOCKTIME", "OPENBLAS_NUM_THREADS"};
    for (int i = 0; i < 4; i++) unsetenv(threading_vars[i]);
    RUN(test_static_program_has_no_extra_threads);
    RUN(test_shared_library_program_has_no_extra_threads);
    return test_summary();
}
