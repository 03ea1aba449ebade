/* Where the cache lives, whether it is on, and its bound: from the environment, read once. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cache/cache.h"
#include "cache/cache_internal.h"

#define DEFAULT_MAX_MB 1024

static char dir_path[PATH_MAX];
static pthread_once_t dir_once = PTHREAD_ONCE_INIT;

static void resolve_dir(void) {
    const char *dir = getenv("KILN_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (dir && *dir)
        snprintf(dir_path, sizeof dir_path, "%s", dir);
    else if (xdg && *xdg)
        snprintf(dir_path, sizeof dir_path, "%s/kiln", xdg);
    else
        snprintf(dir_path, sizeof dir_path, "%s/.cache/kiln", home && *home ? home : "/tmp");
    for (size_t n = strlen(dir_path); n > 1 && dir_path[n - 1] == '/'; n--) dir_path[n - 1] = '\0';
}

const char *kn_ccache_dir(void) {
    pthread_once(&dir_once, resolve_dir);
    return dir_path;
}

bool kn_ccache_make_dir(void) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", kn_ccache_dir());
    struct stat st;
    if (stat(path, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) errno = ENOTDIR;
        return S_ISDIR(st.st_mode);
    }
    /* Each parent in turn; EEXIST is another process (or a parent that was there). */
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char c = *p;
        *p = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST) return false;
        *p = c;
        if (!c) return true;
    }
}

/* -1: not yet read from KILN_CACHE. */
static atomic_int enabled = -1;

void kn_ccache_set_enabled(bool on) { atomic_store(&enabled, on); }

bool kn_ccache_enabled(void) {
    int on = atomic_load(&enabled);
    if (on < 0) {
        const char *env = getenv("KILN_CACHE");
        on = !(env && strcmp(env, "0") == 0);
        atomic_store(&enabled, on);
    }
    return on;
}

/* -1: not yet read from KILN_CACHE_MAX_MB. */
static _Atomic int64_t max_bytes = -1;

void kn_ccache_set_max_bytes(int64_t bytes) { atomic_store(&max_bytes, bytes > 0 ? bytes : -1); }

int64_t kn_ccache_max_bytes(void) {
    int64_t bytes = atomic_load(&max_bytes);
    if (bytes < 0) {
        const char *env = getenv("KILN_CACHE_MAX_MB");
        char *end = NULL;
        long long mb = env ? strtoll(env, &end, 10) : 0;
        if (!env || end == env || *end || mb < 1 || mb > (INT64_MAX >> 20)) mb = DEFAULT_MAX_MB;
        bytes = (int64_t)mb << 20;
        atomic_store(&max_bytes, bytes);
    }
    return bytes;
}
