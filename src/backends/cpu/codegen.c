/* The CPU code generator of fused mode: kernel IR -> C source. Each step's math is the op
 * table's scalar expression (the defs lists) evaluated with the same scalar math the eager kernels
 * use (the jit prelude), in the same compute type, and every intermediate is rounded to its
 * dtype as the eager kernel's store would round it — so a fused chain gives the same bits as
 * the ops run one by one. */
#include "backends/cpu/codegen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/strbuf.h"

#define emit kn_strbuf_printf /* the many appends below */

/* Per dtype: storage type, compute type, load, store, attribute conversion. */
typedef struct ctype_info {
    const char *storage, *compute, *load, *store, *attr;
} ctype_info;

static const ctype_info ctypes[KN_DTYPE_COUNT] = {
    [KN_F32] = {"float", "float", "", "", "kn_attr_float"},
    [KN_F64] = {"double", "double", "", "", "kn_attr_double"},
    [KN_F16] = {"uint16_t", "float", "kn_half_to_f32_f16", "kn_half_from_f32_f16", "kn_attr_float"},
    [KN_BF16] = {"uint16_t", "float", "kn_half_to_f32_bf16", "kn_half_from_f32_bf16", "kn_attr_float"},
    [KN_I32] = {"int32_t", "int32_t", "", "", "kn_attr_int32"},
    [KN_I64] = {"int64_t", "int64_t", "", "", "kn_attr_int64"},
    [KN_BOOL] = {"uint8_t", "uint8_t", "", "KN_FK_BOOL", "kn_attr_bool"},
};

/* The converted value of `v` (a from-compute-type expression) as to's compute type, matching
 * the copy kernel (k_copy.c): floats to integers saturate, NaN gives 0. */
static void emit_cast(kn_strbuf *s, kn_dtype from, kn_dtype to, const char *v) {
    bool from_float = kn_dtype_is_float(from);
    if (from == to || ((to == KN_F16 || to == KN_BF16) && from != KN_F64)) {
        emit(s, "%s", v); /* f16/bf16 values are carried as float, rounded by the store */
    } else if (to == KN_BOOL) {
        emit(s, "(uint8_t)((%s) != 0)", v);
    } else if (to == KN_I32 || to == KN_I64) {
        if (from_float) emit(s, "%s((double)(%s))", ctypes[to].attr, v);
        else emit(s, "(%s)(%s)", ctypes[to].compute, v);
    } else {
        emit(s, "(%s)(%s)", ctypes[to].compute, v);
    }
}

#define TEXT_OF_(...) #__VA_ARGS__
#define TEXT_OF(...) TEXT_OF_(__VA_ARGS__)

/* A kernel runs its chunks on kiln's thread pool through the kn_fused_pool it is given, with
 * a kn_fk_ctx holding its launch arguments. A reduction cuts a long row into chunks of
 * KN_FK_CHUNK elements, whatever the pool's size. */
static const char *const preamble =
    "#include <stdatomic.h>\n"
    "#include <stdlib.h>\n"
    "#define KN_FK_BOOL(v) ((uint8_t)((v) != 0))\n"
    "#define KN_FK_MIN(a, b) ((a) < (b) ? (a) : (b))\n"
    "#define KN_FK_CHUNK 16384\n"
    "#define KN_FK_BLOCK 16\n"
    "#define KN_FK_ROWS " TEXT_OF(KN_FUSED_MAX_ROWS) "\n"
    "#define KN_FK_STASH 16384\n"
    "static _Thread_local double kn_fk_stash[KN_FK_STASH]; /* a short row's values kept for its last pass */\n"
    TEXT_OF(KN_FUSED_POOL_TYPES) "\n"
    "typedef struct kn_fk_ctx {\n"
    "    char *const *base;\n"
    "    const int64_t *size, *stride;\n"
    "    int64_t numel, row, r; /* r: the row whose chunks run */\n"
    "    const double *A;\n"
    "    double *part;          /* one partial result per chunk of row r */\n"
    "    double rv[KN_FK_ROWS]; /* row r's values so far */\n"
    "    atomic_int bad;\n"
    "} kn_fk_ctx;\n";

/* The entry's signature (kn_fused_fn), and its context. */
static void emit_entry(kn_strbuf *s, const char *name) {
    emit(s, "int %s(char *const *base, const int64_t *size, const int64_t *stride, int64_t numel, int64_t row, "
            "const double *A, const kn_fused_pool *pool) {\n", name);
    emit(s, "    kn_fk_ctx c = {.base = base, .size = size, .stride = stride, .numel = numel, .row = row, .A = A};\n");
}

