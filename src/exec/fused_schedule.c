/* The scheduler of fused mode: runs of elementwise nodes over one iteration space become one
 * generated kernel each; every other node runs as it is. Launch order is record order, so
 * in-place writes, random offsets and views keep their strict-mode meaning.
 *
 * A value made inside a group is stored only if something outside the group can still see
 * it: a handle the user (or autograd, or a later node) holds, or a view of its storage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/stats.h"
#include "exec/dispatch.h"
#include "exec/fused.h"
#include "exec/window.h"
#include "graph/cse.h"
#include "graph/escape.h"
#include "graph/fused_ir.h"

typedef struct group {
    int first, count;          /* nodes[first .. first + count) */
    kn_fused_ir ir;
    kn_tensor *inputs[KN_FUSED_MAX_INPUTS];
    kn_tensor *outputs[KN_FUSED_MAX_OUTPUTS]; /* stored chain values, then a reduction's result */
    kn_fused_fn fn;
    const kn_tensor *space;    /* a tensor of the iteration space's shape */
} group;

static bool same_shape(const kn_tensor *a, const kn_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return true;
}

/* Whether the code generator can take this node as a step. */
static bool fusable(const kn_node *n, const kn_backend *b) {
    const kn_op_def *def = &kn_op_table[n->op];
    if (!b->kernels->compile_fused || def->kind != KN_KIND_ELEMENTWISE || !def->expr || (def->flags & KN_OPF_RANDOM)) return false;
    if (n->n_out != 1 || !(n->fresh_out & 1) || n->n_in < 1 || n->n_in > 3) return false;
    if (kn_numel(n->out[0]) == 0) return false;
    kn_dtype d = n->in[0]->dtype;
    for (int i = 0; i < n->n_in; i++)
        if (n->in[i]->dtype != d || !same_shape(n->in[i], n->out[0])) return false;
    if (n->op == KN_OP_copy) return kn_fused_cast_supported(d, n->out[0]->dtype);
    return true;
}

/* The value number of input t in group g (adding it), or -1 if the group is full. */
static int input_value(group *g, kn_tensor *t) {
    for (int i = 0; i < g->ir.n_in; i++)
        if (kn_tensor_same_view(g->inputs[i], t)) return i;
    if (g->ir.n_in == KN_FUSED_MAX_INPUTS) return -1;
    g->inputs[g->ir.n_in] = t;
    g->ir.in_dtype[g->ir.n_in] = t->dtype;
    return g->ir.n_in++;
}

static bool reduces(const group *g) { return g->ir.n_rows > 0; }

/* The node of step j: row values' nodes sit between the steps. */
static kn_node *step_node(const group *g, kn_node *const *nodes, int j) {
    int before = 0;
    while (before < g->ir.n_rows && g->ir.rows[before].after <= j) before++;
    return nodes[g->first + j + before];
}

/* The node of row value e. */
static kn_node *row_node(const group *g, kn_node *const *nodes, int e) {
    return nodes[g->first + g->ir.rows[e].after + e];
}

/* Values the kernel must store: the steps' escaping values and every row value. */
static int stored_count(const group *g, kn_node *const *nodes) {
    int stored = g->ir.n_rows;
    for (int j = 0; j < g->ir.n_steps; j++) stored += kn_value_escapes(nodes, g->first, g->count, step_node(g, nodes, j)->out[0]);
    return stored;
}

/* Whether t is row value r broadcast back over the row (trailing dims): what
 * `x - amax(x, -1, keepdim)` reads. */
static bool is_row_broadcast(const kn_tensor *r, const kn_tensor *t) {
    if (t->storage != r->storage || t->offset != r->offset || t->dtype != r->dtype) return false;
    int64_t row = kn_numel(t) / kn_numel(r), run = 1, expect = 1;
    int kept = t->ndim;
    while (kept > 0 && run < row) run *= t->shape[--kept];
    if (run != row) return false;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] == 1) continue;
        if (t->stride[d] != (d >= kept ? 0 : expect)) return false;
        if (d < kept) expect *= t->shape[d];
    }
    return true;
}

