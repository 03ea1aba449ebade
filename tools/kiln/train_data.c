/* Token batches for the token-file tasks (train_data.h). */
#include "train_data.h"

#include <stdio.h>

bool train_tokens_open(const train_options *o, const char *task, int64_t vocab, int64_t positions, kn_token_loader **out) {
    *out = NULL;
    if (o->seq > positions) {
        fprintf(stderr, "kiln train %s: --seq %lld exceeds the model's %lld positions\n", task, (long long)o->seq,
                (long long)positions);
        return false;
    }
    if (o->trace) return true;
    if (!o->data_path) {
        fprintf(stderr, "kiln train %s: --data FILE is required (a token file; make one with kiln tokenize MODEL_DIR "
                        "--input FILE --output tokens.bin)\n", task);
        return false;
    }
    kn_token_loader_options lo = KN_TOKEN_LOADER_OPTIONS_DEFAULT;
    lo.B = o->batch;
    lo.T = o->seq;
    lo.vocab_size = vocab;
    lo.shuffle = o->shuffle;
    lo.seed = o->seed;
    if (!train_token_format(o, vocab, &lo.format)) return false;
    if (!(*out = kn_token_loader_open(o->data_path, &lo))) fprintf(stderr, "kiln train %s: %s\n", task, kn_last_error());
    return *out != NULL;
}

kn_status train_tokens_batch(kn_token_loader *l, const train_options *o, int64_t g, kn_tensor **x, kn_tensor **y) {
    if (!l) {
        *x = kn_zeros(KN_SHAPE(o->batch, o->seq), KN_I64);
        *y = kn_zeros(KN_SHAPE(o->batch, o->seq), KN_I64);
        return *x && *y ? KN_OK : kn_last_status();
    }
    if (kn_token_loader_position(l) != g && kn_token_loader_seek(l, g) != KN_OK) return kn_last_status();
    return kn_token_loader_next(l, x, y);
}
