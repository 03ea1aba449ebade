/* Token files and the batch loader: format round trips, the batching rules against a direct
 * computation, prefetch and seek giving the same batches, shuffle as a seeded permutation, and
 * every bad file refused with a message naming it and its first problem. */
#define _DEFAULT_SOURCE /* mkdtemp */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static char dir[] = "/tmp/kiln_tokens_XXXXXX";

static const char *path_of(const char *name) {
    static char buf[4][512];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, sizeof buf[0], "%s/%s", dir, name);
    return p;
}

static void write_raw(const char *path, const void *bytes, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(bytes, 1, n, f) == n);
    if (f) fclose(f);
}

/* Random token ids below `bound` from the run's seed. */
static uint32_t *random_tokens(int64_t n, uint64_t bound) {
    uint32_t *t = malloc(sizeof *t * (size_t)n);
    double *u = malloc(sizeof *u * (size_t)n);
    rand_fill(u, n, 0, (double)bound);
    for (int64_t i = 0; i < n; i++) t[i] = (uint32_t)u[i];
    free(u);
    return t;
}

static kn_token_loader_options opts(int64_t B, int64_t T, bool shuffle, uint64_t seed, bool prefetch) {
    kn_token_loader_options o = KN_TOKEN_LOADER_OPTIONS_DEFAULT;
    o.B = B;
    o.T = T;
    o.shuffle = shuffle;
    o.seed = seed;
    o.prefetch = prefetch;
    return o;
}

/* The next batch as host arrays of B * T values each. */
static bool read_batch(kn_token_loader *l, int64_t *x, int64_t *y, int64_t B, int64_t T) {
    kn_scope_push();
    kn_tensor *xt = NULL, *yt = NULL;
    bool ok = kn_token_loader_next(l, &xt, &yt) == KN_OK && CHECK_SHAPE(xt, KN_SHAPE(B, T)) &&
              CHECK_SHAPE(yt, KN_SHAPE(B, T)) && kn_dtype_of(xt) == KN_I64 &&
              kn_device_of(xt).type == KN_DEVICE_CPU &&
              kn_to_host(xt, x, sizeof *x * (size_t)(B * T)) == KN_OK &&
              kn_to_host(yt, y, sizeof *y * (size_t)(B * T)) == KN_OK;
    kn_scope_pop();
    CHECK(ok);
    return ok;
}

/* Reads `count` batches into x and y ([count, B, T] each). */
static bool read_batches(const char *path, kn_token_loader_options o, int64_t count, int64_t *x, int64_t *y) {
    kn_token_loader *l = kn_token_loader_open(path, &o);
    CHECK(l);
    bool ok = l != NULL;
    for (int64_t i = 0; ok && i < count; i++) ok = read_batch(l, x + i * o.B * o.T, y + i * o.B * o.T, o.B, o.T);
    kn_token_loader_close(l);
    return ok;
}

