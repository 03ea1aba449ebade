/* What the signatures give every op: attribute hashing, equality, printing, the finiteness
 * check of debug mode, the signature text, and the a, b of scalar expressions. One loop over
 * the op's parameter list (kn_op_params) serves every op. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/hash.h"
#include "core/strbuf.h"
#include "kiln/optable.h"
#include "ops/op_table.h"

/* The op's attribute struct inside a (every member of the union starts at the same place). */
static const char *attrs_base(const kn_attrs *a) { return (const char *)&a->copy; }

static bool is_attr(kn_param_kind k) { return k >= KN_PARAM_I64; }

static size_t attr_size(kn_param_kind k) {
    switch (k) {
    case KN_PARAM_I64: return sizeof(int64_t);
    case KN_PARAM_F64: return sizeof(double);
    case KN_PARAM_BOOL: return sizeof(bool);
    case KN_PARAM_PAIR: return 2 * sizeof(int64_t);
    case KN_PARAM_CUSTOM: return sizeof(kn_custom_attrs);
    default: return 0; /* dims: only up to their count */
    }
}

uint64_t kn_attrs_hash(kn_op_id op, const kn_attrs *a) {
    uint64_t h = kn_hash_bytes(KN_HASH_SEED, &a->absent, sizeof a->absent);
    for (const kn_param *p = kn_op_params(op); p->name; p++) {
        if (!is_attr(p->kind)) continue;
        const char *v = attrs_base(a) + p->offset;
        if (p->kind == KN_PARAM_DIMS) {
            const kn_shape *s = (const kn_shape *)v;
            h = kn_hash_bytes(kn_hash_bytes(h, &s->n, sizeof s->n), s->v, (size_t)s->n * sizeof s->v[0]);
        } else {
            h = kn_hash_bytes(h, v, attr_size(p->kind));
        }
    }
    return h;
}

bool kn_attrs_equal(kn_op_id op, const kn_attrs *a, const kn_attrs *b) {
    if (a->absent != b->absent) return false;
    for (const kn_param *p = kn_op_params(op); p->name; p++) {
        if (!is_attr(p->kind)) continue;
        const char *x = attrs_base(a) + p->offset, *y = attrs_base(b) + p->offset;
        if (p->kind == KN_PARAM_DIMS) {
            const kn_shape *s = (const kn_shape *)x, *t = (const kn_shape *)y;
            if (s->n != t->n || memcmp(s->v, t->v, (size_t)s->n * sizeof s->v[0])) return false;
        } else if (memcmp(x, y, attr_size(p->kind))) {
            return false;
        }
    }
    return true;
}

int kn_op_input_slots(kn_op_id op) {
    int n = 0;
    for (const kn_param *p = kn_op_params(op); p->name; p++) n += !is_attr(p->kind);
    return n;
}

static const char *const type_names[] = {
    [KN_PARAM_I64] = "i64", [KN_PARAM_F64] = "f64", [KN_PARAM_BOOL] = "bool",
    [KN_PARAM_DIMS] = "dims", [KN_PARAM_PAIR] = "i64[2]", [KN_PARAM_CUSTOM] = "custom",
};

size_t kn_attrs_format(kn_op_id op, const kn_attrs *a, char *buf, size_t size) {
    size_t len = 0;
    if (size) buf[0] = '\0';
    for (const kn_param *p = kn_op_params(op); p->name; p++) {
        if (!is_attr(p->kind)) continue;
        const char *v = attrs_base(a) + p->offset;
        len = kn_snappend(buf, size, len, "%s%s=", len ? ", " : "", p->name);
        switch (p->kind) {
        case KN_PARAM_I64: len = kn_snappend(buf, size, len, "%" PRId64, *(const int64_t *)v); break;
        case KN_PARAM_F64: len = kn_snappend(buf, size, len, "%g", *(const double *)v); break;
        case KN_PARAM_BOOL: len = kn_snappend(buf, size, len, "%s", *(const bool *)v ? "true" : "false"); break;
        case KN_PARAM_PAIR: len = kn_snappend(buf, size, len, "[%" PRId64 ", %" PRId64 "]", ((const int64_t *)v)[0], ((const int64_t *)v)[1]); break;
        case KN_PARAM_DIMS: {
            const kn_shape *s = (const kn_shape *)v;
            len = kn_snappend(buf, size, len, "[");
            for (int d = 0; d < s->n; d++) len = kn_snappend(buf, size, len, "%s%" PRId64, d ? ", " : "", s->v[d]);
            len = kn_snappend(buf, size, len, "]");
            break;
        }
        default: len = kn_snappend(buf, size, len, "..."); break;
        }
    }
    return len;
}

