/* Small helpers for reading tokenizer.json's components and naming what is wrong in them. */
#include <stdio.h>
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

bool kn_tok_json_integer(const cJSON *v, int64_t lo, int64_t hi, int64_t *out) {
    if (!cJSON_IsNumber(v)) return false;
    double d = v->valuedouble;
    /* The range first (NaN fails it), so that the cast below is defined. */
    if (!(d >= (double)lo && d <= (double)hi) || d != (double)(int64_t)d) return false;
    *out = (int64_t)d;
    return true;
}

bool kn_tok_json_id(const cJSON *v, int32_t *id) {
    int64_t i;
    if (!kn_tok_json_integer(v, 0, INT32_MAX, &i)) return false;
    *id = (int32_t)i;
    return true;
}

/* Appends to path[0..len) (cap bytes) what names a member (.key) or an element ([i]). */
static size_t path_step(char *path, size_t len, size_t cap, const cJSON *parent, const cJSON *item, int index) {
    int k = cJSON_IsArray(parent) ? snprintf(path + len, cap - len, "[%d]", index)
                                  : snprintf(path + len, cap - len, len ? ".%s" : "%s", item->string);
    return k < 0 || (size_t)k >= cap - len ? cap - 1 : len + (size_t)k; /* a long path is cut short */
}

static kn_status check_utf8(const cJSON *j, char *path, size_t len, size_t cap, const char *file) {
    int index = 0;
    for (const cJSON *it = j->child; it; it = it->next, index++) {
        if (it->string && !kn_utf8_valid(it->string, strlen(it->string)))
            return kn_set_error(KN_ERR_IO, "%s: %s%skey number %d is not valid UTF-8 (byte %zu)", file, path,
                                len ? ": " : "", index, kn_utf8_valid_prefix(it->string, strlen(it->string)));
        size_t n = path_step(path, len, cap, j, it, index);
        kn_status st = KN_OK;
        if (cJSON_IsString(it) && !kn_utf8_valid(it->valuestring, strlen(it->valuestring)))
            st = kn_set_error(KN_ERR_IO, "%s: %s is not valid UTF-8 (byte %zu)", file, path,
                              kn_utf8_valid_prefix(it->valuestring, strlen(it->valuestring)));
        else if (cJSON_IsArray(it) || cJSON_IsObject(it))
            st = check_utf8(it, path, n, cap, file);
        path[len] = '\0';
        if (st != KN_OK) return st;
    }
    return KN_OK;
}

kn_status kn_tok_json_check_utf8(const cJSON *root, const char *file) {
    char path[512] = "";
    return check_utf8(root, path, 0, sizeof path, file);
}
