/* The test harness: checks, random inputs with the seed printed on failure, comparisons
 * against float64 references at per-dtype tolerances, and the closing "N passed, N failed". */
#ifndef KILN_TESTS_HARNESS_H
#define KILN_TESTS_HARNESS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "kiln/kiln.h"

/* Tolerances per dtype for results compared with a float64 reference: |got - want| <=
 * atol + rtol * |want|. Elementwise ops and short reductions meet these; tests of long
 * reductions scale them as noted where they do. */
typedef struct tolerance {
    double rtol, atol;
} tolerance;
tolerance tol_for(kn_dtype d);

/* The run's seed: $KILN_TEST_SEED, else fresh from the clock. Printed on any failure. */
uint64_t test_seed(void);

void test_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            test_fail(__FILE__, __LINE__, "check failed: %s", #cond);         \
            if (kn_last_status() != KN_OK) fprintf(stderr, "  last error: %s\n", kn_last_error()); \
        }                                                                     \
    } while (0)
#define CHECK_MSG(cond, ...)                                   \
    do {                                                       \
        if (!(cond)) test_fail(__FILE__, __LINE__, __VA_ARGS__); \
    } while (0)
/* The expression must fail with this status, and its message must contain `needle`. */
#define CHECK_ERROR(expr_ok, status, needle) check_error((expr_ok), (status), (needle), __FILE__, __LINE__, #expr_ok)
void check_error(bool ok, kn_status want, const char *needle, const char *file, int line, const char *what);

/* Runs one named test case (its CHECK failures are counted against it). */
typedef void (*test_fn)(void);
void run_test(const char *name, test_fn fn);
#define RUN(fn) run_test(#fn, fn)
/* Prints "N passed, N failed" and returns the exit code. */
int test_summary(void);

/* Debug mode (docs/decisions.md) refuses an op that makes NaN/Inf from finite inputs and
 * reports asynchronous kernel errors at the op instead of at kn_sync. A stretch of a test that
 * makes NaN/Inf on purpose to check their values, or that checks the deferred report of
 * strict mode, goes between these two: debug_checks_off switches debug mode to strict and
 * leaves the other modes (strict, fused) as they are, so the stretch still runs in them; it
 * returns the mode to hand to debug_checks_restore. Keep the stretch to the ops that need it,
 * with a comment saying why. Restoring finishes the stretch's queued work; an error it
 * reports there (one the stretch did not check) fails the test case. */
kn_mode debug_checks_off(void);
void debug_checks_restore(kn_mode saved);
/* No NaN or Inf among v[0..n). */
bool all_finite(const double *v, int64_t n);

/* Random host data: uniform in [lo, hi), from the run's seed and a per-call stream. */
void rand_fill(double *dst, int64_t n, double lo, double hi);
/* A tensor of dtype made from doubles (rounded as a cast would), and its values back as
 * doubles (exactly representable after the rounding, so references can use them). */
kn_tensor *tensor_from(const double *v, kn_shape shape, kn_dtype dtype);
kn_tensor *rand_tensor(kn_shape shape, kn_dtype dtype, double lo, double hi);
/* Reads any tensor as doubles into a malloc'd array (NULL on failure). */
double *read_f64(kn_tensor *t);
/* Compares t against want[] (row-major) at tol; reports the first mismatch with its index. */
bool check_close(kn_tensor *t, const double *want, tolerance tol, const char *what);
bool check_close_at(kn_tensor *t, const double *want, tolerance tol, const char *what, const char *file, int line);
#define CHECK_CLOSE(t, want, tol, what) check_close_at((t), (want), (tol), (what), __FILE__, __LINE__)
/* t has exactly this shape. */
bool check_shape(kn_tensor *t, kn_shape want, const char *file, int line);
#define CHECK_SHAPE(t, want) check_shape((t), (want), __FILE__, __LINE__)

/* Each parameter's gradient (after kn_backward) against the fixture's "grad.<its name>" at tol. */
void check_fixture_grads(kn_safetensors *f, const kn_named_tensors *params, tolerance tol);

/* A non-contiguous tensor with the same values as t (a transposed copy transposed back, or a
 * strided slice), for layout tests. */
kn_tensor *non_contiguous_copy(kn_tensor *t);

/* Row-major index helpers for references. */
void unravel(int64_t flat, kn_shape shape, int64_t *idx);
int64_t ravel_broadcast(const int64_t *idx, int out_ndim, kn_shape in_shape);

/* Files and programs, for tests that read fixtures or run the kiln binary. */
/* The whole file as a malloc'd NUL-terminated string; NULL if it cannot be opened. */
char *read_text_file(const char *path);
/* Whether the file at path contains needle. */
bool file_contains(const char *path, const char *needle);
/* The same, and when it does not, prints the file's text (the context of a failed CHECK). */
bool file_has(const char *path, const char *needle);
/* Runs program with args (argv[1..], NULL-ended) and waits for it: stdin from in_path (NULL:
 * inherited), stdout into out_path, stderr into err_path (NULL: into out_path too), and the
 * NAME=VALUE entries of env (NULL-ended, or NULL) added to its environment. The exit code,
 * 128 + the signal that ended it, or 127 if it could not start. */
int run_program(const char *program, const char *const *args, const char *in_path, const char *out_path,
                const char *err_path, const char *const *env);
/* The running test's own executable (/proc/self/exe), for tests that run themselves again in
 * a fresh process; "" if it cannot be read. */
const char *self_executable(void);
/* Removes the directory path and everything under it (says so on stderr if it cannot). */
void remove_tree(const char *path);

extern const kn_dtype ALL_DTYPES[KN_DTYPE_COUNT];
extern const kn_dtype FLOAT_DTYPES[4];

#endif
