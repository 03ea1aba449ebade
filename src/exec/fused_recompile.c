/* Why fused mode compiled: each new kernel variant of a call site (the same chain of ops)
 * is counted with the first part of its key that changed. A site with more than a few
 * variants is a recompile storm: kiln says once which part keeps changing, and
 * KILN_RECOMPILE=error makes it an error. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/hash.h"
#include "core/stats.h"
#include "exec/fused.h"

enum { STORM_VARIANTS = 4 }; /* more variants than this per call site is a storm */

typedef struct site {
    char *signature;
    kn_fused_ir last;
    int variants;
    bool warned;
    struct site *next;
} site;

enum { BUCKETS = 1024 };
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static site *sites[BUCKETS];
static kn_fused_memo variants; /* every variant seen, by packed IR */

static unsigned bucket(const char *s) { return (unsigned)(kn_hash_bytes(KN_HASH_SEED, s, strlen(s)) % BUCKETS); }

bool kn_recompile_is_error(void) {
    const char *s = getenv("KILN_RECOMPILE");
    return s && strcmp(s, "error") == 0;
}

/* Records ir's variant as seen; false if it was already (or there is no memory to record it:
 * no false storms). */
static bool first_sight(const kn_fused_ir *ir) {
    if (kn_fused_memo_get(&variants, ir)) return false;
    return kn_fused_memo_put(&variants, ir, (void *)&variants);
}

static site *site_for(const char *signature) {
    unsigned b = bucket(signature);
    for (site *s = sites[b]; s; s = s->next)
        if (strcmp(s->signature, signature) == 0) return s;
    site *s = calloc(1, sizeof *s);
    if (!s || !(s->signature = strdup(signature))) {
        free(s);
        return NULL;
    }
    s->next = sites[b];
    sites[b] = s;
    return s;
}

kn_status kn_fused_note_variant(const kn_fused_ir *ir) {
    char signature[2048];
    pthread_mutex_lock(&lock);
    kn_status st = KN_OK;
    if (first_sight(ir)) {
        kn_fused_signature(ir, signature, sizeof signature);
        site *s = site_for(signature);
        if (s) {
            if (s->variants) {
                kn_recompile_reason why = kn_fused_diff(&s->last, ir);
                kn_stat_recompile(why);
                if (s->variants >= STORM_VARIANTS) {
                    char what[128];
                    snprintf(what, sizeof what, "%s", kn_recompile_reason_name(why));
                    if (kn_recompile_is_error())
                        st = kn_error(KN_ERR_UNSUPPORTED,
                                      "fused: recompile storm (KILN_RECOMPILE=error): the chain [%s] compiled %d variants; "
                                      "the last changed its %s",
                                      signature, s->variants + 1, what);
                    else if (!s->warned)
                        fprintf(stderr,
                                "kiln: fused kernel [%s] has compiled %d variants; the last changed its %s "
                                "(sizes are kernel arguments, so this is usually a changing dtype, rank or "
                                "broadcast; KILN_RECOMPILE=error stops here)\n",
                                signature, s->variants + 1, what);
                    s->warned = true;
                }
            }
            s->last = *ir;
            s->variants++;
        }
    }
    pthread_mutex_unlock(&lock);
    return st;
}
