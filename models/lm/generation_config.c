/* generation_config.json: a checkpoint's generation defaults, read as transformers reads
 * them (generate.h). */
#include <stdio.h>
#include <unistd.h>

#include "lm/config_reader.h"
#include "lm/generate.h"

static void eos_ids(cfg_reader *r, lm_generate_options *o) {
    const cJSON *v = cfg_item(r->root, "eos_token_id");
    if (!v) return;
    int n = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 1;
    if (n > LM_MAX_EOS) return (void)cfg_fail(r, "eos_token_id", "lists %d ids; kiln takes up to %d", n, LM_MAX_EOS);
    for (int i = 0; i < n; i++) {
        int64_t id;
        if (!cfg_int_value(r, cJSON_IsArray(v) ? cJSON_GetArrayItem(v, i) : v, "eos_token_id", 0, INT32_MAX, &id)) return;
        o->eos_ids[i] = (int)id;
    }
    o->n_eos = n;
}

/* Into a copy of o, so that a malformed file changes nothing. */
static void read_fields(cfg_reader *r, lm_generate_options *o) {
    const cJSON *root = r->root;
    bool sample = cfg_bool(r, root, "do_sample", false);
    lm_sampling *s = &o->sampling;
    double temperature = cfg_num(r, root, "temperature", 0, 1e6, s->temperature > 0 ? s->temperature : 1.0);
    s->temperature = sample ? temperature : 0;  /* transformers samples only with do_sample */
    s->top_k = (int)cfg_int(r, root, "top_k", 0, 1 << 30, s->top_k);
    s->top_p = cfg_num(r, root, "top_p", 0, 1, s->top_p);
    s->repetition_penalty = cfg_num(r, root, "repetition_penalty", 1e-6, 1e6, s->repetition_penalty);
    o->max_new_tokens = (int)cfg_int(r, root, "max_new_tokens", 0, 1 << 30, o->max_new_tokens);
    eos_ids(r, o);
}

kn_status lm_generation_config_load(const char *dir, lm_generate_options *o) {
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/generation_config.json", dir) >= sizeof path)
        return kn_set_error(KN_ERR_IO, "%s: the path is too long", dir);
    if (access(path, F_OK) != 0) return KN_OK; /* none: transformers' defaults stand */
    cfg_reader r;
    if (!cfg_open(&r, path)) return kn_last_status();
    lm_generate_options read = *o;
    read_fields(&r, &read);
    cfg_close(&r);
    if (!r.ok) return kn_last_status();
    *o = read;
    return KN_OK;
}
