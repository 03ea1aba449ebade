/* The batching rules of include/kiln/data.h: which window of tokens each row of batch i
 * reads, in order or shuffled. Batch i is a function of i alone, so any thread may make it. */
#ifndef KILN_IO_TOKEN_BATCH_H
#define KILN_IO_TOKEN_BATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/data.h"

typedef struct kn_batch_rule {
    const kn_token_file *file;
    int64_t B, T;
    int64_t range;      /* N - T - 1: in-order starts are taken modulo this */
    bool shuffle;
    uint64_t seed;
    int64_t windows;    /* K = floor((N - 2) / T) shuffled windows per epoch */
    int64_t *perm;      /* shuffled: the permutation of [0, K) for epoch perm_epoch */
    int64_t perm_epoch; /* -1 before the first draw */
    int64_t last_batch; /* the largest batch index whose offsets fit in int64 */
} kn_batch_rule;

/* Fails with a message (KN_ERR_IO naming the file) when it holds fewer than T + 2 tokens. */
kn_status kn_batch_rule_init(kn_batch_rule *r, const kn_token_file *f, const char *path, int64_t B, int64_t T,
                             bool shuffle, uint64_t seed);
void kn_batch_rule_free(kn_batch_rule *r);
/* Writes batch i (0 <= i <= last_batch) as row-major [B, T] inputs and targets; fails only
 * when the file shrank or changed since it was opened (kn_token_file_read). Not thread-safe
 * for one rule: it caches the shuffled epoch's permutation. */
kn_status kn_batch_fill(kn_batch_rule *r, int64_t i, int64_t *inputs, int64_t *targets);

#endif
