/* Prefill and decode tokens per second of a causal language model (models/lm), the kiln
 * column of bench/lm_compare.sh: a prompt of P random token ids in one forward through the KV
 * cache, then N greedy decode steps of one token each. Each figure is the median over the
 * measured runs after one warm-up run.
 *
 * Usage: bench_lm [MODEL_DIR] [--dtypes f32,bf16] [--modes strict,fused] [--prompt 128]
 *                 [--gen 64] [--reps 3]
 * Without MODEL_DIR the model is the "stories15M" Llama shape with seeded random weights. */
#include "bench_common.h"

#include "lm/lm.h"

typedef struct lm_bench {
    lm *m;
    lm_cache *cache;
    kn_tensor *prompt;   /* [1, P] i64 */
    int gen;
} lm_bench;

/* The greedy next token of logits [1, V]; reading it waits for the queued work. */
static int64_t greedy(kn_tensor *logits) {
    double id = -1;
    if (kn_item(bench_check(kn_argmax_all(bench_check(logits, "lm_forward_last")), "argmax"), &id) != KN_OK) {
        fprintf(stderr, "bench: reading the next token failed: %s\n", kn_last_error());
        exit(1);
    }
    return (int64_t)id;
}

/* One prefill and one decode of b->gen tokens; seconds of each. */
static void run_once(lm_bench *b, double *prefill_s, double *decode_s) {
    lm_cache_reset(b->cache);
    kn_scope_push();
    double t0 = bench_now();
    int64_t next = greedy(lm_forward_last(b->m, b->prompt, b->cache));
    double t1 = bench_now();
    kn_scope_pop();
    for (int i = 0; i < b->gen; i++) {
        kn_scope_push();
        kn_tensor *ids = bench_check(kn_from_host(&next, KN_I64, KN_SHAPE(1, 1), KN_CPU), "ids");
        next = greedy(lm_forward_last(b->m, ids, b->cache));
        kn_scope_pop();
    }
    *prefill_s = t1 - t0;
    *decode_s = bench_now() - t1;
}

static void measure(lm_bench *b, const char *shape, int prompt_len, int reps) {
    double pre[64], dec[64];
    if (reps > 64) reps = 64;
    for (int i = 0; i <= reps; i++) run_once(b, &pre[i > 0 ? i - 1 : 0], &dec[i > 0 ? i - 1 : 0]);
    bench_report("kiln", "lm_prefill", shape, "tok_s", prompt_len / bench_median(pre, reps), "", 0);
    bench_report("kiln", "lm_decode", shape, "tok_s", b->gen / bench_median(dec, reps), "", 0);
}

static lm *make_model(const char *dir, kn_dtype dt) {
    if (dir) return lm_load(dir, &(lm_load_options){.device = KN_CPU, .dtype = dt});
    lm_config c = {.family = LM_LLAMA, .vocab_size = 32000, .hidden_size = 288, .n_layers = 6, .n_heads = 6,
                   .n_kv_heads = 6, .head_dim = 48, .intermediate_size = 768, .max_position_embeddings = 256,
                   .norm_eps = 1e-5, .rope_theta = 10000, .tie_word_embeddings = true, .bos_token_id = 1,
                   .eos_token_ids = {2}, .n_eos = 1, .torch_dtype = KN_F32};
    kn_manual_seed(1234);
    return lm_new(&c, dt);
}

static const char *dir_name(const char *dir) {
    if (!dir) return "stories15m-shape";
    const char *end = dir + strlen(dir), *s;
    while (end > dir && end[-1] == '/') end--;
    for (s = end; s > dir && s[-1] != '/'; s--) {}
    static char name[64];
    snprintf(name, sizeof name, "%.*s", (int)(end - s), s);
    return name;
}

int main(int argc, char **argv) {
    const char *dir = NULL, *dtypes = "f32,bf16", *modes = "strict,fused";
    int prompt_len = 128, gen = 64, reps = 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--dtypes") && v) dtypes = v, i++;
        else if (!strcmp(a, "--modes") && v) modes = v, i++;
        else if (!strcmp(a, "--prompt") && v) prompt_len = atoi(v), i++;
        else if (!strcmp(a, "--gen") && v) gen = atoi(v), i++;
        else if (!strcmp(a, "--reps") && v) reps = atoi(v), i++;
        else if (a[0] != '-' && !dir) dir = a;
        else {
            fprintf(stderr, "usage: %s [MODEL_DIR] [--dtypes f32,bf16] [--modes strict,fused] [--prompt N] "
                            "[--gen N] [--reps N]\n", argv[0]);
            return 2;
        }
    }
    if (prompt_len < 1 || gen < 0 || reps < 1) {
        fprintf(stderr, "bench_lm: --prompt and --reps must be at least 1\n");
        return 2;
    }
    bench_header("bench_lm");
    kn_set_grad_enabled(false);
    /* The prompt: seeded random ids past the special tokens, the same for every run. */
    int64_t *ids = malloc(sizeof *ids * (size_t)prompt_len);
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < prompt_len; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        ids[i] = 3 + (int64_t)(x % 31997);
    }
    char list[64];
    snprintf(list, sizeof list, "%s", dtypes);
    for (char *save = NULL, *dn = strtok_r(list, ",", &save); dn; dn = strtok_r(NULL, ",", &save)) {
        kn_dtype dt;
        if (!kn_dtype_parse(dn, &dt)) {
            fprintf(stderr, "bench_lm: unknown dtype %s\n", dn);
            return 2;
        }
        lm *m = make_model(dir, dt);
        if (!m) {
            fprintf(stderr, "bench_lm: %s\n", kn_last_error());
            return 1;
        }
        if (prompt_len + gen > lm_config_of(m)->max_position_embeddings) {
            fprintf(stderr, "bench_lm: %d + %d tokens do not fit the model's context of %d\n", prompt_len, gen,
                    lm_config_of(m)->max_position_embeddings);
            return 2;
        }
        lm_bench b = {m, lm_cache_new(m, 1, prompt_len + gen), NULL, gen};
        b.prompt = kn_from_host(ids, KN_I64, KN_SHAPE(1, prompt_len), KN_CPU);
        if (!b.cache || !b.prompt) {
            fprintf(stderr, "bench_lm: %s\n", kn_last_error());
            return 1;
        }
        char mlist[64];
        snprintf(mlist, sizeof mlist, "%s", modes);
        for (char *s2 = NULL, *mn = strtok_r(mlist, ",", &s2); mn; mn = strtok_r(NULL, ",", &s2)) {
            kn_mode mode;
            if (!kn_mode_parse(mn, &mode) || kn_set_mode(mode) != KN_OK) {
                fprintf(stderr, "bench_lm: mode %s: %s\n", mn, kn_last_error());
                return 2;
            }
            char shape[64];
            snprintf(shape, sizeof shape, "%.40s %.8s %.8s", dir_name(dir), dn, mn);
            measure(&b, shape, prompt_len, reps);
        }
        kn_set_mode(KN_MODE_STRICT);
        kn_release(b.prompt);
        lm_cache_free(b.cache);
        lm_free(m);
    }
    free(ids);
    bench_print_json();
    return 0;
}
