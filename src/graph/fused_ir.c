/* Canonical forms of the fused kernel IR: geometry pattern, signature, key (text and packed),
 * differences, and the memo keyed by the packed key. */
#include "graph/fused_ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"

bool kn_fused_cast_supported(kn_dtype from, kn_dtype to) {
    /* The copy kernel rounds f64 and integers to f16/bf16 once, through a library function
     * (kn_f64_to_f16) that generated code cannot call. */
    if ((to == KN_F16 || to == KN_BF16) && from != to) return from == KN_F32 || from == KN_F16 || from == KN_BF16;
    return true;
}

void kn_fused_geometry(kn_fused_ir *ir, kn_fused_launch *L, kn_tensor *const *ops, int n) {
    const kn_tensor *ref = ops[0];
    int r = 0;
    L->numel = 1;
    for (int d = 0; d < ref->ndim; d++) {
        int64_t size = ref->shape[d];
        L->numel *= size;
        if (size == 1) continue;
        bool merge = r > 0;
        for (int k = 0; k < n && merge; k++) merge = L->stride[k * KN_MAX_DIMS + r - 1] == ops[k]->stride[d] * size;
        if (merge) {
            L->size[r - 1] *= size;
            for (int k = 0; k < n; k++) L->stride[k * KN_MAX_DIMS + r - 1] = ops[k]->stride[d];
            continue;
        }
        L->size[r] = size;
        for (int k = 0; k < n; k++) L->stride[k * KN_MAX_DIMS + r] = ops[k]->stride[d];
        r++;
    }
    if (r == 0) { /* one element */
        L->size[0] = 1;
        for (int k = 0; k < n; k++) L->stride[k * KN_MAX_DIMS] = 0;
        r = 1;
    }
    L->rank = ir->rank = r;
    for (int k = 0; k < n; k++) {
        int64_t inner = L->stride[k * KN_MAX_DIMS + r - 1];
        ir->inner[k] = inner == 1 ? KN_FUSED_INNER_UNIT : inner == 0 ? KN_FUSED_INNER_ZERO : KN_FUSED_INNER_STRIDED;
        ir->outer_zero[k] = 0;
        for (int d = 0; d < r - 1; d++)
            if (L->stride[k * KN_MAX_DIMS + d] == 0) ir->outer_zero[k] |= 1u << d;
    }
}

/* " sum(v3)->r0", " add_scalar(r1)->r2": row value e, where it comes. */
static size_t row_text(const kn_fused_ir *ir, int e, char *buf, size_t size) {
    const struct kn_fused_row *w = &ir->rows[e];
    size_t len = (size_t)snprintf(buf, size, " %s(", kn_op_name(w->op));
    for (int a = 0; a < w->n_arg && len < size; a++)
        len += (size_t)snprintf(buf + len, size - len, kn_fused_reduces(w->op) ? "%s%d" : "%sr%d", a ? "," : "", w->arg[a]);
    if (len < size) len += (size_t)snprintf(buf + len, size - len, ")->r%d", e);
    return len;
}

void kn_fused_signature(const kn_fused_ir *ir, char *buf, size_t size) {
    size_t len = (size_t)snprintf(buf, size, "in%d out%d:", ir->n_in, ir->n_out);
    int e = 0;
    for (int j = 0; j <= ir->n_steps && len < size; j++) {
        for (; e < ir->n_rows && ir->rows[e].after == j && len < size; e++) len += row_text(ir, e, buf + len, size - len);
        if (j == ir->n_steps || len >= size) break;
        const kn_fused_step *s = &ir->steps[j];
        len += (size_t)snprintf(buf + len, size - len, " %s(", kn_op_name(s->op));
        for (int a = 0; a < s->n_arg && len < size; a++)
            len += s->arg[a] >= KN_FUSED_REDUCED ? (size_t)snprintf(buf + len, size - len, "%sr%d", a ? "," : "", s->arg[a] - KN_FUSED_REDUCED)
                                                 : (size_t)snprintf(buf + len, size - len, a ? ",%d" : "%d", s->arg[a]);
        if (len < size) len += (size_t)snprintf(buf + len, size - len, ")->%d", s->output);
    }
}

static size_t dtypes_text(const kn_fused_ir *ir, char *buf, size_t size) {
    size_t len = (size_t)snprintf(buf, size, "dtypes");
    for (int i = 0; i < ir->n_in && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, " %s", kn_dtype_name(ir->in_dtype[i]));
    for (int j = 0; j < ir->n_steps && len < size; j++)
        len += (size_t)snprintf(buf + len, size - len, " %s>%s", kn_dtype_name(ir->steps[j].in_dtype),
                                kn_dtype_name(ir->steps[j].out_dtype));
    for (int e = 0; e < ir->n_rows && len < size; e++)
        len += (size_t)snprintf(buf + len, size - len, " r%s", kn_dtype_name(ir->rows[e].dtype));
    return len;
}

