/* Fused eager mode (issue 4) against strict: elementwise chains, GEMM epilogues, norms and
 * softmax written from primitives, and optimizer steps, each block timed in every mode named
 * on the command line (bench/fused_torch.py runs the same blocks in PyTorch eager).
 *
 *     bench_fused [--modes strict,fused] [--iters N] [--warmup N] [--threads N]
 *                 [--blocks a,b,c] [--json FILE] [--list]
 *
 * Every iteration is one scope ending with kn_sync(), so in fused mode the lazy window is
 * realized inside the timed region. Each block computes its result inside an inner scope
 * and keeps only the result, as model code does (STYLE.md): intermediates are dead before
 * the sync, which is what lets fused mode skip materializing them. A mode the build refuses
 * prints "skipped: <error>"; a mode that fails on a block prints "failed: <error>" and the
 * run goes on. Before timing, one iteration from a fixed state is compared with the first
 * mode's result (max |diff| / max |reference|); a mismatch makes the exit status 1. */
#include "bench_common.h"

#include <math.h>
#include <stdbool.h>

#define SEED 20261204u
#define CHECK_TOL 1e-4 /* relative to the reference's largest magnitude */

/* Hyperparameters of the AdamW blocks (nanoGPT's, as `kiln train gpt2` uses). */
#define LR 6e-4
#define BETA1 0.9
#define BETA2 0.95
#define ADAM_EPS 1e-8
#define WEIGHT_DECAY 0.1

typedef struct fused_ctx {
    kn_tensor *x, *w, *b, *h, *ln_w, *ln_b;   /* the activation blocks' inputs */
    kn_tensor *p, *g, *m, *v;                 /* one parameter with its grad and moments */
    int64_t step;                             /* its updates so far */
    int n_params;                             /* GPT-2 124M: params, their fixed grads */
    kn_tensor **params, **grads;
    kn_optimizer *opt;
} fused_ctx;

typedef struct block_def {
    const char *name, *shape, *what;
    bool big;                          /* 100+ MB of state: fewer default iterations */
    void (*setup)(fused_ctx *c);       /* inputs, made in strict mode inside the block's scope */
    void (*reset)(fused_ctx *c);       /* state back to the start before the check; NULL: stateless */
    kn_tensor *(*run)(fused_ctx *c);   /* one iteration: the tensor compared across modes, or NULL on error */
    void (*teardown)(fused_ctx *c);    /* what is not a scope's (the optimizer); may be NULL */
} block_def;

/* ---- the activation blocks ---------------------------------------------------------------- */

static kn_tensor *randn(kn_shape s) { return bench_check(kn_randn(s, KN_F32), "randn"); }
/* Uniform in [-r, r): 3-4x faster to draw than normals, for the 100+ MB blocks. */
static kn_tensor *uniform(kn_shape s, double r) { return bench_check(kn_uniform(s, -r, r, KN_F32), "uniform"); }

static void setup_mlp(fused_ctx *c) {
    c->x = randn(KN_SHAPE(512, 768));
    c->w = bench_check(kn_mul_scalar(randn(KN_SHAPE(768, 3072)), 0.02), "mul_scalar");
    c->b = randn(KN_SHAPE(3072));
}

/* gelu(x @ w + b): the GEMM with a bias + GELU epilogue (GPT-2's c_fc; gelu_new is the tanh form). */
static kn_tensor *run_gelu_mlp(fused_ctx *c) {
    kn_scope_push();
    return kn_scope_pop_keep(kn_gelu_tanh(kn_add(kn_matmul(c->x, c->w), c->b)));
}

static void setup_bias(fused_ctx *c) {
    c->x = randn(KN_SHAPE(512, 3072));
    c->h = randn(KN_SHAPE(512, 3072));
    c->b = randn(KN_SHAPE(3072));
}

/* The epilogue alone, on the GEMM's output: fusion without the GEMM. */
static kn_tensor *run_gelu_bias(fused_ctx *c) {
    kn_scope_push();
    return kn_scope_pop_keep(kn_gelu_tanh(kn_add(c->h, c->b)));
}

