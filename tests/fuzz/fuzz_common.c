/* The fuzz targets' shared helpers (fuzz.h). */
#define _GNU_SOURCE /* mkdtemp, nftw */
#include "fuzz.h"

#include <cjson/cJSON.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_FILES 8

static char dir[4096];
static char paths[MAX_FILES][4096 + 64];
static int n_paths;

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)st, (void)type, (void)ftw;
    remove(path);
    return 0;
}

/* The directory and whatever the target or the loaders wrote in it. */
static void remove_dir(void) { nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

const char *fuzz_dir(void) {
    if (dir[0]) return dir;
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/kiln-fuzz-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("fuzz: cannot make a temporary directory");
        abort();
    }
    atexit(remove_dir);
    return dir;
}

const char *fuzz_write(const char *name, const void *data, size_t size) {
    char path[sizeof paths[0]];
    snprintf(path, sizeof path, "%s/%s", fuzz_dir(), name);
    int k = 0;
    while (k < n_paths && strcmp(paths[k], path) != 0) k++;
    if (k == n_paths) {
        if (n_paths == MAX_FILES) fuzz_require(false, "fuzz_write: more than %d files", MAX_FILES);
        strcpy(paths[n_paths++], path);
    }
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
        perror(path);
        abort();
    }
    return paths[k];
}

bool fuzz_failed(bool failed, const char *call) {
    if (!failed) return false;
    kn_status st = kn_last_status();
    const char *msg = kn_last_error();
    /* KN_ERR_INTERNAL is "a bug in kiln" (status.h), never the answer to bad input */
    fuzz_require(st != KN_OK && st < KN_ERR_INTERNAL && msg && msg[0],
                 "%s failed with status %d (%s) and message \"%s\"", call, (int)st, kn_status_name(st),
                 msg ? msg : "(NULL)");
    return true;
}

bool fuzz_is_json(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    fuzz_require(text != NULL, "out of memory");
    memcpy(text, data, size);
    text[size] = '\0';
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, size + 1, &end, false);
    size_t at = root ? (size_t)(end - text) : size + 1;
    while (at < size && (text[at] == ' ' || text[at] == '\t' || text[at] == '\n' || text[at] == '\r')) at++;
    cJSON_Delete(root);
    free(text);
    return at == size;
}

const cJSON *fuzz_json_member(const cJSON *object, const char *key) {
    const cJSON *found = NULL;
    for (const cJSON *c = cJSON_IsObject(object) ? object->child : NULL; c; c = c->next)
        if (strcmp(c->string, key) == 0) found = c;
    return found;
}

void fuzz_require(bool cond, const char *fmt, ...) {
    if (cond) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("fuzz: contract broken: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}