void kn_fused_key_text(const kn_fused_ir *ir, char *buf, size_t size) {
    kn_fused_signature(ir, buf, size);
    size_t len = strlen(buf);
    if (len + 1 < size) buf[len++] = '\n', buf[len] = '\0';
    if (len < size) len += dtypes_text(ir, buf + len, size - len);
    if (len < size) len += (size_t)snprintf(buf + len, size - len, "\nrank %d operands", ir->rank);
    for (int k = 0; k < ir->n_out + ir->n_in && len < size; k++)
        len += (size_t)snprintf(buf + len, size - len, " %d/%x", ir->inner[k], ir->outer_zero[k]);
}

kn_recompile_reason kn_fused_diff(const kn_fused_ir *a, const kn_fused_ir *b) {
    char x[2048], y[2048];
    kn_fused_signature(a, x, sizeof x);
    kn_fused_signature(b, y, sizeof y);
    if (strcmp(x, y) != 0) return KN_RECOMPILE_OPS;
    dtypes_text(a, x, sizeof x);
    dtypes_text(b, y, sizeof y);
    if (strcmp(x, y) != 0) return KN_RECOMPILE_DTYPE;
    if (a->rank != b->rank) return KN_RECOMPILE_RANK;
    int n = a->n_in + a->n_out;
    for (int k = 0; k < n; k++)
        if (a->outer_zero[k] != b->outer_zero[k] || (a->inner[k] == KN_FUSED_INNER_ZERO) != (b->inner[k] == KN_FUSED_INNER_ZERO))
            return KN_RECOMPILE_BROADCAST;
    return KN_RECOMPILE_CONTIGUITY;
}

int kn_fused_key(const kn_fused_ir *ir, int32_t *key) {
    int n = 0;
    key[n++] = ir->n_in, key[n++] = ir->n_out, key[n++] = ir->n_steps, key[n++] = ir->rank, key[n++] = ir->n_rows;
    for (int e = 0; e < ir->n_rows; e++) {
        const struct kn_fused_row *w = &ir->rows[e];
        key[n++] = (int32_t)w->op, key[n++] = w->n_arg;
        for (int a = 0; a < 3; a++) key[n++] = a < w->n_arg ? w->arg[a] : 0;
        key[n++] = (int32_t)w->dtype, key[n++] = w->after;
    }
    for (int i = 0; i < ir->n_in; i++) key[n++] = (int32_t)ir->in_dtype[i];
    for (int j = 0; j < ir->n_steps; j++) {
        const kn_fused_step *s = &ir->steps[j];
        key[n++] = (int32_t)s->op, key[n++] = s->n_arg;
        for (int a = 0; a < 3; a++) key[n++] = a < s->n_arg ? s->arg[a] : 0;
        key[n++] = (int32_t)s->in_dtype, key[n++] = (int32_t)s->out_dtype, key[n++] = s->output;
    }
    for (int k = 0; k < ir->n_out + ir->n_in; k++) key[n++] = ir->inner[k], key[n++] = (int32_t)ir->outer_zero[k];
    return n;
}

struct kn_fused_memo_entry {
    uint64_t hash;
    void *value;
    int n;
    int32_t key[];
};

static uint64_t memo_hash(const int32_t *key, int n) { return kn_hash_bytes(KN_HASH_SEED, key, (size_t)n * sizeof *key); }

static struct kn_fused_memo_entry **memo_slot(const kn_fused_memo *m, const int32_t *key, int n, uint64_t h) {
    size_t j = h & (m->cap - 1);
    for (; m->slots[j]; j = (j + 1) & (m->cap - 1))
        if (m->slots[j]->hash == h && m->slots[j]->n == n && !memcmp(m->slots[j]->key, key, (size_t)n * sizeof *key))
            break;
    return &m->slots[j];
}

void *kn_fused_memo_get(const kn_fused_memo *m, const kn_fused_ir *ir) {
    if (!m->cap) return NULL;
    int32_t key[KN_FUSED_KEY_MAX];
    const int n = kn_fused_key(ir, key);
    struct kn_fused_memo_entry *e = *memo_slot(m, key, n, memo_hash(key, n));
    return e ? e->value : NULL;
}

bool kn_fused_memo_put(kn_fused_memo *m, const kn_fused_ir *ir, void *value) {
    if (2 * (m->count + 1) > m->cap) { /* grow: rehash every entry into twice the slots */
        size_t cap = m->cap ? 2 * m->cap : 256;
        struct kn_fused_memo_entry **slots = calloc(cap, sizeof *slots);
        if (!slots) return false;
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->slots[i]) continue;
            size_t j = m->slots[i]->hash & (cap - 1);
            while (slots[j]) j = (j + 1) & (cap - 1);
            slots[j] = m->slots[i];
        }
        free(m->slots);
        m->slots = slots;
        m->cap = cap;
    }
    int32_t key[KN_FUSED_KEY_MAX];
    const int n = kn_fused_key(ir, key);
    const uint64_t h = memo_hash(key, n);
    struct kn_fused_memo_entry **at = memo_slot(m, key, n, h);
    if (!*at) {
        struct kn_fused_memo_entry *e = malloc(sizeof *e + (size_t)n * sizeof *key);
        if (!e) return false;
        e->hash = h, e->n = n;
        memcpy(e->key, key, (size_t)n * sizeof *key);
        *at = e;
        m->count++;
    }
    (*at)->value = value;
    return true;
}
