/* Text generation with a KV cache: prefill the prompts, then decode one token per step,
 * greedy or sampled. The `kiln generate` command is a thin layer over this. */
#ifndef KILN_MODELS_GENERATE_H
#define KILN_MODELS_GENERATE_H

#include <kiln/tokenizer.h>

#include "lm/lm.h"

typedef struct lm_sampling {
    double temperature;         /* 0: greedy */
    int top_k;                  /* 0: off */
    double top_p;               /* 1: off */
    double repetition_penalty;  /* 1: off (CTRL's rule, as transformers applies it) */
    uint64_t seed;
} lm_sampling;

/* Text produced for prompt `row` (a UTF-8 piece, never half a character). Return false to stop
 * generating. */
typedef bool (*lm_on_text)(void *ctx, int row, const char *text, size_t len);

typedef struct lm_generate_options {
    int max_new_tokens;
    lm_sampling sampling;
    const char *const *stop;    /* stop strings (not included in the output), n_stop of them */
    int n_stop;
    bool ignore_eos;
    lm_on_text on_text;         /* streaming; NULL: none */
    void *ctx;
} lm_generate_options;

/* Defaults from generation_config.json in dir, if there is one (temperature, top_k, top_p,
 * repetition_penalty, do_sample, max_new_tokens, eos_token_id); unset fields keep o's
 * values. A malformed file is an error naming it. */
kn_status lm_generation_config_load(const char *dir, lm_generate_options *o, lm_config *cfg);

typedef struct lm_generation {
    int n_rows;
    int32_t **ids;              /* the generated ids of each row (no prompt) */
    size_t *n_ids;
    char **text;                /* the decoded text of each row (NULL without a tokenizer) */
    int64_t prefill_tokens, decode_tokens;
    double prefill_seconds, decode_seconds;
} lm_generation;
void lm_generation_free(lm_generation *g);

/* Generates for n prompts of token ids at once (left-padded into one batch). tok may be NULL
 * (no text, no stop strings). A prompt longer than the model's context is an error. */
kn_status lm_generate(lm *m, const kn_tokenizer *tok, int n, const int32_t *const *prompts, const size_t *lens,
                      const lm_generate_options *o, lm_generation *out);

#endif
