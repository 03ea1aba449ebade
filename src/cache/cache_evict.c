/* The directory as a whole: its entries, the LRU bound, statistics and clearing. Other
 * processes add and delete files meanwhile, so a file that vanishes is simply skipped. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache.h"
#include "cache/cache_internal.h"
#include "core/error.h"

static bool hex_prefix(const char *name) {
    for (int i = 0; i < 32; i++)
        if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f'))) return false;
    return true;
}

bool kn_ccache_is_entry_name(const char *name) {
    return strlen(name) >= 32 && hex_prefix(name) && (name[32] == '\0' || name[32] == '.') &&
           !strstr(name, KN_CCACHE_TEMP_MARK);
}

bool kn_ccache_is_temp_name(const char *name) {
    return strlen(name) >= 32 && hex_prefix(name) && strstr(name, KN_CCACHE_TEMP_MARK);
}

typedef struct entry {
    char name[256];
    int64_t bytes;
    struct timespec mtime;
} entry;

typedef struct listing {
    int64_t count, bytes;    /* every entry */
    entry *items;            /* when evicting, those that could be listed (all, unless memory ran out) */
    int64_t n_items, cap;
} listing;

typedef enum scan_mode { SCAN_LIST, SCAN_EVICT, SCAN_CLEAR } scan_mode;

/* Lists the entries of d into out; evicting and clearing also delete stale temporary files,
 * and clearing deletes every entry instead of listing it. Returns the entries deleted. */
static int64_t scan(DIR *d, listing *out, scan_mode mode) {
    time_t now = time(NULL);
    int64_t deleted = 0;
    for (struct dirent *e; (e = readdir(d));) {
        bool is_entry = kn_ccache_is_entry_name(e->d_name);
        if (!is_entry && !kn_ccache_is_temp_name(e->d_name)) continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
        if (!is_entry) {
            if (mode != SCAN_LIST && now - st.st_mtime > KN_CCACHE_STALE_TEMP_SECONDS) unlinkat(dirfd(d), e->d_name, 0);
            continue;
        }
        if (mode == SCAN_CLEAR) {
            deleted += unlinkat(dirfd(d), e->d_name, 0) == 0;
            continue;
        }
        out->count++;
        out->bytes += st.st_size;
        if (mode == SCAN_LIST) continue;
        if (out->n_items == out->cap) {
            int64_t cap = out->cap ? 2 * out->cap : 64;
            entry *items = realloc(out->items, (size_t)cap * sizeof *items);
            if (!items) continue; /* left unlisted; the next eviction sees it */
            out->items = items;
            out->cap = cap;
        }
        if (strlen(e->d_name) >= sizeof out->items[0].name) continue;
        entry *it = &out->items[out->n_items++];
        strcpy(it->name, e->d_name);
        it->bytes = st.st_size;
        it->mtime = st.st_mtim;
    }
    return deleted;
}

static int older_first(const void *pa, const void *pb) {
    const entry *a = pa, *b = pb;
    if (a->mtime.tv_sec != b->mtime.tv_sec) return a->mtime.tv_sec < b->mtime.tv_sec ? -1 : 1;
    if (a->mtime.tv_nsec != b->mtime.tv_nsec) return a->mtime.tv_nsec < b->mtime.tv_nsec ? -1 : 1;
    return strcmp(a->name, b->name);
}

void kn_ccache_evict(const char *keep) {
    DIR *d = opendir(kn_ccache_dir());
    if (!d) return;
    listing l = {0};
    int64_t max = kn_ccache_max_bytes();
    scan(d, &l, SCAN_EVICT);
    if (l.bytes > max) {
        qsort(l.items, (size_t)l.n_items, sizeof *l.items, older_first);
        for (int64_t i = 0; i < l.n_items && l.bytes > max; i++) {
            if (keep && strcmp(l.items[i].name, keep) == 0) continue;
            /* ENOENT: another process evicted it first; it no longer counts either way. */
            if (unlinkat(dirfd(d), l.items[i].name, 0) == 0 || errno == ENOENT) l.bytes -= l.items[i].bytes;
        }
    }
    closedir(d);
    free(l.items);
}

kn_status kn_ccache_disk_stats_get(kn_ccache_disk_stats *out) {
    if (!out) return kn_error(KN_ERR_NULL, "kiln cache stats: out is NULL");
    *out = (kn_ccache_disk_stats){.max_bytes = kn_ccache_max_bytes()};
    DIR *d = opendir(kn_ccache_dir());
    if (!d) {
        /* A cache never written to has no directory yet: it is empty. */
        if (errno == ENOENT) return KN_OK;
        return kn_error(KN_ERR_IO, "kiln cache: cannot read %s: %s", kn_ccache_dir(), strerror(errno));
    }
    listing l = {0};
    scan(d, &l, SCAN_LIST);
    closedir(d);
    free(l.items);
    out->entries = l.count;
    out->bytes = l.bytes;
    return KN_OK;
}

int64_t kn_ccache_clear(void) {
    DIR *d = opendir(kn_ccache_dir());
    if (!d) {
        if (errno == ENOENT) return 0;
        kn_error(KN_ERR_IO, "kiln cache: cannot read %s: %s", kn_ccache_dir(), strerror(errno));
        return -1;
    }
    int64_t deleted = scan(d, NULL, SCAN_CLEAR);
    closedir(d);
    return deleted;
}
