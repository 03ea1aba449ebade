/* What the fuzz targets share (docs/fuzzing.md). Each fuzz_<name>.c defines the libFuzzer entry
 * point and is linked either with libFuzzer (`make fuzz`) or with replay.c (the ctest
 * fuzz_replay_<name>, which runs it on every file of corpus/<name>/).
 *
 * A target feeds its input to a loader and checks the contract of DESIGN.md: a call that fails
 * leaves a status and a message naming the problem, a call that succeeds gives an object that
 * works. A broken contract aborts, which libFuzzer reports as a crash with the input. */
#ifndef KILN_TESTS_FUZZ_H
#define KILN_TESTS_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/kiln.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Writes size bytes to `name` in this process's temporary directory and returns the file's
 * path, valid until the process ends. The loaders read files, so this is how an input reaches
 * them. */
const char *fuzz_write(const char *name, const void *data, size_t size);
/* The temporary directory itself, removed at exit with everything in it. */
const char *fuzz_dir(void);

/* Call kn_clear_error() before the call, then pass whether it failed: returns `failed`, and
 * aborts when a failure left no status, no message, or KN_ERR_INTERNAL (a bug in kiln). */
bool fuzz_failed(bool failed, const char *call);
/* Whether the bytes are one JSON value with nothing but whitespace after it, as Python's json
 * module (which transformers reads these files with) requires of a file that loads. */
bool fuzz_is_json(const uint8_t *data, size_t size);
/* The member of a cJSON object that Python's json module reads for key: the last one of that
 * name (cJSON's own lookup finds the first). NULL when there is none. */
const struct cJSON *fuzz_json_member(const struct cJSON *object, const char *key);
/* Aborts with the message when cond is false: a successful call gave something unusable. */
void fuzz_require(bool cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
