/* Picking the next token from one row of logits on the host, as transformers' generate does:
 * repetition penalty, then (sampling only) temperature, top-k and top-p, then a seeded draw,
 * or the argmax for greedy decoding. Internal to models/lm. */
#ifndef KILN_MODELS_LM_SAMPLER_H
#define KILN_MODELS_LM_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "lm/generate.h"

typedef struct lm_sampler lm_sampler;

/* A token that sampling may pick: its id, its processed logit and its probability. */
typedef struct lm_candidate {
    int32_t id;
    float logit;
    double prob;
} lm_candidate;

/* NULL with an error for a vocabulary below 1 or settings out of range (temperature < 0,
 * top_k < 0, top_p outside (0, 1], repetition_penalty <= 0). */
lm_sampler *lm_sampler_new(const lm_sampling *s, int64_t vocab);
void lm_sampler_free(lm_sampler *s);

/* The repetition penalty over the ids seen so far, each distinct id once, in place: a
 * positive logit is divided by the penalty, a negative one multiplied. */
void lm_sampler_penalize(lm_sampler *s, float *logits, const int32_t *ids, size_t n_ids);

/* Temperature, top-k and top-p over penalized logits (read only): the tokens that may be
 * picked with their probabilities (summing to 1), most likely first (equal logits: lower id
 * first) when top-k or top-p cut the set, else in id order. Valid until the next call. 0
 * with an error when every logit is -inf or NaN. */
size_t lm_sampler_filter(lm_sampler *s, const float *logits, const lm_candidate **out);

/* The next id of a row: the argmax (first of equal maxima) for temperature 0, else a draw
 * from lm_sampler_filter's set by the uniform number of (seed, row, step). logits are
 * penalized in place over ids[0..n_ids). -1 with an error when every logit is -inf or NaN. */
int32_t lm_sampler_next(lm_sampler *s, float *logits, const int32_t *ids, size_t n_ids, int row, int64_t step);

/* The counter-based uniform number in [0, 1) that a draw uses: a function of its three
 * arguments alone, so the same seed gives the same text whatever else runs. */
double lm_sampler_uniform(uint64_t seed, uint64_t row, uint64_t step);

#endif
