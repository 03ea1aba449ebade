/* The debug shadow: a node's inputs copied to the reference backend before it runs, the same
 * op run there in float64 after it ran, and the two results compared at the tolerance of the
 * op's dtype (docs/decisions.md, "Debug shadow"). Values travel through the host with
 * kn_to_host and kn_from_host, so any backend can shadow any other. An interposer
 * (exec/interpose.h), active in debug mode. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/call_site.h"
#include "core/error.h"
#include "core/host_values.h"
#include "core/runtime_impl.h"
#include "exec/dispatch.h"
#include "exec/interpose.h"
#include "exec/shadow.h"
#include "ops/custom_registry.h"

static _Atomic int64_t ops_checked, ops_skipped;

/* An output value passes when |got - want| <= s (rtol |want| + atol S) + tiny, where S is the
 * output's largest finite |want| (at most 1 for elementwise ops), so that the absolute part
 * follows the data's scale, activations or gradients alike; s is the square root of the
 * reduction length for ops that sum (1 for elementwise ops); tiny absorbs subnormals that a
 * device flushes to zero. want is first rounded to the output's dtype. */
typedef struct tolerance {
    double rtol, atol, tiny;
} tolerance;

static const tolerance tolerances[KN_DTYPE_COUNT] = {
    [KN_F64] = {1e-10, 1e-12, 0x1p-1022},
    [KN_F32] = {1e-4, 1e-5, 0x1p-126},
    [KN_F16] = {1e-2, 1e-3, 0x1p-14},
    [KN_BF16] = {5e-2, 1e-2, 0x1p-126},
};

typedef struct kn_shadow {
    kn_backend *ref;
    kn_device device;                 /* the reference device */
    kn_node node;                     /* the op again, on the reference device */
    kn_tensor *real[KN_NODE_MAX_OUT]; /* the real op's outputs */
    kn_dtype least;                   /* the least precise float dtype among the real inputs */
    bool pointwise;                   /* elementwise or creation: each output from its own inputs */
    double reduction;                 /* how many values each output sums over, roughly */
    char call[400];                   /* the real op's call, "gelu(f32[4, 8])", for errors */
    char origin[600];                 /* ` at module "mlp" (MLP) called from f+0x1c` */
} kn_shadow;

/* Float dtypes from least to most precise; other dtypes rank above them all. */
static int precision(kn_dtype d) {
    switch (d) {
    case KN_BF16: return 0;
    case KN_F16: return 1;
    case KN_F32: return 2;
    case KN_F64: return 3;
    default: return 4;
    }
}

static kn_dtype reference_dtype(kn_dtype d) { return kn_dtype_is_float(d) ? KN_F64 : d; }

/* Errors of long sums grow like the square root of their length. This is the length for
 * reductions, and the last input dim for the other opaque ops: a GEMM's K, the row a norm,
 * softmax or loss reduces, an attention head. */
static double reduction_length(const kn_node *n) {
    const kn_tensor *x = n->n_in ? n->in[0] : NULL;
    if (!x || !n->n_out || !x->ndim) return 1;
    if (kn_op_table[n->op].kind == KN_KIND_REDUCTION) {
        int64_t outs = kn_numel(n->out[0]);
        return outs && kn_numel(x) > outs ? (double)kn_numel(x) / (double)outs : 1;
    }
    return x->shape[x->ndim - 1] > 1 ? (double)x->shape[x->ndim - 1] : 1;
}

/* A contiguous copy of t's values on the reference device, owned by the current scope:
 * floats as f64, integers and bool as they are (they are indices and masks). */
static kn_tensor *reference_copy(kn_tensor *t, kn_device device) {
    bool wide = kn_dtype_is_float(t->dtype);
    void *host = wide ? (void *)kn_read_f64("shadow", t) : kn_read_raw("shadow", t);
    kn_tensor *c = host ? kn_from_host(host, reference_dtype(t->dtype), kn_shape_of(t), device) : NULL;
    free(host);
    return c;
}

/* Whether n writes into t's storage (an output it updates in place). */
static bool written_in_place(const kn_node *n, const kn_tensor *t) {
    for (int k = 0; k < n->n_out; k++)
        if (!(n->fresh_out & (1u << k)) && n->out[k]->storage == t->storage) return true;
    return false;
}

static void shadow_free(kn_shadow *s) {
    for (int i = 0; i < s->node.n_in; i++) kn_tensor_decref(s->node.in[i]);
    for (int k = 0; k < s->node.n_out; k++) {
        kn_tensor_decref(s->node.out[k]);
        kn_tensor_decref(s->real[k]);
    }
    if (s->node.in != s->node.in_inline) free(s->node.in);
    free(s);
}