/* The head of a chunk function (void *ctx, begin, end, chunk) of kernel `name`. */
static void emit_chunk_head(kn_strbuf *s, const char *name, const char *suffix) {
    emit(s, "static void %s_%s(void *ctx, int64_t begin, int64_t end, int chunk) {\n", name, suffix);
    emit(s, "    kn_fk_ctx *c = ctx;\n    const int64_t row = c->row;\n    int bad = 0;\n    (void)chunk, (void)row;\n");
}

static void emit_chunk_tail(kn_strbuf *s) {
    emit(s, "    if (bad) atomic_fetch_or(&c->bad, bad);\n}\n\n");
}

/* v<k>: the value of IR value k in its dtype's compute type, rounded to its dtype. */
static void emit_step(kn_strbuf *s, const kn_fused_ir *ir, int j) {
    const kn_fused_step *st = &ir->steps[j];
    const ctype_info *ci = &ctypes[st->in_dtype], *co = &ctypes[st->out_dtype];
    int v = ir->n_in + j;
    emit(s, "            %s v%d;\n", co->compute, v);
    if (st->op == KN_OP_copy) {
        char arg[16];
        if (st->arg[0] >= KN_FUSED_REDUCED) snprintf(arg, sizeof arg, "rv_%d", st->arg[0] - KN_FUSED_REDUCED);
        else snprintf(arg, sizeof arg, "v%d", st->arg[0]);
        emit(s, "            v%d = ", v);
        emit_cast(s, st->in_dtype, st->out_dtype, arg);
        emit(s, ";\n");
    } else {
        emit(s, "            {\n                typedef %s kn_ct;\n", ci->compute);
        emit(s, "                const kn_ct a = %s(A[%d]), b = %s(A[%d]);\n                (void)a, (void)b;\n",
             ci->attr, 2 * j, ci->attr, 2 * j + 1);
        static const char names[3] = {'x', 'y', 'z'};
        for (int a = 0; a < st->n_arg; a++) {
            if (st->arg[a] >= KN_FUSED_REDUCED)
                emit(s, "                kn_ct %c = (kn_ct)rv_%d;\n", names[a], st->arg[a] - KN_FUSED_REDUCED);
            else emit(s, "                kn_ct %c = v%d;\n", names[a], st->arg[a]);
        }
        const char *store = st->out_dtype == KN_BOOL ? "KN_FK_BOOL" : "";
        emit(s, "                v%d = %s(%s);\n            }\n", v, store, kn_op_table[st->op].expr);
    }
    /* f16/bf16 results round as the eager kernel's store rounds them */
    if (st->out_dtype == KN_F16 || st->out_dtype == KN_BF16)
        emit(s, "            v%d = %s(%s(v%d));\n", v, co->load, co->store, v);
}

/* How reduction e folds two partial results (values, lanes, chunks): sums add in double, as
 * the eager sum does; amax/amin keep the first NaN. */
static void emit_combine(kn_strbuf *s, kn_op_id op, const char *name, int e) {
    emit(s, "static inline double %s_combine%d(double a, double b) {\n", name, e);
    if (op == KN_OP_sum || op == KN_OP_mean) emit(s, "    return a + b;\n}\n\n");
    else emit(s, "    return (a != a || (b == b && b %s a)) ? a : b;\n}\n\n", op == KN_OP_amax ? "<=" : ">=");
}

static const char *reduce_init(kn_op_id op) {
    return op == KN_OP_amax ? "-INFINITY" : op == KN_OP_amin ? "INFINITY" : "0.0";
}

/* Row op e: its value from the earlier row values, rounded to its dtype, as a double. */
static void emit_row_op(kn_strbuf *s, const kn_fused_ir *ir, const char *name, int e) {
    const struct kn_fused_row *w = &ir->rows[e];
    const ctype_info *ct = &ctypes[w->dtype];
    int at = 2 * (KN_FUSED_MAX_STEPS + e);
    emit(s, "static inline double %s_row%d(const double *A, const double *rv) {\n    typedef %s kn_ct;\n", name, e, ct->compute);
    emit(s, "    const kn_ct a = %s(A[%d]), b = %s(A[%d]);\n    (void)a, (void)b;\n", ct->attr, at, ct->attr, at + 1);
    static const char names[3] = {'x', 'y', 'z'};
    for (int k = 0; k < w->n_arg; k++) emit(s, "    kn_ct %c = (kn_ct)rv[%d];\n", names[k], w->arg[k]);
    emit(s, "    return (double)(%s)(%s);\n}\n\n", ct->storage, kn_op_table[w->op].expr);
}