static void test_format_round_trip(void) {
    const int64_t n = 5000;
    uint32_t *small = random_tokens(n, 65536), *large = random_tokens(n, 1ull << 32);
    large[0] = 65536;
    large[1] = UINT32_MAX;
    struct { kn_token_format fmt; uint32_t *tok; int64_t header_bytes, width; } cases[] = {
        {KN_TOKENS_U16, small, 0, 2}, {KN_TOKENS_LLMC, small, 1024, 2}, {KN_TOKENS_U32, large, 0, 4}};
    int64_t *got = malloc(sizeof *got * (size_t)n);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *p = path_of("round_trip.bin");
        CHECK(kn_token_file_write(p, cases[c].tok, n, cases[c].fmt) == KN_OK);
        /* The bytes on disk are the documented layout. */
        FILE *fp = fopen(p, "rb");
        unsigned char head[1024 + 8];
        CHECK(fp && fread(head, 1, sizeof head, fp) == sizeof head);
        fseek(fp, 0, SEEK_END);
        CHECK(ftell(fp) == cases[c].header_bytes + n * cases[c].width);
        fclose(fp);
        if (cases[c].header_bytes) {
            int32_t h[3];
            memcpy(h, head, sizeof h);
            CHECK(h[0] == 20240520 && h[1] == 1 && h[2] == n);
        }
        const unsigned char *t0 = head + cases[c].header_bytes;
        uint32_t first = cases[c].width == 2 ? (uint32_t)(t0[0] | t0[1] << 8)
                                             : (uint32_t)t0[0] | (uint32_t)t0[1] << 8 | (uint32_t)t0[2] << 16 |
                                                   (uint32_t)t0[3] << 24;
        CHECK(first == cases[c].tok[0]);
        kn_token_format opens[2] = {cases[c].fmt, KN_TOKENS_AUTO};
        for (int k = 0; k < (cases[c].fmt == KN_TOKENS_U32 ? 1 : 2); k++) {
            kn_token_file *f = kn_token_file_open(p, opens[k], 0);
            CHECK(f && kn_token_file_count(f) == n && kn_token_file_format(f) == cases[c].fmt);
            CHECK(kn_token_file_read(f, 0, n, got) == KN_OK);
            bool same = true;
            for (int64_t i = 0; i < n; i++) same = same && got[i] == (int64_t)cases[c].tok[i];
            CHECK_MSG(same, "format %d opened as %d: tokens differ", (int)cases[c].fmt, (int)opens[k]);
            CHECK_ERROR(kn_token_file_read(f, n - 3, 4, got) == KN_OK, KN_ERR_INDEX, "outside");
            kn_token_file_close(f);
        }
    }
    /* Rewriting replaces the file whole and leaves no temporary behind. */
    CHECK(kn_token_file_write(path_of("round_trip.bin"), small, 10, KN_TOKENS_U16) == KN_OK);
    kn_token_file *f = kn_token_file_open(path_of("round_trip.bin"), KN_TOKENS_AUTO, 0);
    CHECK(f && kn_token_file_count(f) == 10);
    kn_token_file_close(f);
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        CHECK_MSG(!strstr(e->d_name, ".tmp"), "temporary file %s left behind", e->d_name);
    if (d) closedir(d);
    CHECK_ERROR(kn_token_file_write(path_of("x.bin"), large, n, KN_TOKENS_U16) == KN_OK, KN_ERR_ARG,
                "token 65536 at position 0");
    CHECK_ERROR(kn_token_file_write(path_of("x.bin"), small, n, KN_TOKENS_AUTO) == KN_OK, KN_ERR_ARG, "explicit");
    CHECK_ERROR(kn_token_file_write("/nonexistent_dir/x.bin", small, n, KN_TOKENS_U16) == KN_OK, KN_ERR_IO,
                "/nonexistent_dir/x.bin");
    free(got);
    free(small);
    free(large);
}

/* Batch i row b is tokens[s .. s + T] with s = ((i * B + b) * T) mod (N - T - 1). */
static void test_in_order_formula(void) {
    struct { int64_t B, T, N; } cases[] = {{1, 1, 3}, {2, 3, 7}, {4, 8, 100}, {3, 16, 1000}, {5, 7, 64}, {8, 4, 2048}};
    const int64_t batches = 40;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t B = cases[c].B, T = cases[c].T, N = cases[c].N, per = batches * B * T;
        uint32_t *tok = random_tokens(N, 50257);
        const char *p = path_of("order.bin");
        CHECK(kn_token_file_write(p, tok, N, KN_TOKENS_LLMC) == KN_OK);
        int64_t *x = malloc(sizeof *x * (size_t)per), *y = malloc(sizeof *y * (size_t)per);
        for (int pre = 0; pre < 2; pre++) {
            if (!read_batches(p, opts(B, T, false, 0, pre), batches, x, y)) continue;
            bool same = true;
            for (int64_t i = 0; i < batches; i++)
                for (int64_t b = 0; b < B; b++) {
                    int64_t s = ((i * B + b) * T) % (N - T - 1);
                    for (int64_t t = 0; t < T; t++) {
                        int64_t at = (i * B + b) * T + t;
                        same = same && x[at] == tok[s + t] && y[at] == tok[s + t + 1];
                    }
                }
            CHECK_MSG(same, "B=%lld T=%lld N=%lld prefetch=%d: batches differ from the formula", (long long)B,
                      (long long)T, (long long)N, pre);
        }
        free(x);
        free(y);
        free(tok);
    }
}

