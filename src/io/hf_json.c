/* The one reader of a Hugging Face directory's JSON files (config.json, generation_config.json,
 * tokenizer.json, the shard index): as strict as Python's json module, which transformers
 * reads them with, and bounded in size. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "core/strmap.h"
#include "io/hf_internal.h"
#include "kiln/hf.h"

/* The whole file into a NUL-terminated buffer of *len bytes; NULL with an error naming the
 * file when it cannot be read or holds more than max_bytes. */
static char *read_capped(const char *path, size_t max_bytes, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return kn_error_null(KN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    char *text = NULL;
    size_t n = 0, cap = 0;
    bool too_big = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size > max_bytes;
    bool no_memory = false;
    while (!too_big) {
        if (n == cap) { /* grows up to one byte past the cap, which tells a file that is too big */
            size_t grow = cap ? 2 * cap : 65536;
            if (grow > max_bytes + 1) grow = max_bytes + 1;
            char *grown = realloc(text, grow + 1);
            if (!grown) {
                no_memory = true;
                break;
            }
            text = grown, cap = grow;
        }
        size_t got = fread(text + n, 1, cap - n, f);
        n += got;
        too_big = n > max_bytes;
        if (got == 0) break;
    }
    bool failed = ferror(f);
    fclose(f);
    if (too_big || failed || no_memory) {
        free(text);
        if (too_big)
            return kn_error_null(KN_ERR_IO, "%s: larger than %zu MiB, kiln's limit for this file", path, max_bytes >> 20);
        return kn_error_null(failed ? KN_ERR_IO : KN_ERR_OOM, "%s: %s", path,
                             failed ? "reading failed" : "out of memory reading it");
    }
    text[n] = '\0';
    *len = n;
    return text;
}

static int line_at(const char *text, size_t at) {
    int line = 1;
    for (size_t i = 0; i < at; i++) line += text[i] == '\n';
    return line;
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Python's json keeps the last value of a repeated key, at the key's first place: every
 * object of the tree is made so (cJSON keeps all of them, and lookups find the first). */
static bool last_value_wins(cJSON *node) {
    if (!cJSON_IsObject(node)) {
        for (cJSON *c = cJSON_IsArray(node) ? node->child : NULL; c; c = c->next)
            if (!last_value_wins(c)) return false;
        return true;
    }
    int n = cJSON_GetArraySize(node);
    cJSON **first = malloc(sizeof *first * (size_t)(n ? n : 1));
    kn_strmap seen = {0};
    bool ok = first != NULL;
    int kept = 0;
    for (cJSON *c = node->child, *next; ok && c; c = next) {
        next = c->next;
        int32_t at = kn_strmap_get(&seen, c->string, strlen(c->string));
        if (at < 0) {
            first[kept] = c;
            ok = kn_strmap_put(&seen, c->string, strlen(c->string), kept++);
        } else { /* the map takes c's key before the replacement frees the old one */
            ok = kn_strmap_put(&seen, c->string, strlen(c->string), at);
            cJSON_ReplaceItemViaPointer(node, first[at], cJSON_DetachItemViaPointer(node, c));
            first[at] = c;
        }
    }
    kn_strmap_free(&seen);
    free(first);
    for (cJSON *c = node->child; ok && c; c = c->next) ok = last_value_wins(c);
    return ok;
}

cJSON *kn_hf_read_json(const char *path, size_t max_bytes) {
    if (!path) return kn_error_null(KN_ERR_NULL, "hf_read_json: path is NULL");
    size_t len = 0;
    char *text = read_capped(path, max_bytes, &len);
    if (!text) return NULL;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
    size_t at = end && end >= text ? (size_t)(end - text) : 0;
    if (!root) {
        kn_error(KN_ERR_IO, "%s: not valid JSON (%s, line %d)", path, len ? "parse error" : "empty file",
                 line_at(text, at < len ? at : len));
        free(text);
        return NULL;
    }
    while (at < len && is_space(text[at])) at++;
    if (at < len) {
        kn_error(KN_ERR_IO, "%s: not valid JSON (bytes after the value, line %d)", path, line_at(text, at));
        free(text);
        cJSON_Delete(root);
        return NULL;
    }
    free(text);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return kn_error_null(KN_ERR_IO, "%s: the JSON is not an object", path);
    }
    if (!last_value_wins(root)) {
        cJSON_Delete(root);
        return kn_error_null(KN_ERR_OOM, "%s: out of memory reading it", path);
    }
    return root;
}

void kn_hf_dirname(const char *path, char *out, size_t n) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(out, n, ".");
    else if (slash == path) snprintf(out, n, "/");
    else snprintf(out, n, "%.*s", (int)(slash - path), path);
}
