/* Programs that link kiln wait passively by default: kiln's OpenMP threads (libomp) sleep as
 * soon as a parallel region ends unless the user chose a policy, and the program's environment
 * is left as the user had it. Checked for a program linked with libkiln.a (this test, run
 * again as a probe) and one linked with libkiln.so (argv[1]), through what libomp prints of
 * the settings it read (OMP_DISPLAY_ENV=verbose). */
#define _POSIX_C_SOURCE 200809L /* unsetenv, mkstemp */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static char self_path[4096];
static const char *shared_probe;

/* Runs the probe (with extra env) and checks what libomp read and what the program saw. */
static void check_probe(const char *program, const char *const *args, const char *user_policy,
                        const char *libomp_reads, const char *program_sees) {
    char env_entry[64], out_path[] = "/tmp/kiln-omp-out-XXXXXX", err_path[] = "/tmp/kiln-omp-err-XXXXXX";
    snprintf(env_entry, sizeof env_entry, "OMP_WAIT_POLICY=%s", user_policy ? user_policy : "");
    const char *env[] = {"OMP_DISPLAY_ENV=verbose", user_policy ? env_entry : NULL, NULL};
    close(mkstemp(out_path));
    close(mkstemp(err_path));
    int rc = run_program(program, args, NULL, out_path, err_path, env);
    char *out = read_text_file(out_path), *err = read_text_file(err_path);
    unlink(out_path);
    unlink(err_path);
    CHECK_MSG(rc == 0, "%s exited with %d", program, rc);
    CHECK_MSG(err && strstr(err, libomp_reads), "%s: libomp should read %s; it printed:\n%s", program, libomp_reads,
              err ? err : "(nothing)");
    CHECK_MSG(out && strstr(out, program_sees), "%s: the program should see %s; it printed: %s", program, program_sees,
              out ? out : "(nothing)");
    free(out);
    free(err);
}

static void check_program(const char *program, const char *const *args) {
    check_probe(program, args, NULL, "KMP_BLOCKTIME='0'", "OMP_WAIT_POLICY=(unset) KMP_BLOCKTIME=(unset)");
    check_probe(program, args, "active", "OMP_WAIT_POLICY='ACTIVE'", "OMP_WAIT_POLICY=active KMP_BLOCKTIME=(unset)");
}

static void test_static_library_waits_passively_unless_the_user_chose(void) {
    const char *args[] = {"--probe", NULL};
    check_program(self_path, args);
}

static void test_shared_library_waits_passively_unless_the_user_chose(void) {
    const char *args[] = {NULL};
    check_program(shared_probe, args);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--probe") == 0) {
        kn_tensor *t = kn_ones(KN_SHAPE(2), KN_F32); /* the runtime starts */
        const char *policy = getenv("OMP_WAIT_POLICY"), *blocktime = getenv("KMP_BLOCKTIME");
        printf("op %s; environment: OMP_WAIT_POLICY=%s KMP_BLOCKTIME=%s\n", t ? "ok" : kn_last_error(),
               policy ? policy : "(unset)", blocktime ? blocktime : "(unset)");
        kn_release(t);
        return 0;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH_OF_omp_wait_probe\n", argv[0]);
        return 2;
    }
    ssize_t n = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    if (n <= 0) return fprintf(stderr, "cannot read /proc/self/exe\n"), 1;
    self_path[n] = '\0';
    shared_probe = argv[1];
    unsetenv("OMP_WAIT_POLICY"); /* ctest sets it for every test; the probes start without it */
    RUN(test_static_library_waits_passively_unless_the_user_chose);
    RUN(test_shared_library_waits_passively_unless_the_user_chose);
    return test_summary();
}