static void test_prefetch_matches_direct(void) {
    const int64_t B = 3, T = 5, N = 211, count = 100, per = count * B * T;
    uint32_t *tok = random_tokens(N, 1000);
    const char *p = path_of("prefetch.bin");
    CHECK(kn_token_file_write(p, tok, N, KN_TOKENS_U16) == KN_OK);
    int64_t *x[2], *y[2];
    for (int k = 0; k < 2; k++) {
        x[k] = malloc(sizeof(int64_t) * (size_t)per);
        y[k] = malloc(sizeof(int64_t) * (size_t)per);
    }
    for (int shuffle = 0; shuffle < 2; shuffle++) {
        bool ok = read_batches(p, opts(B, T, shuffle, 7, false), count, x[0], y[0]) &&
                  read_batches(p, opts(B, T, shuffle, 7, true), count, x[1], y[1]);
        CHECK_MSG(ok && !memcmp(x[0], x[1], sizeof(int64_t) * (size_t)per) &&
                      !memcmp(y[0], y[1], sizeof(int64_t) * (size_t)per),
                  "shuffle=%d: prefetching changed the batches", shuffle);
    }
    for (int k = 0; k < 2; k++) {
        free(x[k]);
        free(y[k]);
    }
    free(tok);
}

/* seek(i) then next gives batch i of a fresh loader: forwards, backwards, repeated, and right
 * after a next whose prefetch is still pending. */
static void test_seek(void) {
    const int64_t B = 2, T = 6, N = 150, count = 60, bt = B * T;
    uint32_t *tok = random_tokens(N, 30000);
    const char *p = path_of("seek.bin");
    CHECK(kn_token_file_write(p, tok, N, KN_TOKENS_U16) == KN_OK);
    int64_t *wx = malloc(sizeof(int64_t) * (size_t)(count * bt)), *wy = malloc(sizeof(int64_t) * (size_t)(count * bt));
    int64_t x[12], y[12];
    const int64_t order[] = {17, 3, 3, 59, 0, 41, 42, 10, 58, 1, 30, 29, 28};
    for (int shuffle = 0; shuffle < 2; shuffle++)
        for (int pre = 0; pre < 2; pre++) {
            kn_token_loader_options o = opts(B, T, shuffle, 99, pre);
            if (!read_batches(p, o, count, wx, wy)) continue;
            kn_token_loader *l = kn_token_loader_open(p, &o);
            if (!l) continue;
            for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
                int64_t i = order[k];
                CHECK(kn_token_loader_seek(l, i) == KN_OK && kn_token_loader_position(l) == i);
                if (!read_batch(l, x, y, B, T)) break;
                CHECK_MSG(!memcmp(x, wx + i * bt, sizeof x) && !memcmp(y, wy + i * bt, sizeof y),
                          "shuffle=%d prefetch=%d: seek(%lld) gave another batch", shuffle, pre, (long long)i);
                CHECK(kn_token_loader_position(l) == i + 1);
                /* Reading on continues with i + 1, as resuming from a saved position must. */
                if (i + 1 < count && read_batch(l, x, y, B, T))
                    CHECK_MSG(!memcmp(x, wx + (i + 1) * bt, sizeof x), "batch after seek(%lld) differs", (long long)i);
            }
            CHECK_ERROR(kn_token_loader_seek(l, -1) == KN_OK, KN_ERR_INDEX, "outside");
            kn_token_loader_close(l);
        }
    free(wx);
    free(wy);
    free(tok);
}

/* Seeks that land while the thread is still making a large batch (drawing a new epoch's
 * permutation too) match a loader without prefetch. */
static void test_seek_during_prefetch(void) {
    const int64_t N = 1 << 18, B = 8, T = 128, bt = B * T;
    uint32_t *tok = random_tokens(N, 50257);
    const char *p = path_of("seek_large.bin");
    CHECK(kn_token_file_write(p, tok, N, KN_TOKENS_U16) == KN_OK);
    kn_token_loader_options on = opts(B, T, true, 3, true), off = opts(B, T, true, 3, false);
    kn_token_loader *a = kn_token_loader_open(p, &on), *b = kn_token_loader_open(p, &off);
    int64_t *x = malloc(sizeof *x * (size_t)(4 * bt)), *y = x + bt, *wx = x + 2 * bt, *wy = x + 3 * bt;
    double u[40];
    rand_fill(u, 40, 0, 5000);
    for (int k = 0; a && b && k < 40; k++) {
        int64_t i = (int64_t)u[k];
        CHECK(kn_token_loader_seek(a, i) == KN_OK && kn_token_loader_seek(b, i) == KN_OK);
        for (int r = 0; r < 2; r++)
            if (read_batch(a, x, y, B, T) && read_batch(b, wx, wy, B, T))
                CHECK_MSG(!memcmp(x, wx, sizeof *x * (size_t)(2 * bt)), "batch %lld after seek(%lld) differs",
                          (long long)(i + r), (long long)i);
    }
    kn_token_loader_close(a);
    kn_token_loader_close(b);
    free(x);
    free(tok);
}

