/* The BPE model: vocabulary, ranked merges, and the merge loop (a heap of candidate pairs over
 * a linked list of symbols, so long words stay fast), with byte fallback, unknown-token fusing,
 * ignore_merges, and a cache of the words seen in one encode call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

typedef struct merge_slot {
    uint64_t pair; /* left id << 32 | right id; EMPTY_PAIR marks a free slot */
    int32_t rank, merged;
} merge_slot;
#define EMPTY_PAIR UINT64_MAX

struct kn_bpe {
    char **names;        /* every vocabulary key, in the file's order */
    int32_t *name_ids;   /* names[i]'s id; the keys of by_id point here */
    size_t n_names;
    kn_strmap vocab; /* name -> id (keys are names[]) */
    kn_strmap by_id; /* id -> index in names of its first name, the id's token */
    int64_t n_ids;       /* the largest id + 1 */
    merge_slot *merges;
    size_t merges_cap;
    int32_t unk_id;        /* -1: no unk_token */
    int32_t byte_ids[256]; /* <0xNN> tokens, -1 where absent */
    bool byte_fallback, fuse_unk, ignore_merges;
    char *prefix, *suffix; /* continuing_subword_prefix, end_of_word_suffix; NULL if none */
};

static uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t)(uint32_t)a << 32 | (uint32_t)b; }

static merge_slot *merge_find(const kn_bpe *b, uint64_t key) {
    size_t mask = b->merges_cap - 1;
    for (size_t i = (key * 0x9E3779B97F4A7C15ull) >> 20 & mask;; i = (i + 1) & mask)
        if (b->merges[i].pair == key || b->merges[i].pair == EMPTY_PAIR) return &b->merges[i];
}

void kn_bpe_free(kn_bpe *b) {
    if (!b) return;
    for (size_t i = 0; i < b->n_names; i++) free(b->names[i]);
    free(b->names);
    free(b->name_ids);
    kn_strmap_free(&b->vocab);
    kn_strmap_free(&b->by_id);
    free(b->merges);
    free(b->prefix);
    free(b->suffix);
    free(b);
}

int64_t kn_bpe_vocab_size(const kn_bpe *b) { return b->n_ids; }

int32_t kn_bpe_token_to_id(const kn_bpe *b, const char *s, size_t n) { return kn_strmap_get(&b->vocab, s, n); }

const char *kn_bpe_id_to_token(const kn_bpe *b, int32_t id) {
    int32_t at = kn_tok_idmap_get(&b->by_id, id);
    return at >= 0 ? b->names[at] : NULL;
}

/* The vocabulary: memory in proportion to its entries, whatever its ids (a file with one token
 * of id 2^31 - 1 is small). */
static kn_status load_vocab(kn_bpe *b, const cJSON *vocab, const char *file) {
    if (!cJSON_IsObject(vocab)) return kn_set_error(KN_ERR_IO, "%s: model.vocab: missing or not an object", file);
    size_t n = (size_t)cJSON_GetArraySize(vocab);
    b->names = calloc(n + 1, sizeof *b->names);
    b->name_ids = calloc(n + 1, sizeof *b->name_ids);
    if (!b->names || !b->name_ids) return kn_set_error(KN_ERR_OOM, "%s: out of memory for the vocabulary", file);
    const cJSON *it;
    cJSON_ArrayForEach(it, vocab) {
        int32_t id;
        if (!kn_tok_json_id(it, &id))
            return kn_set_error(KN_ERR_IO, "%s: model.vocab[\"%s\"]: id is not an integer in [0, %d]", file, it->string,
                                INT32_MAX);
        size_t i = b->n_names;
        if (!(b->names[i] = kn_tok_strdup(it->string))) return KN_ERR_OOM;
        b->name_ids[i] = id;
        b->n_names++;
        if (id >= b->n_ids) b->n_ids = (int64_t)id + 1;
        /* A second name for an id maps to the id; the first keeps the id's name. */
        bool ok = kn_strmap_put(&b->vocab, b->names[i], strlen(b->names[i]), id) &&
                  (kn_tok_idmap_get(&b->by_id, id) >= 0 || kn_tok_idmap_put(&b->by_id, &b->name_ids[i], (int32_t)i));
        if (!ok) return KN_ERR_OOM;
    }
    for (int v = 0; v < 256; v++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", v);
        b->byte_ids[v] = kn_strmap_get(&b->vocab, name, 6);
    }
    return KN_OK;
}