/* x + gelu(h + b) * 0.5: a residual branch's tail, one chain of four elementwise ops. */
static kn_tensor *run_residual_gelu(fused_ctx *c) {
    kn_scope_push();
    return kn_scope_pop_keep(kn_add(c->x, kn_mul_scalar(kn_gelu_tanh(kn_add(c->h, c->b)), 0.5)));
}

static void setup_norm(fused_ctx *c) {
    c->x = randn(KN_SHAPE(2048, 768));
    c->ln_w = randn(KN_SHAPE(768));
    c->ln_b = randn(KN_SHAPE(768));
}

/* LayerNorm as a user writes it by hand: two reductions with elementwise prologues and an
 * elementwise tail. */
static kn_tensor *run_layernorm_prims(fused_ctx *c) {
    kn_scope_push();
    kn_tensor *xc = kn_sub(c->x, kn_mean(c->x, KN_DIMS(-1), true));
    kn_tensor *var = kn_mean(kn_mul(xc, xc), KN_DIMS(-1), true);
    kn_tensor *y = kn_mul(xc, kn_rsqrt(kn_add_scalar(var, 1e-5)));
    return kn_scope_pop_keep(kn_add(kn_mul(y, c->ln_w), c->ln_b));
}

static kn_tensor *run_layer_norm(fused_ctx *c) {
    return kn_layer_norm(c->x, KN_SHAPE(768), c->ln_w, c->ln_b, 1e-5);
}

static void setup_scores(fused_ctx *c) { c->x = randn(KN_SHAPE(768, 64, 64)); }

/* Softmax over attention scores [B*H, T, T] as a user writes it: stable max, exp, sum, divide. */
static kn_tensor *run_softmax_prims(fused_ctx *c) {
    kn_scope_push();
    kn_tensor *e = kn_exp(kn_sub(c->x, kn_amax(c->x, KN_DIMS(-1), true)));
    return kn_scope_pop_keep(kn_div(e, kn_sum(e, KN_DIMS(-1), true)));
}

static kn_tensor *run_softmax(fused_ctx *c) { return kn_softmax(c->x, -1); }

/* ---- AdamW on one large parameter ----------------------------------------------------------- */

/* The largest GPT-2 tensor, the token embedding [50257, 768]. */
static void setup_one_param(fused_ctx *c) {
    kn_shape s = KN_SHAPE(50257, 768);
    c->p = bench_check(kn_empty(s, KN_F32), "empty");
    c->g = uniform(s, 1e-2);
    c->m = bench_check(kn_empty(s, KN_F32), "empty");
    c->v = bench_check(kn_empty(s, KN_F32), "empty");
}

/* Every mode starts the check from the same parameter and zero moments. */
static void reset_one_param(fused_ctx *c) {
    kn_scope_push();
    kn_manual_seed(SEED + 1);
    kn_copy_(c->p, kn_uniform(kn_shape_of(c->p), -0.05, 0.05, KN_F32));
    kn_copy_(c->m, kn_zeros_like(c->m));
    kn_copy_(c->v, kn_zeros_like(c->v));
    kn_scope_pop();
    c->step = 0;
}

/* torch.optim.AdamW's update written from primitives: 15 elementwise ops and 3 copies back,
 * what one fused kernel reading p, g, m, v and writing p, m, v should replace. The
 * bias corrections change every step (scalars that must not force recompiles). */
static kn_tensor *run_adamw_prims(fused_ctx *c) {
    c->step++;
    double bc1 = 1 - pow(BETA1, (double)c->step), bc2 = 1 - pow(BETA2, (double)c->step);
    kn_scope_push();
    kn_tensor *m = kn_add(kn_mul_scalar(c->m, BETA1), kn_mul_scalar(c->g, 1 - BETA1));
    kn_tensor *v = kn_add(kn_mul_scalar(c->v, BETA2), kn_mul_scalar(kn_mul(c->g, c->g), 1 - BETA2));
    kn_tensor *denom = kn_add_scalar(kn_sqrt(kn_div_scalar(v, bc2)), ADAM_EPS);
    kn_tensor *update = kn_div(kn_div_scalar(m, bc1), denom);
    kn_tensor *p = kn_sub(kn_mul_scalar(c->p, 1 - LR * WEIGHT_DECAY), kn_mul_scalar(update, LR));
    bool ok = kn_copy_(c->m, m) == KN_OK && kn_copy_(c->v, v) == KN_OK && kn_copy_(c->p, p) == KN_OK;
    kn_scope_pop();
    return ok ? c->p : NULL;
}

