/* The persistent compilation cache (DESIGN.md, "The compilation cache"): content-addressed
 * entries on disk, shared by fused and compiled mode and by every process on the machine.
 *
 * An entry is one file, `<dir>/<hex key><ext>`, holding the payload (for the CPU backend a
 * shared object, loadable with dlopen as it is) followed by a fixed trailer with a magic, the
 * payload length and a checksum. Entries are written to a temporary file and renamed, so a
 * reader never sees half an entry and processes compiling the same kernel at once leave one
 * entry. A corrupt entry is deleted and reported as absent (the caller rebuilds it). The
 * cache is bounded ($KILN_CACHE_MAX_MB, default 1024): storing evicts the least recently used
 * entries (a lookup hit touches the entry's mtime). */
#ifndef KILN_CACHE_CACHE_H
#define KILN_CACHE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/status.h"

/* A 128-bit content hash. */
typedef struct kn_ccache_key {
    uint64_t hi, lo;
} kn_ccache_key;

/* The key of an artifact: a hash over each part (the canonical kernel source or IR, the
 * backend, its architecture, the compiler and its flags) and kiln's version. */
kn_ccache_key kn_ccache_key_of(const char *const *parts, int n_parts);
/* 32 lowercase hex digits and a NUL. */
void kn_ccache_key_hex(kn_ccache_key key, char out[33]);

/* The cache directory: $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln.
 * Created (with parents) on first use by lookup/store. */
const char *kn_ccache_dir(void);
/* Turns the disk cache off for this process (KILN_CACHE=0 does the same); lookups miss and
 * stores do nothing. */
void kn_ccache_set_enabled(bool on);
bool kn_ccache_enabled(void);
/* Sets this process's bound in bytes, overriding $KILN_CACHE_MAX_MB (whose unit is too coarse
 * for tests); 0 or less goes back to the environment's. */
void kn_ccache_set_max_bytes(int64_t bytes);

/* Looks an entry up on disk. On a valid entry writes its path to path_out (size bytes) and
 * returns true; the file is the payload followed by the trailer. Absent, unreadable or corrupt
 * (then deleted, and counted in kn_stats.cache_corrupt) gives false. */
bool kn_ccache_lookup(kn_ccache_key key, const char *ext, char *path_out, size_t size);
/* Stores a payload atomically under key (replacing any entry), then evicts least recently
 * used entries until the cache fits its bound. On success writes the entry's path. */
kn_status kn_ccache_store(kn_ccache_key key, const char *ext, const void *payload, size_t bytes, char *path_out,
                          size_t size);

typedef struct kn_ccache_disk_stats {
    int64_t entries;
    int64_t bytes;
    int64_t max_bytes;
} kn_ccache_disk_stats;
kn_status kn_ccache_disk_stats_get(kn_ccache_disk_stats *out);
/* Deletes every entry (and stale temporary files); returns the count deleted or -1. */
int64_t kn_ccache_clear(void);

#endif
