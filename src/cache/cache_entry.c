/* Entries on disk: the payload, then a trailer that proves it whole. Written atomically
 * (kn_atomic_file: a temporary file, fsync, rename), verified on every lookup. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "cache/cache.h"
#include "cache/cache_internal.h"
#include "core/error.h"
#include "core/stats.h"
#include "kiln/io.h"

/* The trailer, little-endian: magic, payload length, XXH3-64 of the payload. It goes last
 * so that the payload starts the file: ELF loaders read only what the headers point at, so
 * a shared object with the trailer after it still loads with dlopen as it is. */
#define MAGIC "kncache1"
enum { TRAILER_BYTES = 24 };

static void put_le64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static bool entry_path(kn_ccache_key key, const char *ext, char *out, size_t size) {
    char hex[33];
    kn_ccache_key_hex(key, hex);
    int n = snprintf(out, size, "%s/%s%s", kn_ccache_dir(), hex, ext ? ext : "");
    return n > 0 && (size_t)n < size;
}

/* The whole file (malloc'd), or NULL. Read rather than mapped: a file truncated under a
 * mapping would raise SIGBUS. */
static unsigned char *read_all(const char *path, size_t *n) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat st;
    unsigned char *buf = NULL;
    if (fstat(fd, &st) == 0 && (buf = malloc((size_t)st.st_size + 1))) {
        size_t got = 0;
        for (ssize_t r; got < (size_t)st.st_size; got += (size_t)r)
            if ((r = read(fd, buf + got, (size_t)st.st_size - got)) <= 0) break;
        *n = got;
    }
    close(fd);
    return buf;
}

static bool entry_valid(const unsigned char *b, size_t n) {
    if (n < TRAILER_BYTES) return false;
    const unsigned char *t = b + n - TRAILER_BYTES;
    uint64_t length = get_le64(t + 8);
    return memcmp(t, MAGIC, 8) == 0 && length == n - TRAILER_BYTES && XXH3_64bits(b, length) == get_le64(t + 16);
}

bool kn_ccache_lookup(kn_ccache_key key, const char *ext, char *path_out, size_t size) {
    if (!kn_ccache_enabled() || !path_out || !entry_path(key, ext, path_out, size)) return false;
    size_t n = 0;
    unsigned char *b = read_all(path_out, &n);
    if (!b) return false;
    bool valid = entry_valid(b, n);
    free(b);
    if (!valid) {
        unlink(path_out);
        kn_stat_add(KN_STAT_CACHE_CORRUPT, 1);
        return false;
    }
    utimensat(AT_FDCWD, path_out, NULL, 0); /* recently used; a read-only cache just ages */
    return true;
}

kn_status kn_ccache_store(kn_ccache_key key, const char *ext, const void *payload, size_t bytes, char *path_out,
                          size_t size) {
    if (!payload && bytes) return kn_error(KN_ERR_NULL, "kiln cache: payload is NULL");
    if (path_out && size) *path_out = '\0';
    if (!kn_ccache_enabled()) return KN_OK;
    char path[PATH_MAX];
    if (!entry_path(key, ext, path, sizeof path))
        return kn_error(KN_ERR_ARG, "kiln cache: the entry's path under %s is too long", kn_ccache_dir());
    if (!kn_ccache_make_dir())
        return kn_error(KN_ERR_IO, "kiln cache: cannot create %s: %s", kn_ccache_dir(), strerror(errno));
    unsigned char trailer[TRAILER_BYTES];
    memcpy(trailer, MAGIC, 8);
    put_le64(trailer + 8, bytes);
    put_le64(trailer + 16, XXH3_64bits(payload, bytes));
    kn_atomic_file *f = kn_atomic_file_open(path);
    if (!f) return kn_last_status();
    FILE *s = kn_atomic_file_stream(f);
    if (bytes) fwrite(payload, 1, bytes, s); /* a short write sets the stream's error flag */
    fwrite(trailer, 1, sizeof trailer, s);
    kn_status st = kn_atomic_file_commit(f);
    if (st != KN_OK) return st;
    kn_ccache_evict(strrchr(path, '/') + 1);
    if (path_out && snprintf(path_out, size, "%s", path) >= (int)size)
        return kn_error(KN_ERR_ARG, "kiln cache: stored, but %zu bytes cannot hold its path", size);
    return KN_OK;
}
