/* Small helpers for reading tokenizer.json's components and naming what is wrong in them. */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

const char *kn_tok_json_str(const cJSON *o, const char *key, const char *where, bool required) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsString(v)) return v->valuestring;
    if (required) kn_set_error(KN_ERR_IO, "%s.%s: missing or not a string", where, key);
    return NULL;
}

bool kn_tok_json_bool(const cJSON *o, const char *key, bool fallback) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : fallback;
}

kn_status kn_tok_unsupported(const char *file, const char *where, const cJSON *component) {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(component, "type");
    if (!cJSON_IsString(type)) return kn_set_error(KN_ERR_IO, "%s: %s: no \"type\"", file, where);
    return kn_set_error(KN_ERR_IO, "%s: %s type \"%s\" is not supported by kiln", file, where,
                        type->valuestring);
}

char *kn_tok_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (!d) {
        kn_set_error(KN_ERR_OOM, "tokenizer: out of memory");
        return NULL;
    }
    return memcpy(d, s, n);
}