/* The statements that finish row value e of row `r` from `a` (a reduction's folded value) and
 * keep it, rounded to its dtype, in rv_var[e]. */
static void emit_row_store(kn_strbuf *s, const kn_fused_ir *ir, const char *name, int e, const char *indent,
                           const char *rv_var, const char *attrs) {
    const struct kn_fused_row *w = &ir->rows[e];
    const char *t = ctypes[w->dtype].storage;
    int out_at = ir->n_out + ir->n_in + e;
    if (!kn_fused_reduces(w->op))
        emit(s, "%s((%s *)base[%d])[r] = (%s)%s_row%d(%s, %s);\n", indent, t, out_at, t, name, e, attrs, rv_var);
    else if (w->op == KN_OP_mean)
        emit(s, "%s((%s *)base[%d])[r] = (%s)(a / (double)row);\n", indent, t, out_at, t);
    else
        emit(s, "%s((%s *)base[%d])[r] = (%s)a;\n", indent, t, out_at, t);
    emit(s, "%s%s[%d] = (double)((%s *)base[%d])[r];\n", indent, rv_var, e, t, out_at);
}

/* The entry of a kernel with row values. Many rows go across threads whole; a long row is cut
 * into fixed chunks whose partial results combine in chunk order, so the result never depends
 * on the thread count. `cost`: work per element. */
static void emit_rows_main(kn_strbuf *s, const kn_fused_ir *ir, const char *name, int cost, bool epilogue, int n_live) {
    const char *range = "c->r * row + k * KN_FK_CHUNK, c->r * row + KN_FK_MIN(row, (k + 1) * KN_FK_CHUNK)";

    /* the values of row r, each pass over the whole row */
    emit(s, "static int %s_values(char *const *base, const int64_t *size, const int64_t *stride, int64_t r, int64_t row, "
            "const double *A, double *rv, double *stash) {\n    int bad = 0;\n", name);
    for (int e = 0; e < ir->n_rows; e++) {
        if (kn_fused_reduces(ir->rows[e].op)) {
            emit(s, "    {\n        double a = %s;\n", reduce_init(ir->rows[e].op));
            emit(s, "        bad |= %s_run%d(base, size, stride, r * row, (r + 1) * row, A, &a, rv, stash);\n", name, e);
        } else {
            emit(s, "    {\n");
        }
        emit_row_store(s, ir, name, e, "        ", "rv", "A");
        emit(s, "    }\n");
    }
    emit(s, "    return bad;\n}\n\n");

    /* whole rows [begin, end) */
    emit_chunk_head(s, name, "rows");
    emit(s, "    double *stash = %d && row * %d <= KN_FK_STASH ? kn_fk_stash : 0;\n", n_live, n_live);
    emit(s, "    for (int64_t r = begin; r < end; r++) {\n        double rv[KN_FK_ROWS];\n");
    emit(s, "        bad |= %s_values(c->base, c->size, c->stride, r, row, c->A, rv, stash);\n", name);
    if (epilogue)
        emit(s, "        bad |= (stash ? %s_epi_stashed : %s_epi)(c->base, c->size, c->stride, r * row, (r + 1) * row, c->A, 0, rv, "
                "stash);\n", name, name);
    emit(s, "    }\n");
    emit_chunk_tail(s);
    /* chunks [begin, end) of row c->r, each into its partial result, for each reduction */
    for (int e = 0; e < ir->n_rows; e++) {
        if (!kn_fused_reduces(ir->rows[e].op)) continue;
        char suffix[16];
        snprintf(suffix, sizeof suffix, "part%d", e);
        emit_chunk_head(s, name, suffix);
        emit(s, "    for (int64_t k = begin; k < end; k++) {\n        c->part[k] = %s;\n", reduce_init(ir->rows[e].op));
        emit(s, "        bad |= %s_run%d(c->base, c->size, c->stride, %s, c->A, &c->part[k], c->rv, 0);\n    }\n", name, e, range);
        emit_chunk_tail(s);
    }
    if (epilogue) {
        emit_chunk_head(s, name, "epis");
        emit(s, "    for (int64_t k = begin; k < end; k++)\n");
        emit(s, "        bad |= %s_epi(c->base, c->size, c->stride, %s, c->A, 0, c->rv, 0);\n", name, range);
        emit_chunk_tail(s);
    }

    emit_entry(s, name);
    emit(s, "    const int64_t rows = numel / row;\n");
    emit(s, "    if (row <= KN_FK_CHUNK) {\n");
    emit(s, "        pool->run(rows, pool->chunks(rows, row * %d), %s_rows, &c);\n", cost, name);
    emit(s, "        return atomic_load(&c.bad);\n    }\n");
    emit(s, "    const int64_t chunks = (row + KN_FK_CHUNK - 1) / KN_FK_CHUNK;\n");
    emit(s, "    const int pc = pool->chunks(chunks, (int64_t)KN_FK_CHUNK * %d);\n", cost);
    emit(s, "    double *part = malloc((size_t)chunks * sizeof *part);\n    if (!part) return 2;\n    c.part = part;\n");
    emit(s, "    for (int64_t r = 0; r < rows; r++) {\n        c.r = r;\n");
    for (int e = 0; e < ir->n_rows; e++) {
        emit(s, "        {\n");
        if (kn_fused_reduces(ir->rows[e].op)) {
            emit(s, "            pool->run(chunks, pc, %s_part%d, &c);\n            double a = part[0];\n", name, e);
            emit(s, "            for (int64_t k = 1; k < chunks; k++) a = %s_combine%d(a, part[k]);\n", name, e);
        }
        emit_row_store(s, ir, name, e, "            ", "c.rv", "A");
        emit(s, "        }\n");
    }
    if (epilogue) emit(s, "        pool->run(chunks, pc, %s_epis, &c);\n", name);
    emit(s, "    }\n    free(part);\n    return atomic_load(&c.bad);\n}\n\n");
}