/* One merge as its two token strings: ["a", "b"] (current files) or "a b" (older files). */
static kn_status merge_parts(const cJSON *m, size_t i, const char *file, char **a, char **b) {
    if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(cJSON_GetArrayItem(m, 0)) &&
        cJSON_IsString(cJSON_GetArrayItem(m, 1))) {
        *a = kn_tok_strdup(cJSON_GetArrayItem(m, 0)->valuestring);
        *b = kn_tok_strdup(cJSON_GetArrayItem(m, 1)->valuestring);
    } else if (cJSON_IsString(m) && strchr(m->valuestring, ' ') && !strchr(strchr(m->valuestring, ' ') + 1, ' ')) {
        *a = kn_tok_strdup(m->valuestring);
        if (*a) {
            char *space = strchr(*a, ' ');
            *space = '\0';
            *b = kn_tok_strdup(space + 1);
        }
    } else {
        return kn_set_error(KN_ERR_IO, "%s: model.merges[%zu]: not a pair of tokens", file, i);
    }
    return *a && *b ? KN_OK : KN_ERR_OOM;
}

static kn_status load_merges(kn_bpe *b, const cJSON *merges, const char *file) {
    if (!cJSON_IsArray(merges)) return kn_set_error(KN_ERR_IO, "%s: model.merges: missing or not a list", file);
    size_t n = (size_t)cJSON_GetArraySize(merges);
    b->merges_cap = 16;
    while (b->merges_cap < 2 * n) b->merges_cap *= 2;
    b->merges = malloc(b->merges_cap * sizeof *b->merges);
    if (!b->merges) return kn_set_error(KN_ERR_OOM, "%s: out of memory for %zu merges", file, n);
    for (size_t i = 0; i < b->merges_cap; i++) b->merges[i].pair = EMPTY_PAIR;
    size_t plen = b->prefix ? strlen(b->prefix) : 0;
    const cJSON *m;
    size_t i = 0;
    cJSON_ArrayForEach(m, merges) {
        char *left = NULL, *right = NULL;
        kn_status st = merge_parts(m, i, file, &left, &right);
        int32_t a = -1, c = -1, merged = -1;
        if (st == KN_OK) {
            a = kn_strmap_get(&b->vocab, left, strlen(left));
            c = kn_strmap_get(&b->vocab, right, strlen(right));
            if (a < 0 || c < 0)
                st = kn_set_error(KN_ERR_IO, "%s: model.merges[%zu]: token \"%s\" is not in the vocabulary", file, i,
                                  a < 0 ? left : right);
        }
        if (st == KN_OK) {
            /* The merged token drops the right part's continuing-subword prefix. */
            const char *tail = plen && strncmp(right, b->prefix, plen) == 0 ? right + plen : right;
            size_t ll = strlen(left), tl = strlen(tail);
            char *joined = malloc(ll + tl + 1);
            if (!joined) {
                st = kn_set_error(KN_ERR_OOM, "%s: out of memory", file);
            } else {
                memcpy(joined, left, ll);
                memcpy(joined + ll, tail, tl + 1);
                merged = kn_strmap_get(&b->vocab, joined, ll + tl);
                if (merged < 0)
                    st = kn_set_error(KN_ERR_IO, "%s: model.merges[%zu]: the merged token \"%s\" is not in the vocabulary",
                                      file, i, joined);
                free(joined);
            }
        }
        free(left);
        free(right);
        if (st != KN_OK) return st;
        merge_slot *slot = merge_find(b, pair_key(a, c));
        *slot = (merge_slot){pair_key(a, c), (int32_t)i, merged}; /* a repeated pair: the later rank wins, as in the library */
        i++;
    }
    return KN_OK;
}

