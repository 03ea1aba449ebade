/* The test harness (see harness.h). */
#define _GNU_SOURCE /* nftw */
#include "harness.h"

#include <fcntl.h>
#include <limits.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const kn_dtype ALL_DTYPES[KN_DTYPE_COUNT] = {KN_F32, KN_F64, KN_F16, KN_BF16, KN_I32, KN_I64, KN_BOOL};
const kn_dtype FLOAT_DTYPES[4] = {KN_F32, KN_F64, KN_F16, KN_BF16};

static int passed, failed, case_failures;
static const char *current_case = "?";

tolerance tol_for(kn_dtype d) {
    switch (d) {
    case KN_F64: return (tolerance){1e-12, 1e-12};
    case KN_F32: return (tolerance){2e-6, 2e-6};
    case KN_F16: return (tolerance){2e-3, 2e-3};
    case KN_BF16: return (tolerance){1.6e-2, 1.6e-2};
    default: return (tolerance){0, 0};
    }
}

uint64_t test_seed(void) {
    static uint64_t seed;
    static bool ready;
    if (!ready) {
        const char *s = getenv("KILN_TEST_SEED");
        seed = s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 20);
        ready = true;
    }
    return seed;
}

void test_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL [%s] %s:%d: ", current_case, file, line);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "  (KILN_TEST_SEED=%llu)\n", (unsigned long long)test_seed());
    va_end(ap);
    case_failures++;
}

void check_error(bool ok, kn_status want, const char *needle, const char *file, int line, const char *what) {
    if (ok) {
        test_fail(file, line, "%s succeeded; expected %s", what, kn_status_name(want));
    } else if (kn_last_status() != want) {
        test_fail(file, line, "%s failed with %s, expected %s: %s", what, kn_status_name(kn_last_status()),
                  kn_status_name(want), kn_last_error());
    } else if (needle && !strstr(kn_last_error(), needle)) {
        test_fail(file, line, "%s: message \"%s\" does not mention \"%s\"", what, kn_last_error(), needle);
    }
    kn_clear_error();
}

void run_test(const char *name, test_fn fn) {
    current_case = name;
    case_failures = 0;
    kn_clear_error();
    kn_scope_push();
    fn();
    kn_scope_pop();
    if (kn_sync() != KN_OK) test_fail(__FILE__, __LINE__, "pending work failed: %s", kn_last_error());
    if (case_failures) {
        failed++;
        printf("not ok - %s\n", name);
    } else {
        passed++;
        printf("ok - %s\n", name);
    }
    fflush(stdout);
}

