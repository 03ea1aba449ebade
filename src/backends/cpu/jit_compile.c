/* Running the system C compiler: its identity and target (probed once), and one compile of a
 * translation unit into a shared object, in a private directory, with its output captured. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backends/cpu/jit.h"
#include "backends/cpu/jit_internal.h"
#include "core/error.h"
#include "core/stats.h"

/* Generated code is built without kiln's sanitizers even in a sanitized build: it is loaded
 * with dlopen, and needs no instrumentation to be correct. Like the library, it contracts no
 * multiply-adds, so that it rounds as the eager kernels do with either compiler, and its
 * integer arithmetic wraps as theirs does. It is compiled for the CPU it runs on even where the
 * library is built for a portable baseline (an installed kiln); where that baseline lacks FMA,
 * kiln's math (ops/vector_math.h, KN_VM_FMA) is told so, and rounds as the library's does. */
static const char *const flags[] = {
    "-std=c17", "-O3", "-fno-math-errno", "-ffp-contract=off", "-fwrapv", "-fPIC", "-shared",
#ifdef KILN_JIT_MARCH_NATIVE
    "-march=native",
#if !defined(__FMA__) && !defined(__FP_FAST_FMAF)
    "-U__FMA__", "-U__FP_FAST_FMAF",
#endif
#endif
};
enum { N_FLAGS = sizeof flags / sizeof flags[0], MAX_WORDS = 16, OUTPUT_MAX = 1 << 16 };

/* $KILN_CC (split at spaces, so "ccache gcc" works), else cc. */
static char cc_buf[512];
static char *cc_words[MAX_WORDS + 1];
static int n_cc_words;
static char compiler_id[2048];
static char arch[8192];
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;

/* Runs argv (PATH searched) in cwd with stdout and stderr captured into *out (malloc'd, NUL-
 * terminated, the first OUTPUT_MAX bytes); returns its wait status, or -1 with errno when it
 * could not be started. */
static int run_captured(char *const *argv, const char *cwd, char **out) {
    *out = NULL;
    int pipe_fd[2];
    if (pipe2(pipe_fd, O_CLOEXEC) != 0) return -1;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addchdir_np(&actions, cwd);
    posix_spawn_file_actions_adddup2(&actions, pipe_fd[1], 1);
    posix_spawn_file_actions_adddup2(&actions, pipe_fd[1], 2);
    pid_t pid;
    int err = posix_spawnp(&pid, argv[0], &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    close(pipe_fd[1]);
    if (err) {
        close(pipe_fd[0]);
        errno = err;
        return -1;
    }
    char *buf = malloc(OUTPUT_MAX + 1);
    size_t n = 0;
    char sink[4096];
    /* Read to the end even past OUTPUT_MAX, so the compiler never blocks on a full pipe. */
    for (ssize_t r; (r = read(pipe_fd[0], sink, sizeof sink)) != 0;) {
        if (r < 0) {
            if (errno == EINTR) continue;
            break;
        }
        size_t room = buf ? OUTPUT_MAX - n : 0, keep = (size_t)r < room ? (size_t)r : room;
        if (keep) memcpy(buf + n, sink, keep);
        n += keep;
    }
    close(pipe_fd[0]);
    if (buf) buf[n] = '\0';
    *out = buf;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    return status;
}

/* The first line of text containing needle, trimmed, into out ("" if none). */
static void line_with(const char *text, const char *needle, char *out, size_t size) {
    *out = '\0';
    const char *hit = text ? strstr(text, needle) : NULL;
    if (!hit) return;
    const char *start = hit, *end = strchr(hit, '\n');
    while (start > text && start[-1] != '\n') start--;
    if (!end) end = start + strlen(start);
    while (start < end && (*start == ' ' || *start == '\t')) start++;
    while (end > start && (end[-1] == ' ' || end[-1] == '\r')) end--;
    snprintf(out, size, "%.*s", (int)(end - start), start);
}

/* One `cc [-march=native] -### ...` run gives both the compiler's version line and the
 * command it would run for the compiler proper ("cc1"), where gcc and clang spell out what
 * -march=native means on this CPU, feature by feature. That is exact where the CPU's model
 * name is not (virtual machines report generic names and mask features). Run in / so that
 * no path of ours shows up in it. */
static void probe(void) {
    const char *env = getenv("KILN_CC");
    snprintf(cc_buf, sizeof cc_buf, "%s", env && *env ? env : "cc");
    for (char *save = NULL, *w = strtok_r(cc_buf, " \t", &save); w && n_cc_words < MAX_WORDS;
         w = strtok_r(NULL, " \t", &save))
        cc_words[n_cc_words++] = w;
    if (!n_cc_words) cc_words[n_cc_words++] = "cc";

    char *argv[MAX_WORDS + 16];
    int n = 0;
    for (int i = 0; i < n_cc_words; i++) argv[n++] = cc_words[i];
    for (int i = 0; i < N_FLAGS; i++)
        if (strncmp(flags[i], "-march", 6) == 0) argv[n++] = (char *)flags[i];
    const char *tail[] = {"-###", "-x", "c", "-S", "/dev/null", "-o", "/dev/null"};
    for (size_t i = 0; i < sizeof tail / sizeof tail[0]; i++) argv[n++] = (char *)tail[i];
    argv[n] = NULL;
    char *out = NULL;
    run_captured(argv, "/", &out);

    char version[512], target[sizeof arch - 128];
    line_with(out, " version ", version, sizeof version);
    line_with(out, "cc1", target, sizeof target);
    free(out);

    size_t len = 0;
    for (int i = 0; i < n_cc_words; i++)
        len += (size_t)snprintf(compiler_id + len, sizeof compiler_id - len, "%s ", cc_words[i]);
    for (int i = 0; i < N_FLAGS && len < sizeof compiler_id; i++)
        len += (size_t)snprintf(compiler_id + len, sizeof compiler_id - len, "%s ", flags[i]);
    if (len < sizeof compiler_id) snprintf(compiler_id + len, sizeof compiler_id - len, "(%s)", version);

    struct utsname u;
    snprintf(arch, sizeof arch, "%s", uname(&u) == 0 ? u.machine : "unknown");
#ifdef KILN_JIT_MARCH_NATIVE
    snprintf(arch + strlen(arch), sizeof arch - strlen(arch), " %s", target);
#endif
}

const char *kn_jit_compiler_id(void) {
    pthread_once(&probe_once, probe);
    return compiler_id;
}

const char *kn_jit_arch(void) {
    pthread_once(&probe_once, probe);
    return arch;
}

static bool write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok;
}