/* Tries to extend g with nodes[j]. Fails (g unchanged) if the node reads a value of the
 * group through another geometry, or a limit would be passed. */
static bool try_add(group *g, kn_node *const *nodes, int j) {
    kn_node *n = nodes[j];
    if (g->count && (!same_shape(n->out[0], g->space) || g->ir.n_steps == KN_FUSED_MAX_STEPS)) return false;
    group save = *g;
    if (!g->count) g->space = n->out[0];
    kn_fused_step *s = &g->ir.steps[g->ir.n_steps];
    *s = (kn_fused_step){
        .op = n->op, .n_arg = n->n_in, .in_dtype = n->in[0]->dtype, .out_dtype = n->out[0]->dtype, .output = -1};
    for (int a = 0; a < n->n_in; a++) {
        kn_tensor *t = n->in[a];
        int v = -1;
        for (int js = 0; js < g->ir.n_steps && v < 0; js++) {
            kn_tensor *made = step_node(g, nodes, js)->out[0];
            if (made->storage != t->storage) continue;
            if (!kn_tensor_same_view(made, t)) { /* a view of a value being made: not index-compatible */
                *g = save;
                return false;
            }
            v = -2 - js; /* step js's value, numbered once the inputs are final (finish) */
        }
        for (int e = 0; e < g->ir.n_rows && v == -1; e++) {
            const kn_tensor *r = row_node(g, nodes, e)->out[0];
            if (t->storage != r->storage) continue;
            if (!is_row_broadcast(r, t)) { /* a row value read some other way */
                *g = save;
                return false;
            }
            v = KN_FUSED_REDUCED + e;
        }
        if (v == -1) v = input_value(g, t);
        if (v == -1) {
            *g = save;
            return false;
        }
        s->arg[a] = v;
    }
    g->ir.n_steps++;
    g->count++;
    /* values still visible outside are stored: at most KN_FUSED_MAX_OUTPUTS of them */
    if (stored_count(g, nodes) > KN_FUSED_MAX_OUTPUTS) {
        *g = save;
        return false;
    }
    return true;
}

/* Whether nodes[j] reduces a value of g, or a tensor made before, over trailing dims in a way
 * the generator knows (sum, mean, amax, amin of f32/f64), over the same rows as g's earlier
 * reductions; if so it becomes g's next row value. */
static bool try_add_reduction(group *g, kn_node *const *nodes, int j) {
    kn_node *n = nodes[j];
    kn_tensor *x = n->in[0];
    if (!kn_fused_reduces(n->op) || n->n_in != 1 || n->n_out != 1 || !(n->fresh_out & 1) ||
        (x->dtype != KN_F32 && x->dtype != KN_F64) || n->out[0]->dtype != x->dtype ||
        kn_numel(x) == 0) /* an empty sum is the prebuilt kernel's */
        return false;
    kn_shape dims = KN_ATTRS(n, reduce)->dims; /* sorted; trailing means x's last dims.n dims */
    for (int k = 0; k < dims.n; k++)
        if (dims.v[k] != x->ndim - dims.n + k) return false;
    if (reduces(g)) { /* the same rows as the first reduction's */
        const kn_node *first = row_node(g, nodes, 0);
        if (!same_shape(x, g->space) || KN_ATTRS(first, reduce)->dims.n != dims.n) return false;
    }
    int v = -1;
    /* a step's value, numbered once the inputs are final (finish): an epilogue may add inputs */
    for (int js = 0; js < g->ir.n_steps && v == -1; js++)
        if (kn_tensor_same_view(step_node(g, nodes, js)->out[0], x)) v = -2 - js;
    if (v == -1 && g->count && !reduces(g)) return false; /* it reduces something else: the chain ends here */
    if (v == -1) v = input_value(g, x); /* a tensor made before, read with the group's geometry */
    if (v == -1) return false;
    if (!g->count) g->space = x;
    g->ir.rows[g->ir.n_rows++] = (struct kn_fused_row){.op = n->op, .n_arg = 1, .arg = {v}, .dtype = x->dtype,
                                                       .after = g->ir.n_steps};
    g->count++;
    return true;
}