bool kn_attrs_finite(kn_op_id op, const kn_attrs *a) {
    for (const kn_param *p = kn_op_params(op); p->name; p++) {
        const char *v = attrs_base(a) + p->offset;
        if (p->kind == KN_PARAM_F64 && !isfinite(*(const double *)v)) return false;
        if (p->kind == KN_PARAM_CUSTOM)
            for (int i = 0; i < KN_CUSTOM_MAX_ATTRS; i++)
                if (!isfinite(((const kn_custom_attrs *)v)->f[i])) return false;
    }
    return true;
}

size_t kn_op_signature(int index, char *buf, size_t size) {
    size_t len = 0;
    if (size) buf[0] = '\0';
    if (index < 0 || index >= KN_OP_COUNT) return 0;
    kn_op_id op = (kn_op_id)index;
    len = kn_snappend(buf, size, len, "%s(", kn_op_name(op));
    int n_in = 0, n_attr = 0;
    for (const kn_param *p = kn_op_params(op); p->name; p++) {
        if (!is_attr(p->kind)) {
            len = kn_snappend(buf, size, len, "%s%s%s", n_in++ ? ", " : "", p->name,
                   p->kind == KN_PARAM_OPT ? "?" : p->kind == KN_PARAM_INS ? "..." : "");
        } else {
            len = kn_snappend(buf, size, len, "%s%s: %s", n_attr++ ? ", " : n_in ? "; " : "", p->name, type_names[p->kind]);
        }
    }
    len = kn_snappend(buf, size, len, ")");
    return len;
}

int kn_op_param_count(int index) {
    if (index < 0 || index >= KN_OP_COUNT) return 0;
    int n = 0;
    for (const kn_param *p = kn_op_params((kn_op_id)index); p->name; p++) n++;
    return n;
}

bool kn_op_get_param(int index, int k, kn_op_param_info *out) {
    if (k < 0 || k >= kn_op_param_count(index) || !out) return false;
    const kn_param *p = &kn_op_params((kn_op_id)index)[k];
    bool input = !is_attr(p->kind);
    *out = (kn_op_param_info){.name = p->name, .type = input ? "tensor" : type_names[p->kind], .input = input,
                              .optional = p->kind == KN_PARAM_OPT, .variadic = p->kind == KN_PARAM_INS};
    return true;
}

/* The offset of op's double attribute `name`, or -1. */
static int scalar_offset(kn_op_id op, const char *name) {
    for (const kn_param *p = kn_op_params(op); p->name; p++)
        if (p->kind == KN_PARAM_F64 && strcmp(p->name, name) == 0) return p->offset;
    return -1;
}

void kn_op_scalars(kn_op_id op, const kn_attrs *at, double ab[2]) {
    int oa = scalar_offset(op, "a"), ob = scalar_offset(op, "b");
    ab[0] = oa < 0 ? 0 : *(const double *)(attrs_base(at) + oa);
    ab[1] = ob < 0 ? 0 : *(const double *)(attrs_base(at) + ob);
}

void kn_op_set_scalars(kn_op_id op, kn_attrs *at, double a, double b) {
    int oa = scalar_offset(op, "a"), ob = scalar_offset(op, "b");
    char *base = (char *)&at->copy;
    if (oa >= 0) memcpy(base + oa, &a, sizeof a);
    if (ob >= 0) memcpy(base + ob, &b, sizeof b);
}
