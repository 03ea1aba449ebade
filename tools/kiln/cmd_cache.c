/* `kiln cache path|stats|clear`: the compilation cache on disk (DESIGN.md, "The compilation
 * cache"). It uses the runtime's internal cache interface, which has no public face yet. */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "commands.h"
#include "kiln/kiln.h"

/* Prints the usage to f; returns the exit code for it (0 when asked for, 2 after an error). */
static int usage(FILE *f) {
    fprintf(f, "usage: kiln cache path | stats [--json] | clear\n"
               "  path          the cache directory ($KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln)\n"
               "  stats         entries, bytes, the bound ($KILN_CACHE_MAX_MB, default 1024; KILN_CACHE=0 turns\n"
               "                the cache off), and whether the directory is refused (writable by other users:\n"
               "                kiln then compiles without caching)\n"
               "  stats --json  the same as JSON [default: text]\n"
               "  clear         delete every entry\n");
    return f == stdout ? 0 : 2;
}

static int stats(bool json) {
    kn_ccache_disk_stats s;
    if (kn_ccache_disk_stats_get(&s) != KN_OK) {
        fprintf(stderr, "kiln cache: %s\n", kn_last_error());
        return 1;
    }
    char why[128];
    const char *refused = kn_ccache_dir_refusal(why, sizeof why);
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "directory", kn_ccache_dir());
        if (refused)
            cJSON_AddStringToObject(o, "refused", refused);
        else
            cJSON_AddNullToObject(o, "refused");
        cJSON_AddNumberToObject(o, "entries", (double)s.entries);
        cJSON_AddNumberToObject(o, "bytes", (double)s.bytes);
        cJSON_AddNumberToObject(o, "max_bytes", (double)s.max_bytes);
        cJSON_AddBoolToObject(o, "enabled", kn_ccache_enabled());
        char *text = cJSON_Print(o);
        printf("%s\n", text);
        free(text);
        cJSON_Delete(o);
        return 0;
    }
    printf("directory: %s%s\n", kn_ccache_dir(), kn_ccache_enabled() ? "" : " (disabled by KILN_CACHE=0)");
    printf("entries:   %lld\n", (long long)s.entries);
    printf("size:      %.1f MiB (%lld bytes)\n", (double)s.bytes / (1 << 20), (long long)s.bytes);
    printf("bound:     %.0f MiB\n", (double)s.max_bytes / (1 << 20));
    if (refused)
        printf("refused:   %s: kernels are compiled without caching; make it writable by you alone "
               "(chmod go-w), or set KILN_CACHE_DIR\n",
               refused);
    return 0;
}

int kiln_cmd_cache(int argc, char **argv) {
    if (kiln_wants_help(argc, argv)) return usage(stdout);
    const char *sub = argc > 1 ? argv[1] : "";
    if (strcmp(sub, "path") == 0 && argc == 2) {
        printf("%s\n", kn_ccache_dir());
        return 0;
    }
    if (strcmp(sub, "stats") == 0 && (argc == 2 || (argc == 3 && strcmp(argv[2], "--json") == 0)))
        return stats(argc == 3);
    if (strcmp(sub, "clear") == 0 && argc == 2) {
        int64_t n = kn_ccache_clear();
        if (n < 0) {
            fprintf(stderr, "kiln cache: %s\n", kn_last_error());
            return 1;
        }
        printf("removed %lld entries from %s\n", (long long)n, kn_ccache_dir());
        return 0;
    }
    bool known = strcmp(sub, "path") == 0 || strcmp(sub, "stats") == 0 || strcmp(sub, "clear") == 0;
    if (*sub) fprintf(stderr, "kiln cache: %s '%s'\n", known ? "bad arguments to" : "unknown subcommand", sub);
    return usage(stderr);
}