int test_summary(void) {
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

void check_fixture_grads(kn_safetensors *f, const kn_named_tensors *params, tolerance tol) {
    for (int i = 0; i < params->count; i++) {
        char name[160];
        snprintf(name, sizeof name, "grad.%s", params->names[i]);
        double *want = read_f64(kn_safetensors_get(f, name, KN_CPU));
        CHECK_MSG(want != NULL, "%s is not in the fixture", name);
        if (want) check_close(kn_grad(params->tensors[i]), want, tol, name);
        free(want);
    }
}

char *read_text_file(const char *path) {
    /* Read to the end rather than by the file's size: /proc files (cpuinfo) say they hold 0 bytes. */
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t n = 0, cap = 4096;
    char *s = malloc(cap + 1);
    for (size_t got; s && (got = fread(s + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) {
            char *grown = realloc(s, 2 * cap + 1);
            if (!grown) free(s);
            s = grown, cap *= 2;
        }
    }
    if (s) s[n] = '\0';
    fclose(f);
    return s;
}

/* In the child: fd becomes path opened with flags, or the child gives up with 127. */
static void redirect(int fd, const char *path, int flags) {
    int opened = open(path, flags, 0644);
    if (opened < 0 || dup2(opened, fd) < 0) _exit(127);
    close(opened);
}

bool file_contains(const char *path, const char *needle) {
    char *s = read_text_file(path);
    bool ok = s && strstr(s, needle);
    free(s);
    return ok;
}

bool file_has(const char *path, const char *needle) {
    bool ok = file_contains(path, needle);
    if (!ok) {
        char *s = read_text_file(path);
        fprintf(stderr, "  expected \"%s\" in %s:\n%s\n", needle, path, s ? s : "(none)");
        free(s);
    }
    return ok;
}

const char *self_executable(void) {
    static char path[PATH_MAX];
    if (!path[0]) {
        ssize_t len = readlink("/proc/self/exe", path, sizeof path - 1);
        path[len > 0 ? len : 0] = '\0';
    }
    return path;
}

int run_program(const char *program, const char *const *args, const char *in_path, const char *out_path,
                const char *err_path, const char *const *env) {
    int n_args = 0;
    while (args[n_args]) n_args++;
    /* argv is made before the fork so that the child only redirects and execs. */
    const char **argv = malloc((size_t)(n_args + 2) * sizeof *argv);
    if (!argv) return 127;
    argv[0] = program;
    memcpy(argv + 1, args, (size_t)(n_args + 1) * sizeof *argv);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (in_path) redirect(0, in_path, O_RDONLY);
        redirect(1, out_path, O_WRONLY | O_CREAT | O_TRUNC);
        if (err_path) redirect(2, err_path, O_WRONLY | O_CREAT | O_TRUNC);
        else if (dup2(1, 2) < 0) _exit(127);
        for (int i = 0; env && env[i]; i++)
            if (putenv((char *)env[i]) != 0) _exit(127);
        execv(program, (char *const *)argv);
        _exit(127);
    }
    free(argv);
    if (pid < 0) return 127;
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

void remove_tree(const char *path) {
    if (nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0) fprintf(stderr, "could not remove %s\n", path);
}

kn_mode debug_checks_off(void) {
    kn_mode saved = kn_get_mode();
    if (saved == KN_MODE_DEBUG && kn_set_mode(KN_MODE_STRICT) != KN_OK) {
        test_fail(__FILE__, __LINE__, "debug_checks_off: %s", kn_last_error());
        kn_clear_error();
    }
    return saved;
}

void debug_checks_restore(kn_mode saved) {
    if (kn_get_mode() == saved) return;
    if (kn_set_mode(saved) != KN_OK) { /* the sync before the switch reported the stretch's error */
        test_fail(__FILE__, __LINE__, "debug_checks_restore(%s): %s", kn_mode_name(saved), kn_last_error());
        kn_clear_error();
    }
}

bool all_finite(const double *v, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i])) return false;
    return true;
}

/* splitmix64 over the seed and a call counter: host-side randomness independent of kiln's. */
static uint64_t next_random(void) {
    static uint64_t state;
    static bool ready;
    if (!ready) state = test_seed() * 0x9E3779B97F4A7C15ull + 1, ready = true;
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void rand_fill(double *dst, int64_t n, double lo, double hi) {
    for (int64_t i = 0; i < n; i++) dst[i] = lo + (hi - lo) * ((double)(next_random() >> 11) * 0x1.0p-53);
}

kn_tensor *tensor_from(const double *v, kn_shape shape, kn_dtype dtype) {
    kn_tensor *d = kn_from_host(v, KN_F64, shape, kn_default_device());
    if (dtype == KN_F64) return d;
    kn_tensor *t = kn_cast(d, dtype);
    kn_release(d);
    return t;
}

kn_tensor *rand_tensor(kn_shape shape, kn_dtype dtype, double lo, double hi) {
    int64_t n = kn_shape_numel(shape);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    rand_fill(v, n, lo, hi);
    if (dtype == KN_I32 || dtype == KN_I64)
        for (int64_t i = 0; i < n; i++) v[i] = floor(v[i]);
    if (dtype == KN_BOOL)
        for (int64_t i = 0; i < n; i++) v[i] = v[i] > (lo + hi) / 2;
    kn_tensor *t = tensor_from(v, shape, dtype);
    free(v);
    return t;
}

double *read_f64(kn_tensor *t) {
    if (!t) return NULL;
    int64_t n = kn_numel(t);
    kn_tensor *d = kn_cast(t, KN_F64);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!d || kn_to_host(d, v, sizeof(double) * (size_t)n) != KN_OK) {
        free(v);
        v = NULL;
    }
    kn_release(d);
    return v;
}

