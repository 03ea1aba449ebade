/* Reading the small JSON files of a Hugging Face directory (the shard index). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/hf_internal.h"

cJSON *kn_hf_read_json(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return kn_error_null(KN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    char *text = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            char *grown = realloc(text, cap = cap ? 2 * cap : 65536);
            if (!grown) {
                free(text);
                fclose(f);
                return kn_error_null(KN_ERR_OOM, "%s: out of memory reading it", path);
            }
            text = grown;
        }
        size_t got = fread(text + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0) break;
    }
    bool failed = ferror(f);
    fclose(f);
    if (failed) {
        free(text);
        return kn_error_null(KN_ERR_IO, "%s: reading failed", path);
    }
    text[len] = '\0';
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (!root) {
        size_t at = end && end >= text ? (size_t)(end - text) : 0;
        int line = 1;
        for (size_t i = 0; i < at && i < len; i++) line += text[i] == '\n';
        free(text);
        return kn_error_null(KN_ERR_IO, "%s: not valid JSON (%s, line %d)", path, len ? "parse error" : "empty file", line);
    }
    free(text);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return kn_error_null(KN_ERR_IO, "%s: the JSON is not an object", path);
    }
    return root;
}

void kn_hf_dirname(const char *path, char *out, size_t n) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(out, n, ".");
    else if (slash == path) snprintf(out, n, "/");
    else snprintf(out, n, "%.*s", (int)(slash - path), path);
}