/* The same update through kiln's own op (one kernel in every mode): the reference. */
static kn_tensor *run_adamw_update(fused_ctx *c) {
    c->step++;
    kn_status st = kn_adamw_update(c->p, c->g, c->m, c->v, LR, BETA1, BETA2, ADAM_EPS, WEIGHT_DECAY, c->step);
    return st == KN_OK ? c->p : NULL;
}

/* ---- GPT-2 124M: AdamW and gradient clipping over all 148 parameters --------------------------- */

/* GPT-2 small's parameters in the model's order (models/gpt2): 124,439,808 values. */
static int gpt2_124m_shapes(kn_shape *out) {
    const int64_t C = 768, L = 12, V = 50257, P = 1024;
    int n = 0;
    out[n++] = KN_SHAPE(V, C);
    out[n++] = KN_SHAPE(P, C);
    for (int64_t l = 0; l < L; l++) {
        out[n++] = KN_SHAPE(C), out[n++] = KN_SHAPE(C);            /* ln_1 */
        out[n++] = KN_SHAPE(C, 3 * C), out[n++] = KN_SHAPE(3 * C); /* c_attn */
        out[n++] = KN_SHAPE(C, C), out[n++] = KN_SHAPE(C);         /* attn.c_proj */
        out[n++] = KN_SHAPE(C), out[n++] = KN_SHAPE(C);            /* ln_2 */
        out[n++] = KN_SHAPE(C, 4 * C), out[n++] = KN_SHAPE(4 * C); /* c_fc */
        out[n++] = KN_SHAPE(4 * C, C), out[n++] = KN_SHAPE(C);     /* mlp.c_proj */
    }
    out[n++] = KN_SHAPE(C), out[n++] = KN_SHAPE(C); /* ln_f */
    return n;
}

static void fill_params(fused_ctx *c) {
    kn_no_grad_push();
    kn_manual_seed(SEED + 2);
    for (int k = 0; k < c->n_params; k++) {
        kn_scope_push();
        kn_copy_(c->params[k], kn_uniform(kn_shape_of(c->params[k]), -0.05, 0.05, KN_F32));
        kn_scope_pop();
    }
    kn_no_grad_pop();
}

static void setup_gpt2_params(fused_ctx *c) {
    kn_shape shapes[160];
    c->n_params = gpt2_124m_shapes(shapes);
    c->params = calloc((size_t)c->n_params, sizeof *c->params);
    c->grads = calloc((size_t)c->n_params, sizeof *c->grads);
    if (!c->params || !c->grads) {
        fprintf(stderr, "bench: out of host memory\n");
        exit(1);
    }
    for (int k = 0; k < c->n_params; k++) {
        c->params[k] = bench_check(kn_requires_grad(bench_check(kn_zeros(shapes[k], KN_F32), "zeros"), true),
                                   "requires_grad");
        c->grads[k] = uniform(shapes[k], 1e-2);
        if (kn_set_grad(c->params[k], c->grads[k]) != KN_OK) bench_check(NULL, "set_grad");
    }
}

static void free_gpt2_params(fused_ctx *c) {
    kn_optimizer_free(c->opt);
    c->opt = NULL;
    free(c->params);
    free(c->grads);
    c->params = c->grads = NULL;
}

/* Fresh parameters and a fresh optimizer (zero moments, step 0) for the check. */
static void reset_adamw_124m(fused_ctx *c) {
    fill_params(c);
    kn_optimizer_free(c->opt);
    kn_param_group g = kn_adamw_group(c->params, c->n_params, LR, WEIGHT_DECAY);
    g.beta1 = BETA1, g.beta2 = BETA2, g.eps = ADAM_EPS;
    c->opt = kn_adamw_new(&g, 1);
    if (!c->opt) bench_check(NULL, "adamw_new");
}

