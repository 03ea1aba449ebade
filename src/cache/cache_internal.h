/* What the cache's files share: entry names, the directory, the bound and eviction. */
#ifndef KILN_CACHE_CACHE_INTERNAL_H
#define KILN_CACHE_CACHE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

/* Temporary files of unfinished stores contain this (kn_atomic_file's naming). */
#define KN_CCACHE_TEMP_MARK ".tmp."
/* A temporary file this old belongs to a writer that died; younger ones may be in use. */
#define KN_CCACHE_STALE_TEMP_SECONDS 3600

/* An entry is "<32 hex digits><ext>"; a temporary file is an entry name with the mark in it.
 * Anything else in the directory is not the cache's and is never touched. */
bool kn_ccache_is_entry_name(const char *name);
bool kn_ccache_is_temp_name(const char *name);

/* Creates the cache directory with its parents; false (errno set) if it cannot. */
bool kn_ccache_make_dir(void);
/* The cache directory opened for openat, or -1: absent or unopenable (errno set), or refused
 * (*refused set; said once per process on stderr, naming the directory and the fix). */
int kn_ccache_open_dir(bool *refused);
int64_t kn_ccache_max_bytes(void);

/* Deletes least recently used entries (oldest mtime first) until the cache fits its bound,
 * never the entry named keep, and stale temporary files. */
void kn_ccache_evict(const char *keep);

#endif
