/* config_reader.h: typed, range-checked fields of a model's JSON config files. */
#include "lm/config_reader.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool cfg_open(cfg_reader *r, const char *path) {
    *r = (cfg_reader){.path = path, .root = kn_hf_read_json(path, KN_HF_CONFIG_MAX_BYTES)};
    r->ok = r->root != NULL;
    return r->ok;
}

void cfg_close(cfg_reader *r) {
    cJSON_Delete(r->root);
    r->root = NULL;
}

bool cfg_fail(cfg_reader *r, const char *key, const char *fmt, ...) {
    if (r->ok) {
        char problem[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(problem, sizeof problem, fmt, ap);
        va_end(ap);
        kn_set_error(KN_ERR_IO, "%s: \"%s%s%s\" %s", r->path, r->within ? r->within : "", r->within ? "." : "", key,
                     problem);
    }
    r->ok = false;
    return false;
}

const cJSON *cfg_item(const cJSON *obj, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

/* The value as short text for a message: numbers in full (1e10 as 10000000000), others as JSON. */
static const char *shown(const cJSON *v, char *buf, size_t n) {
    if (cJSON_IsNumber(v)) { /* the shortest text that reads back as the value */
        snprintf(buf, n, "%.15g", v->valuedouble);
        if (strtod(buf, NULL) != v->valuedouble) snprintf(buf, n, "%.17g", v->valuedouble);
        return buf;
    }
    char *text = cJSON_PrintUnformatted(v);
    snprintf(buf, n, "%.40s%s", text ? text : "?", text && strlen(text) > 40 ? "..." : "");
    free(text);
    return buf;
}

bool cfg_int_value(cfg_reader *r, const cJSON *v, const char *key, int64_t lo, int64_t hi, int64_t *out) {
    if (!r->ok) return false;
    /* a double converts to int64 only inside (-2^63, 2^63): the range test comes first */
    double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!(d >= (double)lo && d <= (double)hi && d >= -0x1p63 && d < 0x1p63) || d != floor(d)) {
        char text[64];
        return cfg_fail(r, key, "is %s; it must be an integer in [%" PRId64 ", %" PRId64 "]", shown(v, text, sizeof text),
                        lo, hi);
    }
    *out = (int64_t)d;
    return true;
}

int64_t cfg_int(cfg_reader *r, const cJSON *obj, const char *key, int64_t lo, int64_t hi, int64_t def) {
    const cJSON *v = cfg_item(obj, key);
    if (!v && def == CFG_REQUIRED) return cfg_fail(r, key, "is missing"), lo;
    int64_t out = def;
    if (v && !cfg_int_value(r, v, key, lo, hi, &out)) return def == CFG_REQUIRED ? lo : def;
    return out;
}

double cfg_num(cfg_reader *r, const cJSON *obj, const char *key, double lo, double hi, double def) {
    const cJSON *v = cfg_item(obj, key);
    if (!v || !r->ok) return def;
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi)) {
        char text[64];
        return cfg_fail(r, key, "is %s; it must be a number in [%g, %g]", shown(v, text, sizeof text), lo, hi), def;
    }
    return v->valuedouble;
}

double cfg_positive(cfg_reader *r, const cJSON *obj, const char *key, double def) {
    const cJSON *v = cfg_item(obj, key);
    if (!v || !r->ok) return def;
    if (!cJSON_IsNumber(v) || !(v->valuedouble > 0 && isfinite(v->valuedouble))) {
        char text[64];
        return cfg_fail(r, key, "is %s; it must be a finite number > 0", shown(v, text, sizeof text)), def;
    }
    return v->valuedouble;
}

bool cfg_bool(cfg_reader *r, const cJSON *obj, const char *key, bool def) {
    const cJSON *v = cfg_item(obj, key);
    if (!v || !r->ok) return def;
    if (!cJSON_IsBool(v)) {
        char text[64];
        return cfg_fail(r, key, "is %s; it must be true or false", shown(v, text, sizeof text)), def;
    }
    return cJSON_IsTrue(v);
}

const char *cfg_string(cfg_reader *r, const cJSON *obj, const char *key) {
    const cJSON *v = cfg_item(obj, key);
    if (!v || !r->ok) return NULL;
    if (!cJSON_IsString(v)) {
        char text[64];
        return cfg_fail(r, key, "is %s; it must be a string", shown(v, text, sizeof text)), NULL;
    }
    return v->valuestring;
}