/* Tokens equal to their position, so a row's first input is its window's start. */
static uint32_t *identity_tokens(int64_t n) {
    uint32_t *t = malloc(sizeof *t * (size_t)n);
    for (int64_t i = 0; i < n; i++) t[i] = (uint32_t)i;
    return t;
}

/* The window starts of `rows` consecutive rows of a shuffled loader. */
static bool shuffled_starts(const char *path, int64_t B, int64_t T, uint64_t seed, int64_t rows, int64_t *starts) {
    int64_t *x = malloc(sizeof *x * (size_t)(rows * T)), *y = malloc(sizeof *y * (size_t)(rows * T));
    bool ok = read_batches(path, opts(B, T, true, seed, true), rows / B, x, y);
    for (int64_t r = 0; ok && r < rows; r++) {
        starts[r] = x[r * T];
        for (int64_t t = 0; t < T; t++) ok = ok && x[r * T + t] == starts[r] + t && y[r * T + t] == starts[r] + t + 1;
    }
    free(x);
    free(y);
    return ok;
}

static void test_shuffle_is_seeded_permutation(void) {
    /* K = floor((N - 2) / T) = 30 windows; B = 4 does not divide K, so batches straddle epochs. */
    const int64_t T = 8, N = 245, K = (N - 2) / T, B = 4, epochs = 6, rows = K * epochs - (K * epochs) % B;
    uint32_t *tok = identity_tokens(N);
    const char *p = path_of("shuffle.bin");
    CHECK(kn_token_file_write(p, tok, N, KN_TOKENS_U16) == KN_OK);
    int64_t *s1 = malloc(sizeof(int64_t) * (size_t)rows), *s2 = malloc(sizeof(int64_t) * (size_t)rows);
    if (shuffled_starts(p, B, T, 1234, rows, s1)) {
        for (int64_t e = 0; e < rows / K; e++) {
            int seen[64] = {0};
            bool ok = true;
            for (int64_t k = 0; k < K; k++) {
                int64_t s = s1[e * K + k];
                ok = ok && s % T == 0 && s / T < K && !seen[s / T]++;
            }
            CHECK_MSG(ok, "epoch %lld is not a permutation of the %lld windows", (long long)e, (long long)K);
        }
        CHECK_MSG(memcmp(s1, s1 + K, sizeof(int64_t) * (size_t)K), "epochs 0 and 1 have the same order");
        CHECK(shuffled_starts(p, B, T, 1234, rows, s2) && !memcmp(s1, s2, sizeof(int64_t) * (size_t)rows));
        CHECK(shuffled_starts(p, B, T, 1235, rows, s2) && memcmp(s1, s2, sizeof(int64_t) * (size_t)rows));
    }
    free(s1);
    free(s2);
    free(tok);
}

static void test_u32_tokens(void) {
    const int64_t N = 300, B = 2, T = 10;
    uint32_t *tok = random_tokens(N, 1 << 20);
    tok[0] = 1000000;
    const char *p = path_of("u32.bin");
    CHECK(kn_token_file_write(p, tok, N, KN_TOKENS_U32) == KN_OK);
    kn_token_loader_options o = opts(B, T, false, 0, true);
    o.format = KN_TOKENS_U32;
    o.vocab_size = 1 << 20;
    kn_token_loader *l = kn_token_loader_open(p, &o);
    int64_t x[20], y[20];
    CHECK(l);
    if (l && read_batch(l, x, y, B, T)) {
        CHECK(x[0] == 1000000 && y[0] == tok[1] && x[T] == tok[T] && y[2 * T - 1] == tok[2 * T]);
        CHECK(kn_token_loader_num_tokens(l) == N);
    }
    kn_token_loader_close(l);
    free(tok);
}