static kn_tensor *run_adamw_124m(fused_ctx *c) {
    return kn_optimizer_step(c->opt) == KN_OK ? c->params[0] : NULL;
}

/* The fixed grads go back every iteration (handles only, no copy), so that each one scales:
 * clipping already-clipped grads would stop at the norm. */
static kn_tensor *run_clip_124m(fused_ctx *c) {
    for (int k = 0; k < c->n_params; k++)
        if (kn_set_grad(c->params[k], c->grads[k]) != KN_OK) return NULL;
    if (kn_clip_grad_norm(c->params, c->n_params, 1.0, NULL) != KN_OK) return NULL;
    return kn_grad(c->params[0]);
}

static const block_def blocks[] = {
    {"gelu_mlp", "512x768 @ 768x3072 + 3072", "gelu_tanh(x @ w + b): GEMM + bias/GELU epilogue", false, setup_mlp,
     NULL, run_gelu_mlp, NULL},
    {"gelu_bias", "512x3072 + 3072", "gelu_tanh(h + b): the epilogue alone", false, setup_bias, NULL, run_gelu_bias,
     NULL},
    {"residual_gelu", "512x3072 + 3072", "x + gelu_tanh(h + b) * 0.5", false, setup_bias, NULL, run_residual_gelu,
     NULL},
    {"layernorm_prims", "2048x768", "LayerNorm from mean/sub/mul/rsqrt (9 ops)", false, setup_norm, NULL,
     run_layernorm_prims, NULL},
    {"layer_norm", "2048x768", "kn_layer_norm (built-in, reference)", false, setup_norm, NULL, run_layer_norm, NULL},
    {"softmax_prims", "768x64x64 dim -1", "softmax from amax/sub/exp/sum/div", false, setup_scores, NULL,
     run_softmax_prims, NULL},
    {"softmax", "768x64x64 dim -1", "kn_softmax (built-in, reference)", false, setup_scores, NULL, run_softmax, NULL},
    {"adamw_prims", "50257x768", "AdamW step from primitives on one tensor (wte)", true, setup_one_param,
     reset_one_param, run_adamw_prims, NULL},
    {"adamw_update", "50257x768", "kn_adamw_update on the same tensor (built-in, reference)", true,
     setup_one_param, reset_one_param, run_adamw_update, NULL},
    {"adamw_124m", "GPT-2 124M, 148 tensors", "kn_optimizer_step, AdamW over GPT-2 124M", true, setup_gpt2_params,
     reset_adamw_124m, run_adamw_124m, free_gpt2_params},
    {"clip_grad_norm_124m", "GPT-2 124M, 148 tensors", "kn_clip_grad_norm(1.0) over GPT-2 124M grads", true,
     setup_gpt2_params, NULL, run_clip_124m, free_gpt2_params},
};
#define N_BLOCKS ((int)(sizeof blocks / sizeof *blocks))

/* ---- the driver ------------------------------------------------------------------------------ */

typedef struct run_result {
    const block_def *block;
    kn_mode mode;
    const char *outcome;   /* "ok", "skipped", "failed" */
    char error[256];
    int iters;
    double median_ms, first_ms;
    double kernels_per_iter, fused_kernels_per_iter, ops_fused_per_iter;
    int64_t compiles, compiles_timed, cache_disk_hits;
    double compile_seconds;
    double check_rel;      /* max |diff| / max |reference|; -1: this mode is the reference; NaN: none */
    bool mismatch;
} run_result;

static run_result results[N_BLOCKS * KN_MODE_COUNT];
static int n_results;

typedef struct options {
    kn_mode modes[KN_MODE_COUNT];
    int n_modes;
    bool selected[N_BLOCKS];
    int iters, warmup, threads;
    const char *json_path;
} options;