bool check_close_at(kn_tensor *t, const double *want, tolerance tol, const char *what, const char *file, int line) {
    if (!t) {
        test_fail(file, line, "%s: no tensor (%s)", what, kn_last_error());
        return false;
    }
    double *got = read_f64(t);
    if (!got) {
        test_fail(file, line, "%s: could not read values (%s)", what, kn_last_error());
        return false;
    }
    int64_t n = kn_numel(t);
    bool ok = true;
    for (int64_t i = 0; i < n && ok; i++) {
        double g = got[i], w = want[i];
        bool same = (isnan(g) && isnan(w)) || g == w || fabs(g - w) <= tol.atol + tol.rtol * fabs(w);
        if (!same) {
            char desc[96];
            test_fail(file, line, "%s (%s): element %lld is %.9g, expected %.9g (|diff| %.3g, rtol %g, atol %g)",
                      what, kn_describe(t, desc, sizeof desc), (long long)i, g, w, fabs(g - w), tol.rtol, tol.atol);
            ok = false;
        }
    }
    free(got);
    return ok;
}

bool check_close(kn_tensor *t, const double *want, tolerance tol, const char *what) {
    return check_close_at(t, want, tol, what, __FILE__, __LINE__);
}

bool check_shape(kn_tensor *t, kn_shape want, const char *file, int line) {
    if (!t) {
        test_fail(file, line, "no tensor (%s)", kn_last_error());
        return false;
    }
    kn_shape got = kn_shape_of(t);
    bool same = got.n == want.n;
    for (int d = 0; same && d < got.n; d++) same = got.v[d] == want.v[d];
    if (!same) {
        char desc[96];
        test_fail(file, line, "shape is %s, expected %d dims", kn_describe(t, desc, sizeof desc), want.n);
    }
    return same;
}

kn_tensor *non_contiguous_copy(kn_tensor *t) {
    if (!t) return NULL;
    int nd = kn_ndim(t);
    if (nd < 2) {
        /* Column 0 of [n, 2] copies: a view with stride 2. */
        kn_tensor *col = kn_unsqueeze(t, -1);
        kn_tensor *wide = kn_expand(col, nd == 0 ? KN_SHAPE(1, 2) : KN_SHAPE(kn_size(t, 0), 2));
        kn_tensor *dense = kn_contiguous(wide);
        kn_tensor *picked = kn_select(dense, -1, 0);
        kn_tensor *out = nd == 0 ? kn_squeeze_all(picked) : picked;
        kn_release(col);
        kn_release(wide);
        kn_release(dense);
        if (out != picked) kn_release(picked);
        return out;
    }
    kn_tensor *tr = kn_transpose(t, 0, nd - 1);
    kn_tensor *c = kn_contiguous(tr);
    kn_tensor *back = kn_transpose(c, 0, nd - 1);
    kn_release(tr);
    kn_release(c);
    return back;
}

void unravel(int64_t flat, kn_shape shape, int64_t *idx) {
    for (int d = shape.n - 1; d >= 0; d--) {
        idx[d] = shape.v[d] ? flat % shape.v[d] : 0;
        flat = shape.v[d] ? flat / shape.v[d] : 0;
    }
}

int64_t ravel_broadcast(const int64_t *idx, int out_ndim, kn_shape in) {
    int64_t flat = 0;
    for (int d = 0; d < in.n; d++) {
        int64_t i = in.v[d] == 1 ? 0 : idx[out_ndim - in.n + d];
        flat = flat * in.v[d] + i;
    }
    return flat;
}
