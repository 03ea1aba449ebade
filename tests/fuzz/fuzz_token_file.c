/* Fuzz target: a token file, opened in every format with and without a vocabulary check and
 * read whole, then through the batch loader. The input is the file; the loader's options and
 * the vocabulary size come from its first and last bytes. Beyond the error contract: tokens of
 * a file checked against a vocabulary lie in it, a read past the end fails, batches have their
 * shape, targets are the inputs shifted by one, and seeking back gives the same batch again. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

/* Batches read per loader (a fuzz run stays small). */
#define BATCHES 3

static void check_file(const char *path, kn_token_format format, int64_t vocab) {
    kn_clear_error();
    kn_token_file *f = kn_token_file_open(path, format, vocab);
    if (fuzz_failed(!f, "kn_token_file_open")) return;
    int64_t n = kn_token_file_count(f);
    kn_token_format got = kn_token_file_format(f);
    fuzz_require(n > 0 && (format == KN_TOKENS_AUTO ? got == KN_TOKENS_U16 || got == KN_TOKENS_LLMC : got == format),
                 "a token file opens with %lld tokens in format %d (asked for %d)", (long long)n, (int)got, (int)format);
    int64_t *tokens = malloc(sizeof *tokens * (size_t)n);
    fuzz_require(tokens != NULL, "out of memory");
    kn_clear_error();
    fuzz_require(kn_token_file_read(f, 0, n, tokens) == KN_OK, "reading a token file's %lld tokens fails: %s",
                 (long long)n, kn_last_error());
    for (int64_t i = 0; i < n; i++)
        fuzz_require(tokens[i] >= 0 && (!vocab || tokens[i] < vocab), "token %lld is %lld, vocabulary %lld",
                     (long long)i, (long long)tokens[i], (long long)vocab);
    kn_clear_error();
    fuzz_failed(kn_token_file_read(f, n, 1, tokens) != KN_OK, "kn_token_file_read past the end");
    fuzz_require(kn_last_status() == KN_ERR_INDEX, "a read past the end of a token file does not fail");
    free(tokens);
    kn_token_file_close(f);
}

/* The batch as host values; false (error checked) when the loader failed. */
static bool next_batch(kn_token_loader *l, int64_t B, int64_t T, int64_t *inputs, int64_t *targets) {
    kn_tensor *x = NULL, *y = NULL;
    kn_clear_error();
    if (fuzz_failed(kn_token_loader_next(l, &x, &y) != KN_OK, "kn_token_loader_next")) return false;
    kn_shape sx = kn_shape_of(x), sy = kn_shape_of(y);
    fuzz_require(sx.n == 2 && sx.v[0] == B && sx.v[1] == T && sy.n == 2 && sy.v[0] == B && sy.v[1] == T &&
                     kn_dtype_of(x) == KN_I64 && kn_dtype_of(y) == KN_I64,
                 "a batch is not two [%lld, %lld] i64 tensors", (long long)B, (long long)T);
    size_t bytes = sizeof(int64_t) * (size_t)(B * T);
    kn_clear_error();
    fuzz_require(kn_to_host(x, inputs, bytes) == KN_OK && kn_to_host(y, targets, bytes) == KN_OK,
                 "a batch cannot be read: %s", kn_last_error());
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t + 1 < T; t++)
            fuzz_require(targets[b * T + t] == inputs[b * T + t + 1], "targets are not the inputs shifted by one");
    return true;
}

static void check_loader(const char *path, const kn_token_loader_options *o) {
    kn_clear_error();
    kn_token_loader *l = kn_token_loader_open(path, o);
    if (fuzz_failed(!l, "kn_token_loader_open")) return;
    size_t n = (size_t)(o->B * o->T);
    int64_t *in = malloc(sizeof *in * n * 4), *tg = in + n, *first_in = in + 2 * n, *first_tg = in + 3 * n;
    fuzz_require(in != NULL, "out of memory");
    kn_scope_push();
    bool ok = true;
    for (int i = 0; i < BATCHES && ok; i++) {
        ok = next_batch(l, o->B, o->T, in, tg);
        if (ok && i == 0) memcpy(first_in, in, sizeof *in * 2 * n);
    }
    kn_clear_error();
    if (ok && !fuzz_failed(kn_token_loader_seek(l, 0) != KN_OK, "kn_token_loader_seek") &&
        next_batch(l, o->B, o->T, in, tg))
        fuzz_require(memcmp(in, first_in, sizeof *in * n) == 0 && memcmp(tg, first_tg, sizeof *in * n) == 0,
                     "batch 0 differs after seeking back to it");
    kn_scope_pop();
    free(in);
    kn_token_loader_close(l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write("tokens.bin", data, size);
    uint8_t first = size ? data[0] : 0, last = size ? data[size - 1] : 0;
    int64_t vocab = 1 + (first | last << 8); /* a vocabulary some files fit and others do not */
    const kn_token_format formats[] = {KN_TOKENS_AUTO, KN_TOKENS_U16, KN_TOKENS_U32, KN_TOKENS_LLMC};
    for (int i = 0; i < 4; i++) {
        check_file(path, formats[i], 0);
        check_file(path, formats[i], vocab);
    }
    kn_token_loader_options o = KN_TOKEN_LOADER_OPTIONS_DEFAULT;
    o.B = 1 + first % 3;
    o.T = 1 + last % 8;
    o.format = formats[(first >> 2) % 4];
    o.vocab_size = first & 0x40 ? vocab : 0;
    o.shuffle = last & 0x80;
    o.seed = first;
    o.prefetch = last & 0x40;
    check_loader(path, &o);
    return 0;
}