/* Fills the reference node: inputs copied unless the reference can read them as they are,
 * fresh outputs allocated, in-place outputs starting from n's values (shared with the input
 * they alias, as in n). Runs in a scope of its own; the node keeps its own references. */
static kn_status fill_reference(kn_shadow *s, const kn_node *n, kn_device device) {
    kn_node *r = &s->node;
    for (int i = 0; i < n->n_in; i++) {
        kn_tensor *t = n->in[i];
        bool as_is = t->storage->backend == s->ref && t->storage->device.index == device.index &&
                     reference_dtype(t->dtype) == t->dtype && !written_in_place(n, t);
        kn_tensor *c = as_is ? t : reference_copy(t, device);
        if (!c) return kn_last_status();
        r->in[i] = kn_tensor_incref(c);
    }
    for (int k = 0; k < n->n_out; k++) {
        kn_tensor *t = n->out[k];
        s->real[k] = kn_tensor_incref(t);
        if (n->fresh_out & (1u << k)) {
            r->out[k] = kn_tensor_alloc("shadow", reference_dtype(t->dtype), t->shape, t->ndim, device);
            if (!r->out[k]) return kn_last_status();
            continue;
        }
        int alias = -1;
        for (int i = 0; i < n->n_in && alias < 0; i++)
            if (kn_tensor_same_view(n->in[i], t)) alias = i;
        kn_tensor *c = alias >= 0 ? r->in[alias] : reference_copy(t, device);
        if (!c) return kn_last_status();
        r->out[k] = kn_tensor_incref(c);
    }
    return KN_OK;
}

static void describe_origin(char *buf, size_t size) {
    char site[256];
    const char *path = kn_module_current_path();
    kn_call_site(site, sizeof site);
    if (path) snprintf(buf, size, " at module %s called from %s", path, site);
    else snprintf(buf, size, " called from %s", site);
}

char *kn_shadow_origin(void) {
    char buf[600];
    describe_origin(buf, sizeof buf);
    return strdup(buf);
}

/* Before n runs on b: copies its inputs, and the outputs it writes in place, to the reference
 * device (floats as f64), so the reference starts from the values n starts from. No state
 * when the shadow is off or skips n (counted). Fails only when a copy does. origin: where n
 * was recorded, or NULL for the op call running now. */
static kn_status record_from(const kn_node *n, const kn_backend *b, void **state, const char *origin) {
    kn_device device;
    kn_backend *ref = kn_shadow_reference(&device);
    if (!ref) return KN_OK;
    const kn_op_def *def = &kn_op_table[n->op];
    kn_dtype key = reference_dtype(n->n_in ? n->in[0]->dtype : n->n_out ? n->out[0]->dtype : KN_F64);
    kn_kernel_entry k = ref->kernels->op[n->op];
    if (!b->holds_values || (def->flags & (KN_OPF_SYNC | KN_OPF_NOCHECK)) || !k.fn || !(k.dtypes & KN_DT(key))) {
        atomic_fetch_add_explicit(&ops_skipped, 1, memory_order_relaxed);
        return KN_OK;
    }
    kn_shadow *s = calloc(1, sizeof *s);
    kn_tensor **in = !s ? NULL : n->n_in <= KN_NODE_MAX_IN ? s->node.in_inline : calloc((size_t)n->n_in, sizeof *in);
    if (!in) {
        free(s);
        return kn_error(KN_ERR_OOM, "shadow: out of host memory shadowing %s", def->name);
    }
    s->ref = ref;
    s->device = device;
    s->node = (kn_node){.op = n->op, .n_in = n->n_in, .n_out = n->n_out, .in = in, .attrs = n->attrs,
                        .rng_seed = n->rng_seed, .rng_offset = n->rng_offset, .fresh_out = n->fresh_out};
    s->least = KN_F64;
    for (int i = 0; i < n->n_in; i++)
        if (precision(n->in[i]->dtype) < precision(s->least)) s->least = n->in[i]->dtype;
    s->pointwise = def->kind == KN_KIND_ELEMENTWISE || def->kind == KN_KIND_CREATION;
    s->reduction = s->pointwise ? 1 : reduction_length(n);
    kn_scope_push();
    kn_status st = fill_reference(s, n, device);
    kn_scope_pop();
    if (st != KN_OK) {
        shadow_free(s);
        return st;
    }
    char inputs[320], attrs[160] = "";
    kn_op_describe_inputs(n, inputs, sizeof inputs);
    if (n->op != KN_OP_custom) kn_attrs_format(n->op, &n->attrs, attrs, sizeof attrs); /* a custom op's are its own */
    snprintf(s->call, sizeof s->call, "%s(%s%s%s)", kn_op_name_in(n->op, &n->attrs), inputs, *attrs ? "; " : "", attrs);
    if (origin) snprintf(s->origin, sizeof s->origin, "%s", origin);
    else describe_origin(s->origin, sizeof s->origin);
    *state = s;
    return KN_OK;
}