void kn_jit_remove_dir(const char *dir) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, KN_JIT_SOURCE_NAME);
    unlink(path);
    snprintf(path, sizeof path, "%s/%s", dir, KN_JIT_OBJECT_NAME);
    unlink(path);
    rmdir(dir);
}

/* The compiler's first error and the lines after it (the notes that explain it), or its
 * first lines when none says "error". */
static void first_error_lines(const char *out, char *msg, size_t size) {
    const char *start = out ? strstr(out, "error") : NULL;
    if (start)
        while (start > out && start[-1] != '\n') start--;
    else
        start = out ? out : "(no output)";
    const char *end = start;
    for (int lines = 0; lines < 4 && *end; lines++) {
        const char *newline = strchr(end, '\n');
        end = newline ? newline + 1 : end + strlen(end);
    }
    while (end > start && (end[-1] == '\n' || end[-1] == ' ')) end--;
    snprintf(msg, size, "%.*s", (int)(end - start), start);
}

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

bool kn_jit_make_dir(char *dir, size_t size) {
    const char *tmp = getenv("TMPDIR");
    if (snprintf(dir, size, "%s/kiln-jit-XXXXXX", tmp && *tmp ? tmp : "/tmp") >= (int)size) {
        errno = ENAMETOOLONG;
        return false;
    }
    return mkdtemp(dir) != NULL;
}

kn_status kn_jit_compile(const char *source, char *dir, size_t size) {
    pthread_once(&probe_once, probe);
    if (!kn_jit_make_dir(dir, size))
        return kn_error(KN_ERR_IO, "kiln jit: cannot make a directory %s: %s", dir, strerror(errno));
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, KN_JIT_SOURCE_NAME);
    if (!write_file(path, source)) {
        kn_status st = kn_error(KN_ERR_IO, "kiln jit: cannot write %s: %s", path, strerror(errno));
        kn_jit_remove_dir(dir);
        return st;
    }

    char *argv[MAX_WORDS + N_FLAGS + 4];
    int n = 0;
    for (int i = 0; i < n_cc_words; i++) argv[n++] = cc_words[i];
    for (int i = 0; i < N_FLAGS; i++) argv[n++] = (char *)flags[i];
    argv[n++] = "-o";
    argv[n++] = KN_JIT_OBJECT_NAME;
    argv[n++] = KN_JIT_SOURCE_NAME;
    argv[n] = NULL;
    char *out = NULL;
    int64_t t0 = now_ns();
    int status = run_captured(argv, dir, &out), spawn_errno = errno;
    kn_stat_add(KN_STAT_COMPILE_NS, now_ns() - t0);
    kn_stat_add(KN_STAT_COMPILES, 1);

    kn_status st = KN_OK;
    if (status < 0) {
        st = kn_error(KN_ERR_UNSUPPORTED, "kiln jit: cannot run the C compiler '%s' (set KILN_CC): %s", cc_words[0],
                      strerror(spawn_errno));
    } else if (WIFSIGNALED(status)) {
        st = kn_error(KN_ERR_INTERNAL, "kiln jit: %s was killed by signal %d", cc_words[0], WTERMSIG(status));
    } else if (WEXITSTATUS(status) != 0) {
        char msg[768];
        first_error_lines(out, msg, sizeof msg);
        st = kn_error(KN_ERR_ARG, "kiln jit: %s failed: %s", cc_words[0], msg);
    }
    free(out);
    if (st != KN_OK) kn_jit_remove_dir(dir);
    return st;
}
