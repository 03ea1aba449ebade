/* Canonical forms of the fused kernel IR: geometry pattern, signature, key, differences. */
#include "graph/fused_ir.h"

#include <stdio.h>
#include <string.h>

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

void kn_fused_signature(const kn_fused_ir *ir, char *buf, size_t size) {
    size_t len = (size_t)snprintf(buf, size, "in%d out%d:", ir->n_in, ir->n_out);
    bool reduces = ir->reduce_op != KN_OP_COUNT;
    for (int j = 0; j <= ir->n_steps && len < size; j++) {
        if (reduces && j == ir->n_pro)
            len += (size_t)snprintf(buf + len, size - len, " %s(%d)", kn_op_name(ir->reduce_op), ir->reduce_arg);
        if (j == ir->n_steps || len >= size) break;
        const kn_fused_step *s = &ir->steps[j];
        len += (size_t)snprintf(buf + len, size - len, " %s(", kn_op_name(s->op));
        for (int a = 0; a < s->n_arg && len < size; a++)
            len += s->arg[a] == KN_FUSED_REDUCED ? (size_t)snprintf(buf + len, size - len, a ? ",r" : "r")
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