static void usage(FILE *f) {
    fprintf(f, "usage: bench_fused [--modes strict,fused] [--iters N] [--warmup N] [--threads N]\n"
               "                   [--blocks a,b,c] [--json FILE] [--list]\n"
               "  --modes    modes to time each block in, in order (strict, debug, fused, compiled); the\n"
               "             first mode that runs is the reference of the result check [strict,fused]\n"
               "  --iters    timed iterations per block and mode (0: the default) [21; 5 for the AdamW and clipping blocks]\n"
               "  --warmup   untimed iterations after the check iteration [2]\n"
               "  --threads  kn_set_num_threads [2, as bench/fused_torch.py]\n"
               "  --blocks   blocks to run (--list names them) [all]\n"
               "  --json     also write the JSON lines to FILE\n");
}

static int positive(const char *flag, const char *text) {
    char *end;
    long v = strtol(text, &end, 10);
    if (*end || end == text || v < 0 || v > 100000) {
        fprintf(stderr, "bench_fused: %s %s: expected a non-negative integer\n", flag, text);
        exit(2);
    }
    return (int)v;
}

/* Splits a comma list in place and calls each(item) for every item. */
static void split(char *list, void (*each)(options *, const char *), options *o) {
    for (char *item = strtok(list, ","); item; item = strtok(NULL, ",")) each(o, item);
}

static void add_mode(options *o, const char *name) {
    kn_mode m;
    if (!kn_mode_parse(name, &m)) {
        fprintf(stderr, "bench_fused: --modes: '%s' is not a mode (strict, debug, fused, compiled)\n", name);
        exit(2);
    }
    if (o->n_modes < KN_MODE_COUNT) o->modes[o->n_modes++] = m;
}

static void add_block(options *o, const char *name) {
    for (int i = 0; i < N_BLOCKS; i++)
        if (strcmp(blocks[i].name, name) == 0) {
            o->selected[i] = true;
            return;
        }
    fprintf(stderr, "bench_fused: --blocks: no block '%s'; bench_fused --list names them\n", name);
    exit(2);
}

static options parse_args(int argc, char **argv) {
    options o = {.iters = 0, .warmup = 2, .threads = 2};
    bool any_block = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        }
        if (strcmp(a, "--list") == 0) {
            for (int k = 0; k < N_BLOCKS; k++) printf("%-20s %-26s %s\n", blocks[k].name, blocks[k].shape, blocks[k].what);
            exit(0);
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "bench_fused: unknown option or missing value: %s\n", a);
            usage(stderr);
            exit(2);
        }
        char *v = argv[++i];
        if (strcmp(a, "--modes") == 0) o.n_modes = 0, split(v, add_mode, &o);
        else if (strcmp(a, "--blocks") == 0) any_block = true, split(v, add_block, &o);
        else if (strcmp(a, "--iters") == 0) o.iters = positive(a, v);
        else if (strcmp(a, "--warmup") == 0) o.warmup = positive(a, v);
        else if (strcmp(a, "--threads") == 0) o.threads = positive(a, v);
        else if (strcmp(a, "--json") == 0) o.json_path = v;
        else {
            fprintf(stderr, "bench_fused: unknown option %s\n", a);
            usage(stderr);
            exit(2);
        }
    }
    if (o.n_modes == 0) o.modes[0] = KN_MODE_STRICT, o.modes[1] = KN_MODE_FUSED, o.n_modes = 2;
    if (!any_block)
        for (int k = 0; k < N_BLOCKS; k++) o.selected[k] = true;
    if (o.threads < 1) o.threads = 1;
    return o;
}

static void copy_error(run_result *r, const char *fallback) {
    const char *e = kn_last_error();
    snprintf(r->error, sizeof r->error, "%s", e && *e ? e : fallback);
}

/* max |a - ref| / max |ref| over n values (NaN anywhere gives NaN). */
static double rel_diff(const float *a, const float *ref, int64_t n) {
    double diff = 0, scale = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)ref[i]);
        if (isnan(d)) return NAN;
        if (d > diff) diff = d;
        if (fabs((double)ref[i]) > scale) scale = fabs((double)ref[i]);
    }
    return scale > 0 ? diff / scale : diff;
}

