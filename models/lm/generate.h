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
    int eos_ids[LM_MAX_EOS];    /* the ids that end a row; n_eos -1: the model config's */
    int n_eos;
    lm_on_text on_text;         /* streaming; NULL: none */
    void *ctx;
} lm_generate_options;

/* transformers' defaults: greedy, 64 new tokens (transformers stops at 20 tokens in all),
 * top_k 50 and top_p 1 once sampling, no repetition penalty, seed 0, the config's EOS. */
lm_generate_options lm_generate_defaults(void);

/* Defaults from generation_config.json in dir, if there is one: as transformers reads it,
 * sampling only with "do_sample": true (else greedy, temperature 0), then temperature, top_k,
 * top_p, repetition_penalty, max_new_tokens and eos_token_id (a number or a list); unset
 * fields keep o's values. No file is no change; a malformed one is an error naming it. */
kn_status lm_generation_config_load(const char *dir, lm_generate_options *o);

typedef struct lm_generation {
    int n_rows;
    int32_t **ids;              /* the generated ids of each row (no prompt) */
    size_t *n_ids;
    char **text;                /* the decoded text of each row (NULL without a tokenizer) */
    int64_t prefill_tokens, decode_tokens;
    double prefill_seconds, decode_seconds;
} lm_generation;
void lm_generation_free(lm_generation *g);

/* Generates for n prompts of token ids at once (left-padded into one batch, on the default
 * device), until each row has max_new_tokens, an EOS id (kept in its ids) or a stop string,
 * or until on_text returns false. tok may be NULL (no text, no stop strings). An empty
 * prompt, an id outside the vocabulary or a prompt longer than the model's context is an
 * error naming the prompt; generation stops at the context's end. */
kn_status lm_generate(lm *m, const kn_tokenizer *tok, int n, const int32_t *const *prompts, const size_t *lens,
                      const lm_generate_options *o, lm_generation *out);

#endif