static char *optional_string(const cJSON *model, const char *key) {
    const char *s = kn_tok_json_str(model, key, "model", false);
    return s && *s ? kn_tok_strdup(s) : NULL;
}

kn_bpe *kn_bpe_load(const cJSON *model, const char *file) {
    const char *type = kn_tok_json_str(model, "type", "model", false);
    if (type ? strcmp(type, "BPE") != 0 : !cJSON_GetObjectItemCaseSensitive(model, "merges")) {
        kn_set_error(KN_ERR_IO, "%s: model type \"%s\" is not supported by kiln (only BPE is)", file,
                     type ? type : "(none)");
        return NULL;
    }
    const cJSON *dropout = cJSON_GetObjectItemCaseSensitive(model, "dropout");
    if (cJSON_IsNumber(dropout) && dropout->valuedouble > 0) {
        kn_set_error(KN_ERR_IO, "%s: model.dropout %g: BPE dropout is not supported by kiln", file, dropout->valuedouble);
        return NULL;
    }
    kn_bpe *b = calloc(1, sizeof *b);
    if (!b) {
        kn_set_error(KN_ERR_OOM, "%s: out of memory", file);
        return NULL;
    }
    b->byte_fallback = kn_tok_json_bool(model, "byte_fallback", false);
    b->fuse_unk = kn_tok_json_bool(model, "fuse_unk", false);
    b->ignore_merges = kn_tok_json_bool(model, "ignore_merges", false);
    b->prefix = optional_string(model, "continuing_subword_prefix");
    b->suffix = optional_string(model, "end_of_word_suffix");
    b->unk_id = -1;
    kn_status st = load_vocab(b, cJSON_GetObjectItemCaseSensitive(model, "vocab"), file);
    if (st == KN_OK) st = load_merges(b, cJSON_GetObjectItemCaseSensitive(model, "merges"), file);
    const char *unk = kn_tok_json_str(model, "unk_token", "model", false);
    if (st == KN_OK && unk && (b->unk_id = kn_strmap_get(&b->vocab, unk, strlen(unk))) < 0)
        st = kn_set_error(KN_ERR_IO, "%s: model.unk_token \"%s\" is not in the vocabulary", file, unk);
    if (st != KN_OK) {
        kn_bpe_free(b);
        return NULL;
    }
    return b;
}

/* ---- the merge loop ---- */

typedef struct symbol {
    int32_t id; /* -1 once merged into the symbol on its left */
    int32_t prev, next;
} symbol;
typedef struct candidate {
    int32_t rank, pos; /* the lowest rank merges first; among equals the leftmost */
} candidate;

static bool cand_less(candidate a, candidate b) { return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos); }

typedef struct heap {
    candidate *v;
    size_t n, cap;
} heap;