static void print_row(const run_result *r) {
    if (strcmp(r->outcome, "ok") != 0) {
        printf("%-20s %-8s %s: %s\n", r->block->name, kn_mode_name(r->mode), r->outcome, r->error);
    } else {
        char check[32];
        if (r->check_rel < 0) snprintf(check, sizeof check, "reference");
        else if (isnan(r->check_rel)) snprintf(check, sizeof check, "NaN MISMATCH");
        else snprintf(check, sizeof check, "%.1e%s", r->check_rel, r->mismatch ? " MISMATCH" : "");
        printf("%-20s %-8s %10.3f %10.3f %5d %9.1f %8.1f %8lld %8.2f  %s\n", r->block->name, kn_mode_name(r->mode),
               r->median_ms, r->first_ms, r->iters, r->kernels_per_iter, r->fused_kernels_per_iter,
               (long long)r->compiles, r->compile_seconds, check);
    }
    fflush(stdout);
}

/* One block in one mode: the check iteration, warm-up, then the timed iterations. */
static void run_mode(const block_def *b, fused_ctx *c, kn_mode mode, const options *o, float **ref, int64_t *ref_n,
                     run_result *r) {
    *r = (run_result){.block = b, .mode = mode, .outcome = "ok", .check_rel = NAN};
    kn_clear_error();
    if (kn_set_mode(mode) != KN_OK) {
        r->outcome = "skipped";
        copy_error(r, "the build refuses this mode");
        return;
    }
    kn_stats s0, s1, s2;
    kn_stats_get(&s0);
    if (b->reset) b->reset(c);
    if (kn_sync() != KN_OK) goto failed;

    /* The check iteration: its time is the first-call time (compiles included, if any). */
    kn_scope_push();
    double t0 = bench_now();
    kn_tensor *out = b->run(c);
    kn_status st = out ? kn_sync() : kn_last_status();
    r->first_ms = 1e3 * (bench_now() - t0);
    if (st == KN_OK) {
        int64_t n = kn_numel(out);
        float *host = malloc(sizeof *host * (size_t)n);
        if (!host || kn_to_host(out, host, sizeof *host * (size_t)n) != KN_OK) {
            free(host);
            kn_scope_pop();
            goto failed;
        }
        if (!*ref) {
            *ref = host, *ref_n = n;
            r->check_rel = -1;
        } else {
            r->check_rel = n == *ref_n ? rel_diff(host, *ref, n) : NAN;
            r->mismatch = !(r->check_rel <= CHECK_TOL);
            free(host);
        }
    }
    kn_scope_pop();
    if (st != KN_OK) goto failed;

    int iters = o->iters ? o->iters : b->big ? 5 : 21;
    double *t = malloc(sizeof *t * (size_t)iters);
    if (!t) {
        fprintf(stderr, "bench: out of host memory\n");
        exit(1);
    }
    for (int i = 0; i < o->warmup + iters; i++) {
        if (i == o->warmup) kn_stats_get(&s1);
        kn_scope_push();
        double a = bench_now();
        out = b->run(c);
        st = out ? kn_sync() : kn_last_status();
        double z = bench_now();
        kn_scope_pop();
        if (st != KN_OK) {
            free(t);
            goto failed;
        }
        if (i >= o->warmup) t[i - o->warmup] = z - a;
    }
    kn_stats_get(&s2);
    r->iters = iters;
    r->median_ms = 1e3 * bench_median(t, iters);
    free(t);
    double per = 1.0 / iters;
    r->kernels_per_iter = per * (double)(s2.kernels_launched - s1.kernels_launched);
    r->fused_kernels_per_iter = per * (double)(s2.fused_kernels - s1.fused_kernels);
    r->ops_fused_per_iter = per * (double)(s2.ops_fused - s1.ops_fused);
    r->compiles = s2.compiles - s0.compiles;
    r->compiles_timed = s2.compiles - s1.compiles;
    r->compile_seconds = s2.compile_seconds - s0.compile_seconds;
    r->cache_disk_hits = s2.cache_disk_hits - s0.cache_disk_hits;
    return;
failed:
    r->outcome = "failed";
    copy_error(r, "an op failed without a message");
}