/* Whether nodes[j] is elementwise over g's row values alone (`var + eps`, then `rsqrt` in a
 * hand-written LayerNorm), f32 or f64; if so it becomes g's next row value. */
static bool try_add_row_op(group *g, kn_node *const *nodes, const kn_backend *b, int j) {
    kn_node *n = nodes[j];
    const kn_op_def *def = &kn_op_table[n->op];
    kn_dtype d = n->out[0]->dtype;
    if (!reduces(g) || !b->kernels->compile_fused || def->kind != KN_KIND_ELEMENTWISE || !def->expr ||
        (def->flags & KN_OPF_RANDOM) || n->op == KN_OP_copy || n->n_out != 1 || !(n->fresh_out & 1) || n->n_in < 1 ||
        n->n_in > 3 || (d != KN_F32 && d != KN_F64))
        return false;
    struct kn_fused_row w = {.op = n->op, .n_arg = n->n_in, .dtype = d, .after = g->ir.n_steps};
    for (int a = 0; a < n->n_in; a++) {
        int found = -1;
        for (int e = 0; e < g->ir.n_rows && found < 0; e++)
            if (kn_tensor_same_view(row_node(g, nodes, e)->out[0], n->in[a])) found = e;
        if (found < 0 || n->in[a]->dtype != d || !same_shape(n->in[a], n->out[0])) return false;
        w.arg[a] = found;
    }
    g->ir.rows[g->ir.n_rows++] = w;
    g->count++;
    return true;
}

/* Tries to add nodes[j] as g's next row value (a reduction or a row op), within the limits. */
static bool try_add_row(group *g, kn_node *const *nodes, const kn_backend *b, int j) {
    if (!b->kernels->compile_fused || g->ir.n_rows == KN_FUSED_MAX_ROWS) return false;
    group save = *g;
    if (!try_add_reduction(g, nodes, j) && !try_add_row_op(g, nodes, b, j)) return false;
    if (stored_count(g, nodes) > KN_FUSED_MAX_OUTPUTS) {
        *g = save;
        return false;
    }
    return true;
}

/* Final value numbers (steps after the inputs), stores and the kernel IR's pattern. */
static bool finish(group *g, kn_node *const *nodes, kn_fused_launch *L) {
    kn_fused_ir *ir = &g->ir;
    for (int j = 0; j < ir->n_steps; j++)
        for (int a = 0; a < ir->steps[j].n_arg; a++)
            if (ir->steps[j].arg[a] <= -2) ir->steps[j].arg[a] = ir->n_in + (-2 - ir->steps[j].arg[a]);
    for (int e = 0; e < ir->n_rows; e++)
        if (kn_fused_reduces(ir->rows[e].op) && ir->rows[e].arg[0] <= -2) ir->rows[e].arg[0] = ir->n_in + (-2 - ir->rows[e].arg[0]);
    ir->n_out = 0;
    for (int j = 0; j < ir->n_steps; j++) {
        kn_tensor *t = step_node(g, nodes, j)->out[0];
        if (!kn_value_escapes(nodes, g->first, g->count, t)) continue;
        if (ir->n_out == KN_FUSED_MAX_OUTPUTS) return false;
        ir->steps[j].output = ir->n_out;
        g->outputs[ir->n_out++] = t;
    }
    if (!ir->n_out && !ir->n_rows) return false; /* nothing to store */
    kn_tensor *operands[KN_FUSED_MAX_OPERANDS];
    for (int k = 0; k < ir->n_out; k++) operands[k] = g->outputs[k];
    for (int i = 0; i < ir->n_in; i++) operands[ir->n_out + i] = g->inputs[i];
    kn_fused_geometry(ir, L, operands, ir->n_out + ir->n_in);
    L->n_steps = ir->n_steps;
    L->n_out = ir->n_out;
    L->n_rows = ir->n_rows;
    L->row = 0;
    if (reduces(g)) {
        const kn_node *r = row_node(g, nodes, 0);
        L->row = kn_numel(r->in[0]) / kn_numel(r->out[0]);
    }
    for (int e = 0; e < ir->n_rows; e++) {
        const kn_node *r = row_node(g, nodes, e);
        g->outputs[ir->n_out + e] = r->out[0];
        kn_op_scalars(r->op, &r->attrs, &L->attrs[2 * (KN_FUSED_MAX_STEPS + e)]);
    }
    for (int j = 0; j < ir->n_steps; j++) {
        const kn_node *n = step_node(g, nodes, j);
        kn_op_scalars(n->op, &n->attrs, &L->attrs[2 * j]);
    }
    /* "add+gelu", cut to fit; copied by hand, since snprintf was a fifth of a flush's host time */
    size_t len = 0;
    for (int j = 0; j < g->count; j++) {
        const char *name = kn_op_name(nodes[g->first + j]->op);
        if (j && len + 1 < sizeof L->desc) L->desc[len++] = '+';
        for (; *name && len + 1 < sizeof L->desc; name++) L->desc[len++] = *name;
    }
    L->desc[len] = '\0';
    return true;
}

