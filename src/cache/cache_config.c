/* Where the cache lives, whether it may be trusted, whether it is on, and its bound: from the
 * environment, read once. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    /* Each parent in turn; EEXIST is another process (or a parent that was there). The
     * directory itself is writable by this user only, whatever the umask, else lookups would
     * refuse it. */
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char c = *p;
        *p = '\0';
        if (mkdir(path, c ? 0777 : 0755) != 0 && errno != EEXIST) return false;
        *p = c;
        if (!c) return true;
    }
}

/* Why the open directory fd may not hold code this process runs, or NULL. Whoever else can
 * write it can put an entry there, with a valid trailer, that every kiln process would load.
 * The sticky bit does not help: it stops others deleting our entries, not creating the names
 * we have yet to write. */
static const char *refusal(int fd, char *why, size_t size) {
    struct stat st;
    if (fstat(fd, &st) != 0)
        snprintf(why, size, "cannot be examined: %s", strerror(errno));
    else if (st.st_uid != geteuid())
        snprintf(why, size, "owned by uid %u, not by this user (uid %u)", (unsigned)st.st_uid, (unsigned)geteuid());
    else if (st.st_mode & (S_IWGRP | S_IWOTH))
        snprintf(why, size, "writable by %s (mode %04o)", st.st_mode & S_IWOTH ? "others" : "its group",
                 (unsigned)(st.st_mode & 07777));
    else
        return NULL;
    return why;
}

const char *kn_ccache_dir_refusal(char *why, size_t size) {
    int fd = open(kn_ccache_dir(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return NULL; /* absent (the first store makes it private), or nothing is loaded from it */
    const char *r = refusal(fd, why, size);
    close(fd);
    return r;
}

int kn_ccache_open_dir(bool *refused) {
    *refused = false;
    int fd = open(kn_ccache_dir(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char why[128];
    if (fd < 0 || !refusal(fd, why, sizeof why)) return fd;
    close(fd);
    *refused = true;
    static atomic_flag warned = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&warned))
        fprintf(stderr,
                "kiln: not using the compilation cache %s: it is %s, so others could put code there that kiln "
                "would run; compiling kernels without caching. Fix: `chmod go-w %s` (as its owner), or set "
                "KILN_CACHE_DIR to a directory only you can write.\n",
                kn_ccache_dir(), why, kn_ccache_dir());
    return -1;
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