static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", (unsigned char)*s);
        else fputc(*s, f);
    }
    fputc('"', f);
}

/* One line per block and mode; the fields of bench_common.h's lines plus the mode and counters. */
static void print_json(FILE *f, const run_result *r, int threads) {
    fprintf(f, "{\"impl\": \"kiln\", \"mode\": \"%s\", \"bench\": \"%s\", \"shape\": \"%s\", \"unit\": \"ms\", ",
            kn_mode_name(r->mode), r->block->name, r->block->shape);
    if (strcmp(r->outcome, "ok") != 0) {
        fprintf(f, "\"value\": null, \"%s\": ", r->outcome);
        json_string(f, r->error);
        fprintf(f, ", \"threads\": %d}\n", threads);
        return;
    }
    fprintf(f,
            "\"value\": %.6g, \"first_ms\": %.6g, \"iters\": %d, \"threads\": %d, \"kernels_per_iter\": %.2f, "
            "\"fused_kernels_per_iter\": %.2f, \"ops_fused_per_iter\": %.2f, \"compiles\": %lld, "
            "\"compiles_timed\": %lld, \"compile_seconds\": %.3f, \"cache_disk_hits\": %lld, ",
            r->median_ms, r->first_ms, r->iters, threads, r->kernels_per_iter, r->fused_kernels_per_iter,
            r->ops_fused_per_iter, (long long)r->compiles, (long long)r->compiles_timed, r->compile_seconds,
            (long long)r->cache_disk_hits);
    if (r->check_rel < 0) fprintf(f, "\"check\": \"reference\"}\n");
    else if (isnan(r->check_rel)) fprintf(f, "\"check\": \"mismatch\", \"check_rel\": null}\n");
    else fprintf(f, "\"check\": \"%s\", \"check_rel\": %.3g}\n", r->mismatch ? "mismatch" : "ok", r->check_rel);
}

int main(int argc, char **argv) {
    options o = parse_args(argc, argv);
    kn_set_num_threads(o.threads);
    if (kn_set_mode(KN_MODE_STRICT) != KN_OK) {
        fprintf(stderr, "bench_fused: %s\n", kn_last_error());
        return 1;
    }
    bench_header("bench_fused");
    printf("%-20s %-8s %10s %10s %5s %9s %8s %8s %8s  %s\n", "block", "mode", "median ms", "first ms", "iters",
           "kernels/it", "fused/it", "compiles", "compile s", "check vs first mode");
    bool mismatch = false;
    for (int k = 0; k < N_BLOCKS; k++) {
        if (!o.selected[k]) continue;
        const block_def *b = &blocks[k];
        fused_ctx c = {0};
        float *ref = NULL;
        int64_t ref_n = 0;
        kn_set_mode(KN_MODE_STRICT);
        kn_manual_seed(SEED);
        kn_scope_push();
        b->setup(&c);
        if (kn_sync() != KN_OK) bench_check(NULL, "setup");
        for (int i = 0; i < o.n_modes; i++) {
            run_result *r = &results[n_results++];
            run_mode(b, &c, o.modes[i], &o, &ref, &ref_n, r);
            mismatch |= r->mismatch;
            print_row(r);
        }
        kn_clear_error();
        kn_set_mode(KN_MODE_STRICT);
        if (b->teardown) b->teardown(&c);
        kn_scope_pop();
        kn_memory_empty_cache(KN_CPU);
        free(ref);
    }
    FILE *json = o.json_path ? fopen(o.json_path, "w") : NULL;
    if (o.json_path && !json) fprintf(stderr, "bench_fused: cannot write %s\n", o.json_path);
    for (int i = 0; i < n_results; i++) {
        print_json(stdout, &results[i], o.threads);
        if (json) print_json(json, &results[i], o.threads);
    }
    if (json) fclose(json);
    if (mismatch) fprintf(stderr, "bench_fused: a mode's result differs from the first mode's by more than %g\n", CHECK_TOL);
    return mismatch || (o.json_path && !json) ? 1 : 0;
}