static bool heap_push(heap *h, candidate c) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        candidate *q = realloc(h->v, cap * sizeof *q);
        if (!q) return false;
        h->v = q;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0 && cand_less(c, h->v[(i - 1) / 2])) {
        h->v[i] = h->v[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->v[i] = c;
    return true;
}

static candidate heap_pop(heap *h) {
    candidate top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && cand_less(h->v[c + 1], h->v[c])) c++;
        if (!cand_less(h->v[c], last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = last;
    return top;
}

/* Queues the merge of the symbol at pos with its right neighbour, if the merges have one. */
static bool queue_pair(const kn_bpe *b, const symbol *s, int32_t pos, heap *h) {
    if (pos < 0 || s[pos].next < 0) return true;
    const merge_slot *m = merge_find(b, pair_key(s[pos].id, s[s[pos].next].id));
    return m->pair == EMPTY_PAIR || heap_push(h, (candidate){m->rank, pos});
}

static kn_status merge_all(const kn_bpe *b, symbol *s, int32_t n) {
    heap h = {0};
    bool ok = true;
    for (int32_t i = 0; i + 1 < n && ok; i++) ok = queue_pair(b, s, i, &h);
    while (ok && h.n) {
        candidate c = heap_pop(&h);
        symbol *left = &s[c.pos];
        if (left->id < 0 || left->next < 0) continue;
        const merge_slot *m = merge_find(b, pair_key(left->id, s[left->next].id));
        if (m->pair == EMPTY_PAIR || m->rank != c.rank) continue; /* the pair changed since it was queued */
        symbol *right = &s[left->next];
        left->id = m->merged;
        left->next = right->next;
        if (right->next >= 0) s[right->next].prev = c.pos;
        right->id = -1;
        ok = queue_pair(b, s, left->prev, &h) && queue_pair(b, s, c.pos, &h);
    }
    free(h.v);
    return ok ? KN_OK : kn_set_error(KN_ERR_OOM, "tokenizer: out of memory merging a word of %d symbols", n);
}

typedef struct word {
    symbol *s;
    int32_t n, cap;
} word;

static bool word_add(word *w, int32_t id) {
    if (w->n == w->cap) {
        int32_t cap = w->cap ? w->cap * 2 : 32;
        symbol *q = realloc(w->s, (size_t)cap * sizeof *q);
        if (!q) return false;
        w->s = q;
        w->cap = cap;
    }
    w->s[w->n] = (symbol){id, w->n - 1, -1};
    if (w->n > 0) w->s[w->n - 1].next = w->n;
    w->n++;
    return true;
}

static bool bytes_known(const kn_bpe *b, const char *c, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (b->byte_ids[(unsigned char)c[i]] < 0) return false;
    return true;
}

/* The word's characters as initial symbols, as the library's merge_word makes them. */
static kn_status split_chars(const kn_bpe *b, const char *w, size_t n, word *out) {
    kn_tok_buf affixed = {0};
    bool pending_unk = false, ok = true;
    size_t plen = b->prefix ? strlen(b->prefix) : 0, slen = b->suffix ? strlen(b->suffix) : 0;
    for (size_t i = 0; i < n && ok;) {
        uint32_t cp;
        size_t k = kn_utf8_next(w + i, n - i, &cp);
        const char *c = w + i;
        size_t clen = k;
        bool first = i == 0, last = i + k == n;
        if ((plen && !first) || (slen && last)) {
            affixed.n = 0;
            ok = (!plen || first || kn_tok_buf_put(&affixed, b->prefix, plen)) && kn_tok_buf_put(&affixed, c, clen) &&
                 (!slen || !last || kn_tok_buf_put(&affixed, b->suffix, slen));
            c = affixed.p;
            clen = affixed.n;
        }
        int32_t id = ok ? kn_strmap_get(&b->vocab, c, clen) : -1;
        if (id >= 0) {
            if (pending_unk) ok = word_add(out, b->unk_id);
            pending_unk = false;
            ok = ok && word_add(out, id);
        } else if (ok && b->byte_fallback && bytes_known(b, c, clen)) {
            /* Each byte as its <0xNN> token; an unknown run before stays pending, as in the library. */
            for (size_t q = 0; q < clen && ok; q++) ok = word_add(out, b->byte_ids[(unsigned char)c[q]]);
        } else if (b->unk_id >= 0 && ok) {
            if (pending_unk && !b->fuse_unk) ok = word_add(out, b->unk_id);
            pending_unk = true;
        } /* no unk_token: the library drops the character */
        i += k;
    }
    if (ok && pending_unk) ok = word_add(out, b->unk_id);
    kn_tok_buf_free(&affixed);
    return ok ? KN_OK : kn_set_error(KN_ERR_OOM, "tokenizer: out of memory splitting a word");
}

/* ---- the word cache ---- */

enum { CACHE_MAX_WORDS = 1 << 16, CACHE_MAX_WORD_BYTES = 256, CACHE_BLOCK = 1 << 16 };

struct kn_bpe_cache {
    kn_strmap words; /* word -> index into spans */
    kn_tok_ids ids;      /* every cached word's ids, back to back */
    size_t (*spans)[2];  /* offset and count in ids */
    size_t n;
    char **blocks; /* the words' bytes, in blocks that never move */
    size_t n_blocks, block_used;
};

kn_bpe_cache *kn_bpe_cache_new(void) {
    kn_bpe_cache *c = calloc(1, sizeof *c);
    if (!c) kn_set_error(KN_ERR_OOM, "tokenizer: out of memory for the word cache");
    return c;
}

void kn_bpe_cache_free(kn_bpe_cache *c) {
    if (!c) return;
    kn_strmap_free(&c->words);
    free(c->ids.v);
    free(c->spans);
    for (size_t i = 0; i < c->n_blocks; i++) free(c->blocks[i]);
    free(c->blocks);
    free(c);
}

/* Remembers a word's ids (ids->v[first..]); a full cache or no memory just skips it. */
static void cache_put(kn_bpe_cache *c, const char *w, size_t n, const kn_tok_ids *ids, size_t first) {
    if (c->n >= CACHE_MAX_WORDS || n > CACHE_MAX_WORD_BYTES) return;
    if (c->n_blocks == 0 || c->block_used + n > CACHE_BLOCK) {
        char **bl = realloc(c->blocks, (c->n_blocks + 1) * sizeof *bl);
        if (!bl) return;
        c->blocks = bl;
        if (!(bl[c->n_blocks] = malloc(CACHE_BLOCK))) return;
        c->n_blocks++;
        c->block_used = 0;
    }
    if (c->n % 1024 == 0) {
        size_t(*sp)[2] = realloc(c->spans, (c->n + 1024) * sizeof *sp);
        if (!sp) return;
        c->spans = sp;
    }
    char *key = c->blocks[c->n_blocks - 1] + c->block_used;
    memcpy(key, w, n);
    size_t off = c->ids.n;
    for (size_t i = first; i < ids->n; i++) /* by index: ids->v is NULL when the word made none */
        if (!kn_tok_ids_push(&c->ids, ids->v[i])) {
            c->ids.n = off;
            kn_clear_error();
            return;
        }
    if (!kn_strmap_put(&c->words, key, n, (int32_t)c->n)) {
        c->ids.n = off;
        kn_clear_error();
        return;
    }
    c->block_used += n;
    c->spans[c->n][0] = off;
    c->spans[c->n][1] = ids->n - first;
    c->n++;
}

kn_status kn_bpe_encode_word(const kn_bpe *b, const char *w, size_t n, kn_bpe_cache *cache, kn_tok_ids *out) {
    if (n == 0) return KN_OK;
    if (b->ignore_merges) { /* a word that is a token is that token, whatever the merges would make */
        int32_t id = kn_strmap_get(&b->vocab, w, n);
        if (id >= 0) return kn_tok_ids_push(out, id) ? KN_OK : KN_ERR_OOM;
    }
    if (cache) {
        int32_t hit = kn_strmap_get(&cache->words, w, n);
        if (hit >= 0) {
            for (size_t i = 0; i < cache->spans[hit][1]; i++)
                if (!kn_tok_ids_push(out, cache->ids.v[cache->spans[hit][0] + i])) return KN_ERR_OOM;
            return KN_OK;
        }
    }
    word wd = {0};
    kn_status st = split_chars(b, w, n, &wd);
    if (st == KN_OK) st = merge_all(b, wd.s, wd.n);
    size_t first = out->n;
    for (int32_t i = 0; st == KN_OK && wd.n > 0 && i >= 0; i = wd.s[i].next)
        if (!kn_tok_ids_push(out, wd.s[i].id)) st = KN_ERR_OOM;
    free(wd.s);
    if (st == KN_OK && cache) cache_put(cache, w, n, out, first);
    return st;
}