/* One pass over a flat range [begin, end) (a row, or a chunk of one, or a block): the loads,
 * steps [first, n), the stores of steps [store_from, n) and, for row value `fold` (-1: none),
 * the fold of its reduction's value into *acc. Steps read the row's first `known` values,
 * copied from rv into locals (which no store can alias, so the loop keeps them in registers
 * and vectorizes). A stash (when the caller passes one: a whole short row) carries the values
 * `stash` names from the last reduction's pass, which writes them, to the pass after it, which
 * reads them (first > 0) instead of computing steps [0, first) again: the exp of a softmax. */
typedef struct pass_spec {
    const char *suffix;
    int first, n, store_from, fold, known;
    const int *stash; /* value numbers */
    int n_stash;
} pass_spec;

static void emit_pass(kn_strbuf *s, const kn_fused_ir *ir, const kn_dtype *odt, const char *name, const pass_spec *ps) {
    int nop = ir->n_out + ir->n_in, r = ir->rank, last = r - 1, fold = ps->fold;
    emit(s, "static int %s_%s(char *const *base, const int64_t *size, const int64_t *stride, int64_t begin, "
            "int64_t end, const double *A, double *acc, const double *rv, double *stash) {\n", name, ps->suffix);
    emit(s, "    (void)acc, (void)rv, (void)stash;\n    const int64_t span = end - begin;\n    (void)span;\n");
    for (int e = 0; e < ps->known; e++) emit(s, "    const double rv_%d = rv[%d];\n    (void)rv_%d;\n", e, e, e);
    /* A reduction folds blocks of the chain's values into 8 lanes, so that the chain's loop
     * has no loop-carried dependency and vectorizes. */
    if (fold >= 0) {
        const char *init = reduce_init(ir->rows[fold].op);
        emit(s, "    double lane[8] = {%s, %s, %s, %s, %s, %s, %s, %s};\n", init, init, init, init, init, init, init, init);
    }
    emit(s, "    int bad = 0;\n    int64_t idx[%d];\n", r);
    if (r == 1) emit(s, "    idx[0] = begin;\n"); /* no divisions: a short row's passes add up */
    else emit(s, "    int64_t rem = begin;\n    for (int d = %d; d >= 0; d--) { idx[d] = rem %% size[d]; rem /= size[d]; }\n", last);
    for (int k = 0; k < nop; k++)
        if (ir->inner[k] == KN_FUSED_INNER_STRIDED) emit(s, "    const int64_t s%d = stride[%d];\n", k, k * KN_MAX_DIMS + last);
    emit(s, "    for (int64_t pos = begin; pos < end;) {\n");
    emit(s, "        int64_t len = KN_FK_MIN(size[%d] - idx[%d], end - pos);\n", last, last);
    for (int k = 0; k < nop; k++) {
        emit(s, "        %s%s *restrict p%d = (%s%s *)base[%d]", k < ir->n_out ? "" : "const ", ctypes[odt[k]].storage, k,
             k < ir->n_out ? "" : "const ", ctypes[odt[k]].storage, k);
        for (int d = 0; d < last; d++)
            if (!(ir->outer_zero[k] & (1u << d))) emit(s, " + idx[%d] * stride[%d]", d, k * KN_MAX_DIMS + d);
        if (ir->inner[k] != KN_FUSED_INNER_ZERO) emit(s, " + idx[%d] * stride[%d]", last, k * KN_MAX_DIMS + last);
        emit(s, ";\n        (void)p%d;\n", k);
    }
    for (int l = 0; l < ps->n_stash; l++) { /* value l's slice of the stash, in its compute type */
        const char *ct = ctypes[ir->steps[ps->stash[l] - ir->n_in].out_dtype].compute;
        emit(s, "        %s *restrict at%d = stash ? (%s *)(stash + %d * span) + (pos - begin) : 0;\n        (void)at%d;\n", ct, l,
             ct, l, l);
    }
    if (fold >= 0)
        emit(s, "        for (int64_t i0 = 0; i0 < len; i0 += 256) {\n        const int64_t i1 = KN_FK_MIN(len, i0 + 256);\n"
                "        double t[256];\n        for (int64_t i = i0; i < i1; i++) {\n");
    else
        emit(s, "        for (int64_t i = 0; i < len; i++) {\n");
    for (int i = 0; i < ir->n_in; i++) {
        int k = ir->n_out + i;
        const char *at = ir->inner[k] == KN_FUSED_INNER_UNIT ? "i" : ir->inner[k] == KN_FUSED_INNER_ZERO ? "0" : NULL;
        char idx[32];
        if (at) snprintf(idx, sizeof idx, "%s", at);
        else snprintf(idx, sizeof idx, "i * s%d", k);
        emit(s, "            const %s v%d = %s(p%d[%s]);\n", ctypes[odt[k]].compute, i, ctypes[odt[k]].load, k, idx);
    }
    if (ps->first > 0) /* the stashed values, as the earlier pass computed them */
        for (int l = 0; l < ps->n_stash; l++)
            emit(s, "            const %s v%d = at%d[i];\n", ctypes[ir->steps[ps->stash[l] - ir->n_in].out_dtype].compute,
                 ps->stash[l], l);
    for (int j = ps->first; j < ps->n; j++) emit_step(s, ir, j);
    if (ps->first == 0 && ps->n_stash) {
        emit(s, "            if (at0) {\n");
        for (int l = 0; l < ps->n_stash; l++) emit(s, "                at%d[i] = v%d;\n", l, ps->stash[l]);
        emit(s, "            }\n");
    }
    for (int j = ps->store_from; j < ps->n; j++) {
        int k = ir->steps[j].output;
        if (k < 0) continue;
        const char *at = ir->inner[k] == KN_FUSED_INNER_UNIT ? "i" : ir->inner[k] == KN_FUSED_INNER_ZERO ? "0" : NULL;
        char idx[32];
        if (at) snprintf(idx, sizeof idx, "%s", at);
        else snprintf(idx, sizeof idx, "i * s%d", k);
        emit(s, "            p%d[%s] = %s(v%d);\n", k, idx, ctypes[odt[k]].store, ir->n_in + j);
    }
    if (fold >= 0) {
        emit(s, "            t[i - i0] = (double)v%d;\n        }\n", ir->rows[fold].arg[0]);
        emit(s, "        int64_t j = 0;\n        for (; j + 8 <= i1 - i0; j += 8)\n"
                "            for (int l = 0; l < 8; l++) lane[l] = %s_combine%d(lane[l], t[j + l]);\n", name, fold);
        emit(s, "        for (; j < i1 - i0; j++) lane[j & 7] = %s_combine%d(lane[j & 7], t[j]);\n", name, fold);
    }
    emit(s, "        }\n        pos += len;\n        idx[%d] += len;\n", last);
    emit(s, "        for (int d = %d; d > 0 && idx[d] == size[d]; d--) { idx[d] = 0; idx[d - 1]++; }\n", last);
    emit(s, "    }\n");
    if (fold >= 0) emit(s, "    for (int l = 0; l < 8; l++) *acc = %s_combine%d(*acc, lane[l]);\n", name, fold);
    emit(s, "    return bad;\n}\n\n");
}

