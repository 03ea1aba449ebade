/* The remap kernel of pad, roll and repeat: out[o0, o1, ...] = x[m0(o0), m1(o1), ...], one index
 * map per dim (see defs/layout.def). The last dim's map is cut into runs, so the inner loop
 * is a memcpy, a fill or one strided move per run. */
#include <stdlib.h>

#include "backends/cpu/k_layout_move.h"
#include "core/error.h"
#include "core/thread_pool.h"

#define OUTSIDE INT64_MIN /* map entry of a constant-mode position that reads the fill value */

enum { MODE_CONSTANT, MODE_REFLECT, MODE_REPLICATE, MODE_CIRCULAR };

/* One run of the last dim: len outputs from o0 reading input offsets in0, in0 + step, ... */
typedef struct run {
    int64_t o0, len, in0, step;
    bool fill;
} run;

/* The input index that output index o of a dim reads, or -1 for the fill value. */
static int64_t source_index(int64_t o, int64_t before, int64_t size, int mode) {
    int64_t j = o - before;
    if (j >= 0 && j < size) return j;
    switch (mode) {
    case MODE_REFLECT: return j < 0 ? -j : 2 * (size - 1) - j;
    case MODE_REPLICATE: return j < 0 ? 0 : size - 1;
    case MODE_CIRCULAR: return ((j % size) + size) % size;
    default: return -1;
    }
}

static int64_t cut_runs(const int64_t *map, int64_t n, run *runs) {
    int64_t count = 0;
    for (int64_t o = 0; o < n;) {
        run r = {.o0 = o, .len = 1, .in0 = map[o], .step = 1, .fill = map[o] == OUTSIDE};
        if (r.fill) {
            while (o + r.len < n && map[o + r.len] == OUTSIDE) r.len++;
        } else if (o + 1 < n && map[o + 1] != OUTSIDE) {
            r.step = map[o + 1] - map[o];
            while (o + r.len < n && map[o + r.len] != OUTSIDE && map[o + r.len] - map[o + r.len - 1] == r.step) r.len++;
        }
        runs[count++] = r;
        o += r.len;
    }
    return count;
}

typedef struct remap_ctx {
    const kn_tensor *out;
    char *dst;
    const char *src;
    size_t es;
    int nd;
    int64_t last, n_runs;
    const int64_t *maps, *start; /* each dim's map, at start[d] */
    const run *runs;             /* the last dim's */
    const unsigned char *pattern;
} remap_ctx;

/* Output rows [r0, r1) (all dims but the last). */
static void remap_chunk(void *ctx, int64_t r0, int64_t r1, int chunk) {
    const remap_ctx *c = ctx;
    const int64_t *shape = c->out->shape, *maps = c->maps, *start = c->start, last = c->last;
    int nd = c->nd;
    size_t es = c->es;
    (void)chunk;
    int64_t idx[KN_MAX_DIMS] = {0};
    for (int64_t rem = r0, d = nd - 2; d >= 0; d--) idx[d] = rem % shape[d], rem /= shape[d];
    for (int64_t r = r0; r < r1; r++) {
        char *row = c->dst + (size_t)(r * last) * es;
        int64_t off = 0;
        bool outside = false;
        for (int d = 0; d < nd - 1; d++) {
            int64_t m = maps[start[d] + idx[d]];
            if (m == OUTSIDE) outside = true;
            else off += m;
        }
        if (outside) {
            kn_layout_fill(row, last, c->pattern, es);
        } else {
            for (int64_t k = 0; k < c->n_runs; k++) {
                const run *u = &c->runs[k];
                if (u->fill) kn_layout_fill(row + (size_t)u->o0 * es, u->len, c->pattern, es);
                else kn_layout_move(row + (size_t)u->o0 * es, c->src + (off + u->in0) * (int64_t)es, u->len, u->step, es);
            }
        }
        for (int d = nd - 2; d >= 0 && ++idx[d] == shape[d]; d--) idx[d] = 0;
    }
}

kn_status kn_cpu_remap_kernel(kn_node *n) {
    kn_tensor *x = n->in[0], *out = n->out[0];
    size_t es = kn_dtype_size(out->dtype);
    const kn_attrs_pad *a = KN_ATTRS(n, pad); /* roll's and repeat's are pad's (op_table.c) */
    int nd = out->ndim, mode = (int)a->mode;
    char *dst = kn_tensor_data(out);
    const char *src = kn_tensor_data(x);
    if (kn_numel(out) == 0) return KN_OK;
    if (nd == 0) {
        memcpy(dst, src, es);
        return KN_OK;
    }
    unsigned char pattern[8] = {0};
    kn_layout_encode(a->value, out->dtype, pattern);

    int64_t total = 0, start[KN_MAX_DIMS];
    for (int d = 0; d < nd; d++) start[d] = total, total += out->shape[d];
    int64_t last = out->shape[nd - 1];
    int64_t *maps = malloc(sizeof *maps * (size_t)total);
    run *runs = malloc(sizeof *runs * (size_t)last);
    if (!maps || !runs) {
        free(maps);
        free(runs);
        return kn_error(KN_ERR_OOM, "%s: out of host memory for the index maps", kn_op_name(n->op));
    }
    for (int d = 0; d < nd; d++)
        for (int64_t o = 0; o < out->shape[d]; o++) {
            int64_t j = source_index(o, a->before.v[d], x->shape[d], mode);
            maps[start[d] + o] = j < 0 ? OUTSIDE : j * x->stride[d];
        }
    int64_t n_runs = cut_runs(maps + start[nd - 1], last, runs);
    int64_t rows = kn_numel(out) / last;

    remap_ctx c = {.out = out, .dst = dst, .src = src, .es = es, .nd = nd, .last = last, .maps = maps, .start = start,
                   .runs = runs, .n_runs = n_runs, .pattern = pattern};
    kn_parallel_for(rows, last, remap_chunk, &c);
    free(maps);
    free(runs);
    return KN_OK;
}
