/* The persistent compilation cache (DESIGN.md, "The compilation cache"): content-addressed
 * entries on disk, shared by fused and compiled mode and by every process on the machine.
 *
 * An entry is one file, `<dir>/<hex key><ext>`, holding the payload (for the CPU backend a
 * shared object) followed by a fixed trailer with a magic, the payload length, the entry's key
 * and a checksum. Entries are written to a temporary file and renamed, so a reader never sees
 * half an entry and processes compiling the same kernel at once leave one entry. Entries are
 * code that every kiln process runs, so a reader accepts only a regular file, owned by this
 * user and not writable by others, whose trailer holds its own key (an entry renamed or
 * copied to another key's name is not accepted), in a directory only this user can write;
 * anything else is deleted and reported as absent (the caller rebuilds it). The cache is
 * bounded ($KILN_CACHE_MAX_MB, default 1024): storing evicts the least recently used entries
 * (a lookup hit touches the entry's mtime). */
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
 * Created (with parents; itself writable by this user only) by the first store. */
const char *kn_ccache_dir(void);
/* Turns the disk cache off for this process (KILN_CACHE=0 does the same); lookups miss and
 * stores do nothing. */
void kn_ccache_set_enabled(bool on);
bool kn_ccache_enabled(void);
/* Sets this process's bound in bytes, overriding $KILN_CACHE_MAX_MB (whose unit is too coarse
 * for tests); 0 or less goes back to the environment's. */
void kn_ccache_set_max_bytes(int64_t bytes);

/* The trailer after each payload. */
enum { KN_CCACHE_TRAILER_BYTES = 40 };

/* Reads the entry of key. A valid one gives true, its payload in *payload (malloc'd, the
 * caller frees it) and its length in *bytes. Anything else at the entry's path (a damaged
 * entry, another key's, a symlink, a FIFO, a directory, a file others can write) is deleted
 * and counted in kn_stats.cache_corrupt; that, an absent or unreadable entry and a refused
 * directory (kn_ccache_dir_refusal) give false. */
bool kn_ccache_read(kn_ccache_key key, const char *ext, void **payload, size_t *bytes);
/* Deletes the entry of key and counts it in kn_stats.cache_corrupt: for a caller whose valid
 * entry turned out unusable (a shared object that does not load, or lacks its symbols). */
void kn_ccache_discard(kn_ccache_key key, const char *ext);
/* Stores a payload atomically under key (replacing any entry), then evicts least recently
 * used entries until the cache fits its bound. A refused directory stores nothing (and
 * succeeds: the cache is off for this process); an error says why the entry was not written. */
kn_status kn_ccache_store(kn_ccache_key key, const char *ext, const void *payload, size_t bytes);

/* NULL when the cache directory may hold code this process runs (a directory owned by this
 * user that neither its group nor others can write; or absent or unopenable, so that nothing
 * is loaded from it), else why not ("writable by others (mode 0777)"), in why (size bytes). A refused directory is not read or written: the
 * first lookup or store that meets it says so once per process on stderr, with the fix. */
const char *kn_ccache_dir_refusal(char *why, size_t size);

typedef struct kn_ccache_disk_stats {
    int64_t entries;
    int64_t bytes;
    int64_t max_bytes;
} kn_ccache_disk_stats;
kn_status kn_ccache_disk_stats_get(kn_ccache_disk_stats *out);
/* Deletes every entry (and stale temporary files); returns the count deleted or -1. */
int64_t kn_ccache_clear(void);

#endif