static kn_status shadow_record(const kn_node *n, const kn_backend *b, void **state) {
    return record_from(n, b, state, NULL);
}

static kn_status run_reference(kn_shadow *s) {
    kn_status st = kn_device_sync(s->device); /* the copies to the reference device have landed */
    if (st == KN_OK) st = kn_node_execute(s->ref, &s->node);
    if (st == KN_OK) st = kn_device_sync(s->device);
    if (st == KN_OK) return KN_OK;
    char msg[640];
    snprintf(msg, sizeof msg, "%s", kn_last_error());
    return kn_error(st, "shadow: the float64 run of %s on %s failed: %s", s->call, s->ref->name, msg);
}

/* The values of one output that disagree, and the one with the largest error. */
typedef struct mismatch {
    int64_t count, index;
    double got, want, err;
} mismatch;

static void note(mismatch *m, int64_t i, double got, double want, double err) {
    if (m->count++ == 0 || err > m->err) *m = (mismatch){m->count, i, got, want, err};
}

static double round_to(double v, kn_dtype d) {
    switch (d) {
    case KN_F32: return (float)v;
    case KN_F16: return kn_f16_to_f32(kn_f64_to_f16(v));
    case KN_BF16: return kn_bf16_to_f32(kn_f64_to_bf16(v));
    default: return v;
    }
}

/* NaN matches NaN and an infinity the same infinity; any other non-finite pair differs. */
static void compare_floats(const double *got, const double *want, int64_t count, kn_dtype dtype, tolerance tol,
                           double scale, bool pointwise, mismatch *m) {
    double largest = 0;
    for (int64_t i = 0; i < count; i++)
        if (isfinite(want[i]) && fabs(want[i]) > largest) largest = fabs(want[i]);
    if (pointwise && largest > 1) largest = 1;
    for (int64_t i = 0; i < count; i++) {
        double g = got[i], w = round_to(want[i], dtype), err = INFINITY;
        bool ok;
        if (isnan(g) || isnan(w)) ok = isnan(g) && isnan(w);
        else if (isinf(g) || isinf(w)) ok = g == w;
        else err = fabs(g - w), ok = err <= scale * (tol.rtol * fabs(w) + tol.atol * largest) + tol.tiny;
        if (!ok) note(m, i, g, want[i], err);
    }
}

static void format_index(int64_t flat, const kn_tensor *t, char *buf, size_t size) {
    int64_t idx[KN_MAX_DIMS];
    for (int d = t->ndim - 1; d >= 0; d--) {
        idx[d] = t->shape[d] ? flat % t->shape[d] : 0;
        flat = t->shape[d] ? flat / t->shape[d] : 0;
    }
    size_t len = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < t->ndim && len < size; d++)
        len += (size_t)snprintf(buf + len, size - len, d ? ", %lld" : "%lld", (long long)idx[d]);
    if (len < size) snprintf(buf + len, size - len, "]");
}

/* got's values against want's (same shape; want as float64), at the tolerance of `dtype` scaled
 * by `scale`. *m the values outside it; *tol the tolerance used. */
static kn_status find_mismatch(kn_tensor *got_t, kn_tensor *want_t, kn_dtype dtype, double scale, bool pointwise,
                               mismatch *m, tolerance *tol) {
    int64_t count = kn_numel(got_t);
    double *got = kn_read_f64("shadow", got_t), *want = got ? kn_read_f64("shadow", want_t) : NULL;
    if (!want) {
        free(got);
        return kn_last_status();
    }
    *m = (mismatch){0};
    bool is_float = kn_dtype_is_float(got_t->dtype);
    *tol = is_float ? tolerances[dtype] : (tolerance){0, 0, 0};
    if (is_float) compare_floats(got, want, count, got_t->dtype, *tol, scale, pointwise, m);
    else
        for (int64_t i = 0; i < count; i++)
            if (got[i] != want[i]) note(m, i, got[i], want[i], fabs(got[i] - want[i]));
    free(got);
    free(want);
    return KN_OK;
}