static void check_open_fails(const char *name, kn_token_loader_options o, kn_status want, const char *needle) {
    const char *p = path_of(name);
    kn_token_loader *l = kn_token_loader_open(p, &o);
    /* Every file error names the file. */
    if (!l && want == KN_ERR_IO)
        CHECK_MSG(strstr(kn_last_error(), p), "message \"%s\" does not name %s", kn_last_error(), p);
    CHECK_ERROR(l != NULL, want, needle);
    kn_token_loader_close(l);
}

static void llmc_header(int32_t *h, int32_t version, int32_t count) {
    memset(h, 0, 1024);
    h[0] = 20240520;
    h[1] = version;
    h[2] = count;
}

static void test_bad_files(void) {
    kn_token_loader_options o = opts(2, 4, false, 0, true);
    check_open_fails("missing.bin", o, KN_ERR_IO, "cannot open (No such file");
    write_raw(path_of("empty.bin"), "", 0);
    check_open_fails("empty.bin", o, KN_ERR_IO, "empty file");
    unsigned char odd[21] = {0};
    write_raw(path_of("odd.bin"), odd, sizeof odd);
    check_open_fails("odd.bin", o, KN_ERR_IO, "21 bytes is not a whole number of 2-byte tokens");
    write_raw(path_of("odd32.bin"), odd, 18);
    o.format = KN_TOKENS_U32;
    check_open_fails("odd32.bin", o, KN_ERR_IO, "18 bytes is not a whole number of 4-byte tokens");

    int32_t buf[256 + 20];
    llmc_header(buf, 2, 40);
    write_raw(path_of("version.bin"), buf, sizeof buf);
    o.format = KN_TOKENS_AUTO;
    check_open_fails("version.bin", o, KN_ERR_IO, "llm.c header version 2, expected 1");
    llmc_header(buf, 1, 41);
    write_raw(path_of("count.bin"), buf, sizeof buf);
    check_open_fails("count.bin", o, KN_ERR_IO, "header says 41 tokens but the file holds 40");
    llmc_header(buf, 1, 40);
    write_raw(path_of("short_header.bin"), buf, 100);
    o.format = KN_TOKENS_LLMC;
    check_open_fails("short_header.bin", o, KN_ERR_IO, "shorter than the llm.c header");
    buf[0] = 12345;
    write_raw(path_of("magic.bin"), buf, sizeof buf);
    check_open_fails("magic.bin", o, KN_ERR_IO, "llm.c magic 12345, expected 20240520");

    /* T + 2 tokens are the fewest a loader accepts. */
    uint32_t *tok = identity_tokens(7);
    CHECK(kn_token_file_write(path_of("short.bin"), tok, 5, KN_TOKENS_LLMC) == KN_OK);
    o.format = KN_TOKENS_AUTO;
    check_open_fails("short.bin", o, KN_ERR_IO, "5 tokens, but sequence length 4 needs at least 6");
    CHECK(kn_token_file_write(path_of("short.bin"), tok, 6, KN_TOKENS_LLMC) == KN_OK);
    kn_token_loader *l = kn_token_loader_open(path_of("short.bin"), &o);
    int64_t x[8], y[8];
    CHECK(l);
    if (l && read_batch(l, x, y, 2, 4)) CHECK(x[4] == 0 && y[7] == 4); /* N - T - 1 = 1: one window */
    kn_token_loader_close(l);

    tok[5] = 300;
    CHECK(kn_token_file_write(path_of("vocab.bin"), tok, 7, KN_TOKENS_U16) == KN_OK);
    o.vocab_size = 300;
    check_open_fails("vocab.bin", o, KN_ERR_IO, "token 300 at position 5 is not below vocab_size 300");
    o.vocab_size = 301;
    l = kn_token_loader_open(path_of("vocab.bin"), &o);
    CHECK(l);
    kn_token_loader_close(l);
    free(tok);

    check_open_fails("vocab.bin", opts(0, 4, false, 0, true), KN_ERR_ARG, "must both be positive");
    CHECK_ERROR(kn_token_loader_open(path_of("vocab.bin"), NULL) != NULL, KN_ERR_NULL, "NULL");
    CHECK_ERROR(kn_token_file_open(path_of("vocab.bin"), (kn_token_format)9, 0) != NULL, KN_ERR_ARG,
                "unknown format 9");
}

