/* Which tokens each batch row reads (the rules are documented in include/kiln/data.h). */
#include "io/token_batch.h"

#include <stdlib.h>

#include "core/error.h"
#include "core/philox.h"

kn_status kn_batch_rule_init(kn_batch_rule *r, const kn_token_file *f, const char *path, int64_t B, int64_t T,
                             bool shuffle, uint64_t seed) {
    int64_t n = kn_token_file_count(f);
    if (n < T + 2)
        return kn_error(KN_ERR_IO, "token file %s: %lld tokens, but sequence length %lld needs at least %lld", path,
                        (long long)n, (long long)T, (long long)T + 2);
    *r = (kn_batch_rule){.file = f, .B = B, .T = T, .range = n - T - 1, .shuffle = shuffle, .seed = seed,
                         .windows = (n - 2) / T, .perm_epoch = -1, .last_batch = INT64_MAX / (B * T) - 1};
    if (shuffle && !(r->perm = malloc(sizeof *r->perm * (size_t)r->windows)))
        return kn_error(KN_ERR_OOM, "token file %s: out of host memory for %lld shuffled windows", path,
                        (long long)r->windows);
    return KN_OK;
}

void kn_batch_rule_free(kn_batch_rule *r) {
    free(r->perm);
    r->perm = NULL;
}

/* Fisher-Yates over [0, K) with Philox draws under a key hashed from (seed, epoch). Taking a
 * 64-bit draw modulo j + 1 biases it by under (j + 1) / 2^64: nothing measurable. */
static void draw_permutation(kn_batch_rule *r, int64_t epoch) {
    int64_t k = r->windows, *p = r->perm;
    uint64_t key = kn_philox_u64(kn_philox(r->seed, (uint64_t)epoch));
    for (int64_t j = 0; j < k; j++) p[j] = j;
    for (int64_t j = k - 1; j > 0; j--) {
        int64_t pick = (int64_t)(kn_philox_u64(kn_philox(key, (uint64_t)j)) % (uint64_t)(j + 1));
        int64_t t = p[j];
        p[j] = p[pick];
        p[pick] = t;
    }
    r->perm_epoch = epoch;
}

/* The first token of window number g (g = i * B + b). */
static int64_t window_start(kn_batch_rule *r, int64_t g) {
    if (!r->shuffle) return g * r->T % r->range;
    int64_t epoch = g / r->windows;
    if (epoch != r->perm_epoch) draw_permutation(r, epoch);
    return r->perm[g % r->windows] * r->T;
}

kn_status kn_batch_fill(kn_batch_rule *r, int64_t i, int64_t *inputs, int64_t *targets) {
    kn_status s = KN_OK;
    for (int64_t b = 0; s == KN_OK && b < r->B; b++) {
        int64_t start = window_start(r, i * r->B + b);
        /* start + T <= N - 2 by both rules, so the reads lie inside the file as it was opened. */
        s = kn_token_file_read(r->file, start, r->T, inputs + b * r->T);
        if (s == KN_OK) s = kn_token_file_read(r->file, start + 1, r->T, targets + b * r->T);
    }
    return s;
}
