/* Reading the fields of a model directory's JSON config files (config.json,
 * generation_config.json) for every family: each value is checked for its type and range
 * before it is converted, and an error names the file and the key. The first error is kept;
 * reads after it return their defaults, so a reader is checked once at its end. */
#ifndef KILN_MODELS_CONFIG_READER_H
#define KILN_MODELS_CONFIG_READER_H

#include <cjson/cJSON.h>
#include <kiln/kiln.h>
#include <stdint.h>

typedef struct cfg_reader {
    const char *path;
    cJSON *root;
    const char *within; /* the object being read ("rope_scaling"), for messages; NULL: the top */
    bool ok;
} cfg_reader;

/* Reads path (kn_hf_read_json, KN_HF_CONFIG_MAX_BYTES); false with its error. */
bool cfg_open(cfg_reader *r, const char *path);
void cfg_close(cfg_reader *r);
/* Records `path: "key" <problem>` (KN_ERR_IO) unless an error is kept; returns false. */
bool cfg_fail(cfg_reader *r, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* obj's value for key, or NULL when it is absent or null (transformers' None). */
const cJSON *cfg_item(const cJSON *obj, const char *key);

#define CFG_REQUIRED INT64_MIN
/* An integer in [lo, hi] (a number with a fraction, or outside, is an error); def when absent
 * or null, or an error when def is CFG_REQUIRED. */
int64_t cfg_int(cfg_reader *r, const cJSON *obj, const char *key, int64_t lo, int64_t hi, int64_t def);
/* The same for a value already found (an element of a list named key). */
bool cfg_int_value(cfg_reader *r, const cJSON *v, const char *key, int64_t lo, int64_t hi, int64_t *out);
/* A finite number in [lo, hi]; def when absent or null. */
double cfg_num(cfg_reader *r, const cJSON *obj, const char *key, double lo, double hi, double def);
/* A finite number > 0; def when absent or null. */
double cfg_positive(cfg_reader *r, const cJSON *obj, const char *key, double def);
bool cfg_bool(cfg_reader *r, const cJSON *obj, const char *key, bool def);
/* A string, or NULL when absent or null. */
const char *cfg_string(cfg_reader *r, const cJSON *obj, const char *key);

#endif