/* One `fused` node in place of the group's nodes (which are freed); NULL (the nodes kept) when
 * there is no memory for it. */
static kn_node *group_node(group *g, kn_node *const *nodes, kn_fused_launch *L) {
    kn_node *f = kn_node_make(KN_OP_fused, g->ir.n_in);
    if (!f) {
        free(L);
        return NULL;
    }
    L->fn = g->fn;
    f->aux = L;
    f->stream = nodes[g->first]->stream;
    for (int i = 0; i < g->ir.n_in; i++) f->in[i] = kn_tensor_incref(g->inputs[i]);
    f->n_out = g->ir.n_out + g->ir.n_rows;
    for (int k = 0; k < f->n_out; k++) f->out[k] = kn_tensor_incref(g->outputs[k]);
    f->fresh_out = (uint8_t)((1u << f->n_out) - 1);
    for (int j = 0; j < g->count; j++) kn_node_free(nodes[g->first + j]);
    return f;
}

/* A node that reads no tensor (fill, arange, random draws: their Philox offsets were fixed when
 * recorded) may run before the elementwise ops recorded just before it, so that the scalar
 * operand `x * 3` makes does not split a chain. Reorders in place. */
static void hoist_creations(kn_node **nodes, kn_backend **backends, int n) {
    int run_start = 0;
    for (int i = 0; i < n; i++) {
        kn_node *c = nodes[i];
        if (fusable(c, backends[i])) continue;
        if (c->n_in == 0 && c->fresh_out == (1u << c->n_out) - 1 && run_start < i) {
            kn_backend *cb = backends[i];
            memmove(&nodes[run_start + 1], &nodes[run_start], (size_t)(i - run_start) * sizeof *nodes);
            memmove(&backends[run_start + 1], &backends[run_start], (size_t)(i - run_start) * sizeof *backends);
            nodes[run_start] = c;
            backends[run_start++] = cb;
            continue;
        }
        run_start = i + 1;
    }
}

static void warn_no_compile(void) {
    static bool warned;
    if (warned) return;
    warned = true;
    fprintf(stderr, "kiln: fused mode could not build kernels (%s); running those ops one by one\n", kn_last_error());
}

/* The source of the kernels the groups with a launch run (a flush is on one stream, so one
 * backend generates them all); irs is scratch for n_groups. */
static char *kernel_source(const group *groups, kn_fused_launch *const *launches, kn_backend *const *backends,
                           int n_groups, const kn_fused_ir **irs) {
    int m = 0;
    kn_backend *b = NULL;
    for (int k = 0; k < n_groups; k++)
        if (launches[k] && backends[groups[k].first]->kernels->fused_source) {
            b = backends[groups[k].first];
            irs[m++] = &groups[k].ir;
        }
    return m ? b->kernels->fused_source(irs, m) : NULL;
}

