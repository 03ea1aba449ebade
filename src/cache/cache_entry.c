/* Entries on disk: the payload, then a trailer that proves it whole and names its key.
 * Written atomically (kn_atomic_file: a temporary file, fsync, rename), verified on every
 * read: entries are code that every kiln process runs. */
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
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/file_read.h"
#include "core/stats.h"

/* The trailer, little-endian: magic, payload length, the key (hi, lo), then XXH3-64 of every
 * byte before it. It goes last so that the payload starts the file. The key binds the entry to
 * its name: a file renamed or copied over another key's entry is not that key's. */
#define MAGIC "kncache2"
_Static_assert(KN_CCACHE_TRAILER_BYTES == 40, "magic, length, key and checksum");

static void put_le64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static bool entry_name(kn_ccache_key key, const char *ext, char *out, size_t size) {
    char hex[33];
    kn_ccache_key_hex(key, hex);
    int n = snprintf(out, size, "%s%s", hex, ext ? ext : "");
    return n > 0 && (size_t)n < size;
}

static bool entry_valid(const unsigned char *b, size_t n, kn_ccache_key key) {
    if (n < KN_CCACHE_TRAILER_BYTES) return false;
    const unsigned char *t = b + n - KN_CCACHE_TRAILER_BYTES;
    return memcmp(t, MAGIC, 8) == 0 && get_le64(t + 8) == n - KN_CCACHE_TRAILER_BYTES && get_le64(t + 16) == key.hi &&
           get_le64(t + 24) == key.lo && XXH3_64bits(b, n - 8) == get_le64(t + 32);
}

/* Whatever is at name goes: a file, symlink, FIFO or device, or an empty directory (a full one
 * stays, and the store that would replace it reports the failure). */
static void remove_bad(int dir, const char *name) {
    if (unlinkat(dir, name, 0) != 0) unlinkat(dir, name, AT_REMOVEDIR);
    kn_stat_add(KN_STAT_CACHE_CORRUPT, 1);
}

bool kn_ccache_read(kn_ccache_key key, const char *ext, void **payload, size_t *bytes) {
    *payload = NULL;
    *bytes = 0;
    char name[NAME_MAX + 1];
    bool refused;
    int dir = kn_ccache_enabled() && entry_name(key, ext, name, sizeof name) ? kn_ccache_open_dir(&refused) : -1;
    if (dir < 0) return false;
    size_t n = 0;
    struct stat st;
    unsigned char *b = kn_read_regular_file(dir, name, &n, &st);
    /* Absent, or unreadable now (a short read; out of memory): a miss, and the store after the
     * compile replaces it. A symlink or anything not a regular file is not an entry. */
    bool bad = b ? st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) || !entry_valid(b, n, key)
                 : errno == ELOOP || errno == EINVAL;
    if (bad) {
        remove_bad(dir, name);
    } else if (b) {
        utimensat(dir, name, NULL, AT_SYMLINK_NOFOLLOW); /* recently used; a read-only cache just ages */
        *payload = b;
        *bytes = n - KN_CCACHE_TRAILER_BYTES;
        b = NULL;
    }
    free(b);
    close(dir);
    return *payload != NULL;
}

void kn_ccache_discard(kn_ccache_key key, const char *ext) {
    char name[NAME_MAX + 1];
    bool refused;
    int dir = entry_name(key, ext, name, sizeof name) ? kn_ccache_open_dir(&refused) : -1;
    if (dir < 0) return;
    remove_bad(dir, name);
    close(dir);
}

kn_status kn_ccache_store(kn_ccache_key key, const char *ext, const void *payload, size_t bytes) {
    if (!payload && bytes) return kn_error(KN_ERR_NULL, "kiln cache: payload is NULL");
    if (!kn_ccache_enabled()) return KN_OK;
    char name[NAME_MAX + 1], path[PATH_MAX];
    if (!entry_name(key, ext, name, sizeof name) ||
        snprintf(path, sizeof path, "%s/%s", kn_ccache_dir(), name) >= (int)sizeof path)
        return kn_error(KN_ERR_ARG, "kiln cache: the entry's path under %s is too long", kn_ccache_dir());
    if (!kn_ccache_make_dir())
        return kn_error(KN_ERR_IO, "kiln cache: cannot create %s: %s", kn_ccache_dir(), strerror(errno));
    bool refused;
    int dir = kn_ccache_open_dir(&refused);
    if (dir < 0)
        return refused ? KN_OK : kn_error(KN_ERR_IO, "kiln cache: cannot open %s: %s", kn_ccache_dir(), strerror(errno));
    close(dir);
    unsigned char trailer[KN_CCACHE_TRAILER_BYTES];
    memcpy(trailer, MAGIC, 8);
    put_le64(trailer + 8, bytes);
    put_le64(trailer + 16, key.hi);
    put_le64(trailer + 24, key.lo);
    XXH3_state_t *h = XXH3_createState();
    if (!h) return kn_error(KN_ERR_OOM, "kiln cache: out of memory");
    XXH3_64bits_reset(h);
    XXH3_64bits_update(h, payload, bytes);
    XXH3_64bits_update(h, trailer, 32);
    put_le64(trailer + 32, XXH3_64bits_digest(h));
    XXH3_freeState(h);
    kn_atomic_file *f = kn_atomic_file_open(path);
    if (!f) return kn_last_status();
    FILE *s = kn_atomic_file_stream(f);
    /* Reads refuse entries others can write: drop the group/other write bits a umask such as
     * 002 leaves. */
    struct stat fs;
    if (fstat(kn_atomic_file_fd(f), &fs) == 0) fchmod(kn_atomic_file_fd(f), fs.st_mode & 0755);
    if (bytes) fwrite(payload, 1, bytes, s); /* a short write sets the stream's error flag */
    fwrite(trailer, 1, sizeof trailer, s);
    kn_status st = kn_atomic_file_commit(f);
    if (st != KN_OK) return st;
    kn_ccache_evict(name);
    return KN_OK;
}