/* A text file given as tokens is refused, whatever the format asked for, with what to do. */
static void test_text_is_not_tokens(void) {
    char text[2048] = "";
    for (int i = 0; i < 12; i++) strcat(text, "To be, or not to be: caf\xc3\xa9 \xe2\x80\x94 that is the question.\n");
    write_raw(path_of("text.txt"), text, strlen(text));
    write_raw(path_of("odd_text.txt"), text, strlen(text) - 1); /* also not a whole number of tokens */
    kn_token_loader_options o = opts(2, 4, false, 0, true);
    const kn_token_format formats[] = {KN_TOKENS_AUTO, KN_TOKENS_U16, KN_TOKENS_U32, KN_TOKENS_LLMC};
    for (size_t k = 0; k < sizeof formats / sizeof *formats; k++) {
        o.format = formats[k];
        check_open_fails("text.txt", o, KN_ERR_IO, "looks like text, not token ids");
        CHECK_ERROR(kn_token_file_open(path_of("text.txt"), formats[k], 0) != NULL, KN_ERR_IO,
                    "make a token file with `kiln tokenize MODEL_DIR --input FILE --output tokens.bin`");
    }
    o.format = KN_TOKENS_AUTO;
    check_open_fails("odd_text.txt", o, KN_ERR_IO, "looks like text");
    /* Tokens whose bytes are mostly printable still open: one id below 8192 is enough. */
    uint32_t tok[64];
    for (int i = 0; i < 64; i++) tok[i] = i == 40 ? 2000 : 0x6568; /* "he" */
    CHECK(kn_token_file_write(path_of("printable.bin"), tok, 64, KN_TOKENS_U16) == KN_OK);
    kn_token_file *f = kn_token_file_open(path_of("printable.bin"), KN_TOKENS_AUTO, 0);
    CHECK(f && kn_token_file_count(f) == 64);
    kn_token_file_close(f);
}

/* Overwrites the file's bytes from offset (same size: no truncation). */
static void overwrite(const char *path, off_t offset, const void *bytes, size_t n) {
    int fd = open(path, O_WRONLY);
    CHECK(fd >= 0 && pwrite(fd, bytes, n, offset) == (ssize_t)n);
    if (fd >= 0) close(fd);
}

/* A file cut short (or changed) while a loader reads it: an error naming the file and its
 * sizes, with or without the prefetch thread; the mapping this replaced died of SIGBUS. */
static void test_file_shrunk_while_reading(void) {
    const int64_t N = 50000, B = 2, T = 10;
    uint32_t *tok = malloc(sizeof *tok * (size_t)N);
    for (int64_t i = 0; i < N; i++) tok[i] = (uint32_t)(i % 5000);
    int64_t x[20], y[20];
    for (int prefetch = 0; prefetch < 2; prefetch++) {
        const char *p = path_of("shrink.bin");
        CHECK(kn_token_file_write(p, tok, N, KN_TOKENS_U16) == KN_OK);
        kn_token_loader *l = kn_token_loader_open(p, &(kn_token_loader_options){.B = B, .T = T, .prefetch = prefetch});
        CHECK(l && read_batch(l, x, y, B, T));
        CHECK(truncate(p, 2000) == 0); /* 1000 tokens left */
        CHECK(kn_token_loader_seek(l, 1000) == KN_OK); /* rows start at tokens 20000 and 20010, pages past the end */
        kn_tensor *xt = NULL, *yt = NULL;
        CHECK(kn_token_loader_next(l, &xt, &yt) == KN_ERR_IO);
        const char *msg = kn_last_error();
        CHECK_MSG(strstr(msg, p) && strstr(msg, "shrank while in use (100000 bytes at open, 2000 now)"), "message: %s", msg);
        kn_clear_error();
        CHECK(kn_token_loader_position(l) == 1000 && !xt && !yt);
        /* Batches still inside the file read as before. */
        CHECK(kn_token_loader_seek(l, 1) == KN_OK && read_batch(l, x, y, B, T) && x[0] == 20);
        kn_token_loader_close(l);
    }
    /* Rewritten in place with an id the vocabulary lacks: named when read. */
    const char *p = path_of("changed.bin");
    CHECK(kn_token_file_write(p, tok, N, KN_TOKENS_U16) == KN_OK);
    kn_token_file *f = kn_token_file_open(p, KN_TOKENS_U16, 5000);
    unsigned char big[2] = {0xff, 0xff};
    overwrite(p, 2 * 30, big, 2);
    int64_t got[40];
    CHECK(f && kn_token_file_read(f, 0, 20, got) == KN_OK && got[19] == 19);
    CHECK_ERROR(kn_token_file_read(f, 20, 20, got) == KN_OK, KN_ERR_IO,
                "changed while in use: token 65535 at position 30 is not below vocab_size 5000");
    kn_token_file_close(f);
    free(tok);
}