int kn_fused_rewrite(kn_node **nodes, kn_backend **backends, int n, kn_status *error, char **source) {
    const int merged = kn_cse(nodes, n);
    if (merged) {
        n = kn_nodes_compact(nodes, backends, n);
        kn_stat_add(KN_STAT_OPS_MERGED, merged);
    }
    hoist_creations(nodes, backends, n);
    group *groups = malloc((size_t)n * sizeof *groups);
    kn_fused_launch **launches = calloc((size_t)n, sizeof *launches);
    const kn_fused_ir **irs = malloc((size_t)n * sizeof *irs);
    kn_fused_fn *fns = malloc((size_t)n * sizeof *fns);
    kn_status first_error = KN_OK;
    int n_groups = 0;
    if (groups && launches && irs && fns) {
        for (int i = 0; i < n;) {
            group *g = &groups[n_groups];
            memset(g, 0, sizeof *g);
            g->first = i;
            for (;;) { /* steps, then row values and the steps after them */
                while (i < n && backends[i] == backends[g->first] && fusable(nodes[i], backends[i]) && try_add(g, nodes, i)) i++;
                if (i < n && (!g->count || backends[i] == backends[g->first]) && try_add_row(g, nodes, backends[i], i)) i++;
                else break;
            }
            if (g->count < 2 && !reduces(g)) { /* a lone elementwise op keeps its prebuilt kernel */
                i = g->first + 1;
                continue;
            }
            launches[n_groups] = calloc(1, sizeof **launches);
            if (!launches[n_groups] || !finish(g, nodes, launches[n_groups])) {
                free(launches[n_groups]);
                launches[n_groups] = NULL;
                continue;
            }
            kn_status st = kn_fused_note_variant(&g->ir);
            if (st != KN_OK) {
                if (first_error == KN_OK) first_error = st;
                free(launches[n_groups]);
                launches[n_groups] = NULL;
                continue;
            }
            n_groups++;
        }
        /* each backend builds every kernel it still lacks in one go (one translation unit) */
        for (int k = 0; k < n_groups; k++) {
            kn_backend *b = backends[groups[k].first];
            if (groups[k].fn || !launches[k]) continue;
            int m = 0;
            for (int q = k; q < n_groups; q++)
                if (launches[q] && backends[groups[q].first] == b) irs[m++] = &groups[q].ir;
            if (b->kernels->compile_fused(irs, m, fns) != KN_OK) warn_no_compile();
            m = 0;
            for (int q = k; q < n_groups; q++) {
                if (!launches[q] || backends[groups[q].first] != b) continue;
                groups[q].fn = fns[m++];
                if (!groups[q].fn) { /* it could not be built: its ops run one by one */
                    free(launches[q]);
                    launches[q] = NULL;
                }
            }
        }
    }
    if (source) *source = groups && launches && irs ? kernel_source(groups, launches, backends, n_groups, irs) : NULL;
    /* compacted in place: a group's node takes its first node's slot */
    int k = 0, kept = 0;
    for (int i = 0; i < n;) {
        while (k < n_groups && !launches[k]) k++;
        kn_node *f = NULL;
        if (k < n_groups && groups && groups[k].first == i && (f = group_node(&groups[k], nodes, launches[k]))) {
            backends[kept] = backends[i];
            nodes[kept++] = f;
            i += groups[k++].count;
            continue;
        }
        if (k < n_groups && groups && groups[k].first == i) k++; /* no node for it: its ops one by one */
        backends[kept] = backends[i];
        nodes[kept++] = nodes[i++];
    }
    free(groups);
    free(launches);
    free(irs);
    free(fns);
    *error = first_error;
    return kept;
}

kn_status kn_fused_schedule(kn_node **nodes, kn_backend **backends, int n) {
    kn_status st;
    n = kn_fused_rewrite(nodes, backends, n, &st, NULL);
    for (int i = 0; i < n; i++) kn_node_launch(nodes[i]);
    return st;
}
