/* Stop strings over streamed text (stop_strings.h). Only text that cannot begin a stop string
 * leaves the matcher, so any occurrence starts inside the held text: searching it after each
 * push finds every stop string, however the tokens split it. */
#include "lm/stop_strings.h"

#include <kiln/kiln.h>
#include <stdlib.h>
#include <string.h>

struct lm_stop_matcher {
    char **stop;
    size_t *stop_len;
    int n;
    char *held, *out;   /* held-back text; the text handed out by the last call */
    size_t held_len, cap;
    bool stopped;
};

void lm_stop_matcher_free(lm_stop_matcher *m) {
    if (!m) return;
    for (int i = 0; m->stop && i < m->n; i++) free(m->stop[i]);
    free(m->stop);
    free(m->stop_len);
    free(m->held);
    free(m->out);
    free(m);
}

lm_stop_matcher *lm_stop_matcher_new(const char *const *stop, int n) {
    for (int i = 0; i < n; i++)
        if (!stop[i] || !stop[i][0]) return kn_set_error(KN_ERR_ARG, "stop string %d is empty", i), NULL;
    lm_stop_matcher *m = calloc(1, sizeof *m);
    bool ok = m && (m->stop = calloc((size_t)n + 1, sizeof *m->stop)) && (m->stop_len = calloc((size_t)n + 1, sizeof *m->stop_len));
    for (int i = 0; ok && i < n; i++, m->n = i) {
        ok = (m->stop[i] = strdup(stop[i])) != NULL;
        if (ok) m->stop_len[i] = strlen(stop[i]);
    }
    if (!ok) {
        lm_stop_matcher_free(m);
        return kn_set_error(KN_ERR_OOM, "stop strings: out of host memory"), NULL;
    }
    return m;
}

/* The length of the longest suffix of s[0..n) that is a proper prefix of a stop string. */
static size_t longest_partial(const lm_stop_matcher *m, const char *s, size_t n) {
    size_t best = 0;
    for (int i = 0; i < m->n; i++) {
        size_t j = m->stop_len[i] - 1 < n ? m->stop_len[i] - 1 : n;
        for (; j > best; j--)
            if (memcmp(s + n - j, m->stop[i], j) == 0) break;
        if (j > best) best = j;
    }
    return best;
}

/* Where the first stop string begins in s[0..n), or n. */
static size_t first_stop(const lm_stop_matcher *m, const char *s, size_t n) {
    size_t first = n;
    for (int i = 0; i < m->n; i++) {
        const char *hit = memmem(s, n, m->stop[i], m->stop_len[i]);
        if (hit && (size_t)(hit - s) < first) first = (size_t)(hit - s);
    }
    return first;
}

bool lm_stop_push(lm_stop_matcher *m, const char *text, size_t len, const char **out, size_t *out_len) {
    *out_len = 0;
    *out = "";
    if (m->stopped) return true;
    size_t need = m->held_len + len + 1;
    if (need > m->cap) {
        size_t cap = need * 2;
        char *held = realloc(m->held, cap), *o = held ? realloc(m->out, cap) : NULL;
        if (held) m->held = held;
        if (o) m->out = o;
        if (!held || !o) {
            *out = NULL;
            kn_set_error(KN_ERR_OOM, "stop strings: out of host memory");
            return false;
        }
        m->cap = cap;
    }
    memcpy(m->held + m->held_len, text, len);
    m->held_len += len;
    size_t stop_at = first_stop(m, m->held, m->held_len);
    m->stopped = stop_at < m->held_len;
    size_t emit = m->stopped ? stop_at : m->held_len - longest_partial(m, m->held, m->held_len);
    memcpy(m->out, m->held, emit);
    m->out[emit] = '\0';
    m->held_len = m->stopped ? 0 : m->held_len - emit;
    memmove(m->held, m->held + emit, m->held_len);
    *out = m->out;
    *out_len = emit;
    return m->stopped;
}

const char *lm_stop_flush(lm_stop_matcher *m, size_t *len) {
    *len = m->held_len;
    m->held_len = 0;
    return m->held ? m->held : "";
}

bool lm_stop_seen(const lm_stop_matcher *m) { return m->stopped; }