/* Closing never hangs or leaks, whatever the prefetch thread is doing. */
static void test_close_any_time(void) {
    uint32_t *tok = random_tokens(5000, 50000);
    const char *p = path_of("close.bin");
    CHECK(kn_token_file_write(p, tok, 5000, KN_TOKENS_U16) == KN_OK);
    kn_token_loader_options o = opts(16, 64, true, 5, true);
    int64_t x[16 * 64], y[16 * 64];
    for (int k = 0; k < 50; k++) {
        kn_token_loader *l = kn_token_loader_open(p, &o);
        if (!l) break;
        if (k % 3 >= 1) read_batch(l, x, y, 16, 64);
        if (k % 3 == 2) kn_token_loader_seek(l, k * 7);
        kn_token_loader_close(l);
    }
    free(tok);
}

/* The streaming writer: tokens put in pieces make one file at commit (llm.c's count filled in
 * then); an abort, or a token the format cannot hold, leaves the old file as it was. */
static void test_token_writer_streams_and_abort_keeps_the_old_file(void) {
    const char *path = path_of("streamed.bin");
    uint32_t old[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, a[3] = {100, 200, 300}, b[4] = {400, 500, 600, 700};
    CHECK(kn_token_file_write(path, old, 10, KN_TOKENS_U16) == KN_OK);
    kn_token_writer *w = kn_token_writer_open(path, KN_TOKENS_LLMC);
    CHECK(w && kn_token_writer_put(w, a, 3) == KN_OK && kn_token_writer_put(w, b, 4) == KN_OK &&
          kn_token_writer_count(w) == 7);
    kn_token_writer_abort(w);
    kn_token_file *f = kn_token_file_open(path, KN_TOKENS_AUTO, 0);
    CHECK(f && kn_token_file_format(f) == KN_TOKENS_U16 && kn_token_file_count(f) == 10);
    kn_token_file_close(f);
    w = kn_token_writer_open(path, KN_TOKENS_LLMC);
    CHECK(w && kn_token_writer_put(w, a, 3) == KN_OK && kn_token_writer_put(w, b, 4) == KN_OK);
    CHECK(kn_token_writer_commit(w) == KN_OK);
    int64_t got[7];
    f = kn_token_file_open(path, KN_TOKENS_AUTO, 0);
    CHECK(f && kn_token_file_format(f) == KN_TOKENS_LLMC && kn_token_file_count(f) == 7 &&
          kn_token_file_read(f, 0, 7, got) == KN_OK && got[2] == 300 && got[6] == 700);
    kn_token_file_close(f);
    uint32_t wide = 70000;
    w = kn_token_writer_open(path, KN_TOKENS_U16);
    CHECK(w && kn_token_writer_put(w, a, 3) == KN_OK);
    CHECK_ERROR(kn_token_writer_put(w, &wide, 1) == KN_OK, KN_ERR_ARG, "token 70000 at position 3 does not fit in uint16");
    kn_token_writer_abort(w);
    f = kn_token_file_open(path, KN_TOKENS_AUTO, 0);
    CHECK(f && kn_token_file_count(f) == 7);
    kn_token_file_close(f);
    CHECK_ERROR(kn_token_writer_open(path, KN_TOKENS_AUTO) != NULL, KN_ERR_ARG, "explicit format");
}

static void remove_dir(void) {
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) unlink(path_of(e->d_name));
    if (d) closedir(d);
    rmdir(dir);
}

int main(void) {
    if (!mkdtemp(dir)) return perror("mkdtemp"), 1;
    RUN(test_format_round_trip);
    RUN(test_in_order_formula);
    RUN(test_prefetch_matches_direct);
    RUN(test_seek);
    RUN(test_seek_during_prefetch);
    RUN(test_shuffle_is_seeded_permutation);
    RUN(test_u32_tokens);
    RUN(test_bad_files);
    RUN(test_text_is_not_tokens);
    RUN(test_file_shrunk_while_reading);
    RUN(test_token_writer_streams_and_abort_keeps_the_old_file);
    RUN(test_close_any_time);
    remove_dir();
    return test_summary();
}