/* The values of steps before `first` that steps from `first` on read (value numbers). */
static int live_into(const kn_fused_ir *ir, int first, int *live) {
    int n = 0;
    for (int j = first; j < ir->n_steps; j++)
        for (int a = 0; a < ir->steps[j].n_arg; a++) {
            int v = ir->steps[j].arg[a];
            if (v < ir->n_in || v >= ir->n_in + first) continue;
            bool seen = false;
            for (int q = 0; q < n && !seen; q++) seen = live[q] == v;
            if (!seen) live[n++] = v;
        }
    return n;
}

static void emit_kernel(kn_strbuf *s, const kn_fused_ir *ir, const char *name) {
    /* Operand k's storage type: outputs first, then inputs. */
    kn_dtype odt[KN_FUSED_MAX_OPERANDS];
    for (int j = 0; j < ir->n_steps; j++)
        if (ir->steps[j].output >= 0) odt[ir->steps[j].output] = ir->steps[j].out_dtype;
    for (int i = 0; i < ir->n_in; i++) odt[ir->n_out + i] = ir->in_dtype[i];

    int cost = ir->n_steps > 0 ? ir->n_steps : 1; /* work per element */
    if (ir->n_rows) {
        /* one pass per reduction, storing the steps no earlier pass stored; the rest after,
         * from the last reduction pass's stash when the row is short */
        const int epi_from = kn_fused_epilogue_start(ir);
        int live[KN_FUSED_MAX_STEPS];
        const int n_live = epi_from < ir->n_steps ? live_into(ir, epi_from, live) : 0;
        int stored = 0;
        for (int e = 0; e < ir->n_rows; e++) {
            const struct kn_fused_row *w = &ir->rows[e];
            if (!kn_fused_reduces(w->op)) {
                emit_row_op(s, ir, name, e);
                continue;
            }
            char suffix[16];
            snprintf(suffix, sizeof suffix, "run%d", e);
            emit_combine(s, w->op, name, e);
            bool last = w->after == epi_from;
            emit_pass(s, ir, odt, name, &(pass_spec){suffix, 0, w->after, stored, e, e, live, last ? n_live : 0});
            stored = w->after;
        }
        bool epilogue = stored < ir->n_steps;
        if (epilogue) {
            emit_pass(s, ir, odt, name, &(pass_spec){"epi", 0, ir->n_steps, stored, -1, ir->n_rows, live, 0});
            emit_pass(s, ir, odt, name, &(pass_spec){"epi_stashed", epi_from, ir->n_steps, stored, -1, ir->n_rows, live, n_live});
        }
        emit_rows_main(s, ir, name, cost, epilogue, n_live);
        return;
    }

    emit_pass(s, ir, odt, name, &(pass_spec){"run", 0, ir->n_steps, 0, -1, 0, NULL, 0});
    /* Blocks of KN_FK_BLOCK elements across the pool: chunks keep vector loops whole. */
    emit_chunk_head(s, name, "blocks");
    emit(s, "    bad = %s_run(c->base, c->size, c->stride, begin * KN_FK_BLOCK, KN_FK_MIN(c->numel, end * KN_FK_BLOCK), "
            "c->A, 0, 0, 0);\n", name);
    emit_chunk_tail(s);
    emit_entry(s, name);
    emit(s, "    const int64_t blocks = (numel + KN_FK_BLOCK - 1) / KN_FK_BLOCK;\n");
    emit(s, "    pool->run(blocks, pool->chunks(blocks, KN_FK_BLOCK * %d), %s_blocks, &c);\n", cost, name);
    emit(s, "    return atomic_load(&c.bad);\n}\n\n");
}

char *kn_cpu_codegen_source(const kn_fused_ir *const *irs, const char *const *names, int n) {
    kn_strbuf s = {0};
    emit(&s, "%s\n%s\n", kn_jit_prelude, preamble);
    for (int i = 0; i < n; i++) {
        char key[4096];
        kn_fused_key_text(irs[i], key, sizeof key);
        emit(&s, "/* %s */\n", key); /* the canonical IR, for a reader of the cache */
        emit_kernel(&s, irs[i], names[i]);
    }
    if (s.failed) {
        free(s.buf);
        kn_error(KN_ERR_OOM, "fused: out of host memory generating kernel source");
        return NULL;
    }
    return s.buf;
}