/* "max abs error 1.0e-02 at index [1, 5] (got 0.5, want 0.49; f32 tolerance rtol 0.0001 atol
 * 1e-05; 1 of 64 values outside)", or for integers and bool the values that differ. */
static void describe_mismatch(const mismatch *m, const kn_tensor *t, kn_dtype tol_dtype, tolerance tol,
                              const char *scaled, char *buf, size_t size) {
    char index[160];
    format_index(m->index, t, index, sizeof index);
    long long count = (long long)kn_numel(t);
    if (!kn_dtype_is_float(t->dtype))
        snprintf(buf, size, "(%s) differs at index %s (got %.0f, want %.0f; %lld of %lld values differ)",
                 kn_dtype_name(t->dtype), index, m->got, m->want, (long long)m->count, count);
    else
        snprintf(buf, size, "max abs error %.1e at index %s (got %.6g, want %.6g; %s tolerance rtol %g atol %g%s; "
                 "%lld of %lld values outside)", m->err, index, m->got, m->want, kn_dtype_name(tol_dtype), tol.rtol,
                 tol.atol, scaled, (long long)m->count, count);
}

/* Compares output k of the real op with the reference's; the error names the divergence. */
static kn_status compare_output(const kn_shadow *s, int k) {
    kn_tensor *real = s->real[k];
    kn_dtype tol_dtype = precision(s->least) < precision(real->dtype) ? s->least : real->dtype;
    double scale = sqrt(s->reduction);
    mismatch m;
    tolerance tol;
    kn_status st = find_mismatch(real, s->node.out[k], tol_dtype, scale, s->pointwise, &m, &tol);
    if (st != KN_OK || !m.count) return st;
    char scaled[96] = "", what[600];
    if (scale > 1) snprintf(scaled, sizeof scaled, ", x%.3g for a reduction over %.0f values", scale, s->reduction);
    describe_mismatch(&m, real, tol_dtype, tol, scaled, what, sizeof what);
    return kn_error(KN_ERR_NUMERIC, "shadow: first divergent op: %s%s: output %d %s", s->call, s->origin, k, what);
}

kn_status kn_shadow_compare(kn_tensor *got, kn_tensor *want, const char *what) {
    mismatch m;
    tolerance tol;
    kn_status st = find_mismatch(got, want, got->dtype, 1, false, &m, &tol);
    if (st != KN_OK || !m.count) return st;
    char text[600];
    describe_mismatch(&m, got, got->dtype, tol, "", text, sizeof text);
    return kn_error(KN_ERR_NUMERIC, "shadow: %s: %s", what, text);
}

/* After n ran with status `real`: the reference runs and every output of n is compared with
 * it. A divergence is KN_ERR_NUMERIC naming the op's call, the element, the nn module and the
 * caller. */
static kn_status shadow_done(void *state, kn_status real, kn_tensor *const *outs, int n_out) {
    (void)outs, (void)n_out; /* compared are the outputs the shadow holds since record */
    kn_shadow *s = state;
    kn_status st = real;
    if (st == KN_OK) {
        atomic_fetch_add_explicit(&ops_checked, 1, memory_order_relaxed);
        st = run_reference(s);
        for (int k = 0; k < s->node.n_out && st == KN_OK; k++) st = compare_output(s, k);
    }
    shadow_free(s);
    return st;
}

kn_status kn_shadow_run_node(kn_node *n, kn_backend *b, const char *origin) {
    void *state = NULL;
    kn_status st = record_from(n, b, &state, origin);
    if (st != KN_OK) return st;
    st = kn_node_execute(b, n);
    if (st != KN_OK) {
        char msg[640], inputs[320];
        snprintf(msg, sizeof msg, "%s", kn_last_error());
        kn_op_describe_inputs(n, inputs, sizeof inputs);
        st = kn_error(st, "%s (running %s(%s) one by one%s)", msg, kn_op_name_in(n->op, &n->attrs), inputs,
                      origin ? origin : "");
    }
    return state ? shadow_done(state, st, NULL, 0) : st;
}

void kn_shadow_counts(int64_t *checked, int64_t *skipped) {
    if (checked) *checked = atomic_load_explicit(&ops_checked, memory_order_relaxed);
    if (skipped) *skipped = atomic_load_explicit(&ops_skipped, memory_order_relaxed);
}

const kn_interposer kn_shadow_interposer = {
    .name = "shadow",
    .order = KN_ORDER_SHADOW,
    .modes = KN_MODE_BIT(KN_MODE_DEBUG),
    .record = shadow_record,
    .done = shadow_done,
};
