/* generation_config.json: a checkpoint's generation defaults, read as transformers reads
 * them (generate.h). */
#include <stdio.h>
#include <unistd.h>

#include "lm/generate.h"
#include "lm/json_file.h"

/* A number field into *out; absent or null keeps it. */
static kn_status number(const char *path, const cJSON *root, const char *key, double lo, double hi, double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) return KN_OK;
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi))
        return kn_set_error(KN_ERR_IO, "%s: \"%s\" is not a number in [%g, %g]", path, key, lo, hi);
    *out = v->valuedouble;
    return KN_OK;
}

static kn_status eos_ids(const char *path, const cJSON *root, lm_generate_options *o) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "eos_token_id");
    if (!v || cJSON_IsNull(v)) return KN_OK;
    int n = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 1;
    if (n > LM_MAX_EOS) return kn_set_error(KN_ERR_IO, "%s: \"eos_token_id\" lists %d ids; kiln takes up to %d", path, n, LM_MAX_EOS);
    for (int i = 0; i < n; i++) {
        const cJSON *id = cJSON_IsArray(v) ? cJSON_GetArrayItem(v, i) : v;
        if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble > INT32_MAX || id->valuedouble != (int)id->valuedouble)
            return kn_set_error(KN_ERR_IO, "%s: \"eos_token_id\" must be a token id or a list of them", path);
        o->eos_ids[i] = (int)id->valuedouble;
    }
    o->n_eos = n;
    return KN_OK;
}

static kn_status read_fields(const char *path, const cJSON *root, lm_generate_options *o) {
    const cJSON *sample = cJSON_GetObjectItemCaseSensitive(root, "do_sample");
    if (sample && !cJSON_IsBool(sample) && !cJSON_IsNull(sample))
        return kn_set_error(KN_ERR_IO, "%s: \"do_sample\" is not true or false", path);
    lm_sampling *s = &o->sampling;
    double temperature = s->temperature > 0 ? s->temperature : 1.0, top_k = s->top_k;
    double max_new = o->max_new_tokens;
    kn_status st = number(path, root, "temperature", 0, 1e6, &temperature);
    if (st == KN_OK) st = number(path, root, "top_k", 0, 1 << 30, &top_k);
    if (st == KN_OK) st = number(path, root, "top_p", 0, 1, &s->top_p);
    if (st == KN_OK) st = number(path, root, "repetition_penalty", 1e-6, 1e6, &s->repetition_penalty);
    if (st == KN_OK) st = number(path, root, "max_new_tokens", 0, 1 << 30, &max_new);
    if (st == KN_OK) st = eos_ids(path, root, o);
    if (st != KN_OK) return st;
    s->temperature = cJSON_IsTrue(sample) ? temperature : 0;  /* transformers samples only with do_sample */
    s->top_k = (int)top_k;
    o->max_new_tokens = (int)max_new;
    return KN_OK;
}

kn_status lm_generation_config_load(const char *dir, lm_generate_options *o) {
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/generation_config.json", dir) >= sizeof path)
        return kn_set_error(KN_ERR_IO, "%s: the path is too long", dir);
    if (access(path, F_OK) != 0) return KN_OK; /* none: transformers' defaults stand */
    cJSON *root = json_file_read(path);
    if (!root) return kn_last_status();
    kn_status st = read_fields(path, root, o);
    cJSON_Delete(root);
    return st;
}
