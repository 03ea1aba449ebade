/* Language models of lm.h (GPT-2, Llama 2 and 3, Mistral, Qwen2, Qwen3) against the transformers
 * fixtures of tests/fixtures/make_lm_fixtures.py: logits, greedy tokens, loss, the KV cache,
 * left padding, sharded and f16/bf16 files, the meta device, rope scaling, Mistral's sliding
 * window, and bad input (configs checked field by field and against the weights' headers).
 *
 * Logits are compared by the largest difference relative to the largest reference logit of
 * the sequence: max|kiln - ref| / max|ref| (a per-element relative measure is meaningless
 * for logits near zero). */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "lm/lm.h"

#define LM_DIR KILN_SOURCE_DIR "/tests/fixtures/lm/"

/* Every family, and two one-layer models whose forward scales rope (dynamic, yarn). Mistral's
 * sliding window (4) is shorter than the sequences. */
static const char *const FAMILIES[] = {"gpt2",  "llama2", "llama3",        "mistral",
                                       "qwen2", "qwen3",  "llama_dynamic", "qwen2_yarn"};
#define N_FAMILIES ((int)(sizeof FAMILIES / sizeof *FAMILIES))

static cJSON *reference(const char *name) {
    char path[512];
    snprintf(path, sizeof path, LM_DIR "%s/reference.json", name);
    return kn_hf_read_json(path, KN_HF_JSON_MAX_BYTES);
}

static kn_tensor *ids_tensor(const cJSON *list, int64_t rows) {
    int n = cJSON_GetArraySize(list);
    int64_t v[64];
    for (int i = 0; i < n && i < 64; i++) v[i] = (int64_t)cJSON_GetArrayItem(list, i)->valuedouble;
    return kn_from_host(v, KN_I64, KN_SHAPE(rows, n / rows), KN_CPU);
}

static float *host_f32(kn_tensor *t) {
    if (!t) return NULL;
    float *v = malloc(sizeof *v * (size_t)kn_numel(t));
    kn_tensor *f = kn_cast(t, KN_F32);
    if (v && kn_to_host(f, v, sizeof *v * (size_t)kn_numel(t)) != KN_OK) free(v), v = NULL;
    kn_release(f);
    return v;
}

/* The fixture's logits of sequence i, [T, V]. */
static float *fixture_logits(const char *name, int i, int64_t *n) {
    char path[512], key[32];
    snprintf(path, sizeof path, LM_DIR "%s/logits.safetensors", name);
    snprintf(key, sizeof key, "logits.%d", i);
    kn_safetensors *f = kn_safetensors_open(path);
    kn_tensor *t = f ? kn_safetensors_get(f, key, KN_CPU) : NULL;
    float *v = host_f32(t);
    *n = t ? kn_numel(t) : 0;
    kn_release(t);
    kn_safetensors_close(f);
    return v;
}

/* max|a - ref| / max|ref| over n values. */
static double rel_diff(const float *a, const float *ref, int64_t n) {
    double diff = 0, scale = 0;
    for (int64_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)a[i] - ref[i]));
        scale = fmax(scale, fabs((double)ref[i]));
    }
    return a && ref ? diff / scale : INFINITY;
}

static lm *load(const char *name, kn_device device, kn_dtype dtype) {
    char dir[512];
    snprintf(dir, sizeof dir, LM_DIR "%s", name);
    lm_load_options o = {.device = device, .dtype = dtype};
    lm *m = lm_load(dir, &o);
    CHECK_MSG(m != NULL, "%s: %s", name, kn_last_error());
    return m;
}

/* The largest relative logit difference of model m over the fixture sequences of `ref_name`. */
static double logits_error(lm *m, const char *ref_name) {
    cJSON *ref = reference(ref_name);
    const cJSON *seqs = cJSON_GetObjectItem(ref, "seqs");
    double worst = 0;
    for (int i = 0; m && i < cJSON_GetArraySize(seqs); i++) {
        kn_scope_push();
        int64_t n;
        float *want = fixture_logits(ref_name, i, &n);
        float *got = host_f32(lm_forward(m, ids_tensor(cJSON_GetArrayItem(seqs, i), 1), NULL));
        CHECK_MSG(got && want, "%s: %s", ref_name, kn_last_error());
        worst = fmax(worst, rel_diff(got, want, n));
        free(got), free(want);
        kn_scope_pop();
    }
    cJSON_Delete(ref);
    return m ? worst : INFINITY;
}

static void test_logits_match_transformers_in_f32(void) {
    for (int f = 0; f < N_FAMILIES; f++) {
        lm *m = load(FAMILIES[f], KN_CPU, KN_DTYPE_COUNT);
        double err = logits_error(m, FAMILIES[f]);
        CHECK_MSG(err <= 1e-4, "%s: logits differ by %.3g of the largest", FAMILIES[f], err);
        CHECK(!m || lm_dtype(m) == KN_F32);
        lm_free(m);
    }
}

static int64_t argmax_row(kn_tensor *logits) {
    double v = -1;
    kn_tensor *a = kn_argmax(logits, -1, false);
    return a && kn_item(a, &v) == KN_OK ? (int64_t)v : -1;
}

static void test_greedy_tokens_match_generate(void) {
    for (int f = 0; f < N_FAMILIES; f++) {
        lm *m = load(FAMILIES[f], KN_CPU, KN_DTYPE_COUNT);
        cJSON *ref = reference(FAMILIES[f]);
        const cJSON *greedy = cJSON_GetObjectItem(ref, "greedy");
        lm_cache *cache = m ? lm_cache_new(m, 1, 32) : NULL;
        kn_scope_push();
        kn_tensor *logits = cache ? lm_forward_last(m, ids_tensor(cJSON_GetObjectItem(ref, "prompt"), 1), cache) : NULL;
        for (int i = 0; logits && i < cJSON_GetArraySize(greedy); i++) {
            int64_t tok = argmax_row(logits), want = (int64_t)cJSON_GetArrayItem(greedy, i)->valuedouble;
            CHECK_MSG(tok == want, "%s: token %d is %lld, transformers %lld", FAMILIES[f], i, (long long)tok, (long long)want);
            if (tok != want) break;
            logits = lm_forward_last(m, kn_from_host(&tok, KN_I64, KN_SHAPE(1, 1), KN_CPU), cache);
        }
        CHECK_MSG(logits != NULL, "%s: %s", FAMILIES[f], kn_last_error());
        kn_scope_pop();
        lm_cache_free(cache);
        cJSON_Delete(ref);
        lm_free(m);
    }
}

/* Prefill of 3 tokens then one token at a time gives the rows of one uncached forward (for
 * Mistral, the decode steps past its window too). */
static void test_cached_decode_equals_uncached_forward(void) {
    const char *names[] = {"gpt2", "llama3", "qwen3", "mistral"};
    for (int f = 0; f < 4; f++) {
        lm *m = load(names[f], KN_CPU, KN_DTYPE_COUNT);
        cJSON *ref = reference(names[f]);
        const cJSON *seq = cJSON_GetArrayItem(cJSON_GetObjectItem(ref, "seqs"), 0);
        kn_scope_push();
        kn_tensor *ids = ids_tensor(seq, 1);
        int64_t T = kn_size(ids, 1), V = lm_config_of(m)->vocab_size;
        float *full = host_f32(lm_forward(m, ids, NULL));
        lm_cache *cache = lm_cache_new(m, 1, T);
        float *step = host_f32(lm_forward(m, kn_narrow(ids, 1, 0, 3), cache));
        CHECK(step && full && rel_diff(step, full, 3 * V) <= 1e-5);
        free(step);
        for (int64_t t = 3; full && t < T; t++) {
            step = host_f32(lm_forward(m, kn_narrow(ids, 1, t, 1), cache));
            double err = rel_diff(step, full + t * V, V);
            CHECK_MSG(err <= 1e-5, "%s: position %lld cached differs by %.3g", names[f], (long long)t, err);
            free(step);
        }
        CHECK(cache && lm_cache_len(cache) == T);
        CHECK_ERROR(lm_forward(m, kn_narrow(ids, 1, 0, 1), cache) != NULL, KN_ERR_SHAPE, "do not fit the cache");
        lm_cache_free(cache);
        free(full);
        kn_scope_pop();
        cJSON_Delete(ref);
        lm_free(m);
    }
}

/* Left-padded rows give their unpadded logits, in the prefill and in the decode step after it
 * (not with dynamic rope, whose frequencies follow the batch's longest row, as in transformers). */
static void test_left_padded_batch_rows_equal_unpadded_rows(void) {
    for (int f = 0; f < N_FAMILIES; f++) {
        if (strcmp(FAMILIES[f], "llama_dynamic") == 0) continue;
        lm *m = load(FAMILIES[f], KN_CPU, KN_DTYPE_COUNT);
        cJSON *ref = reference(FAMILIES[f]);
        const cJSON *mask = cJSON_GetObjectItem(ref, "attention_mask"), *seqs = cJSON_GetObjectItem(ref, "seqs");
        int B = cJSON_GetArraySize(mask), T = cJSON_GetArraySize(cJSON_GetArrayItem(mask, 0));
        int64_t pad[8] = {0}, V = m ? lm_config_of(m)->vocab_size : 0;
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) pad[b] += cJSON_GetArrayItem(cJSON_GetArrayItem(mask, b), t)->valuedouble == 0;
        kn_scope_push();
        const cJSON *rows = cJSON_GetObjectItem(ref, "padded_ids");
        cJSON *flat = cJSON_CreateArray();
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                cJSON_AddItemToArray(flat, cJSON_CreateNumber(cJSON_GetArrayItem(cJSON_GetArrayItem(rows, b), t)->valuedouble));
        lm_cache *cache = m ? lm_cache_new(m, B, T + 1) : NULL;
        CHECK(cache && lm_cache_set_padding(cache, pad) == KN_OK);
        float *got = host_f32(lm_forward(m, ids_tensor(flat, B), cache));
        int64_t next[8];
        for (int b = 0; got && b < B; b++) {
            int64_t n;
            float *want = fixture_logits(FAMILIES[f], b, &n);
            double err = rel_diff(got + ((int64_t)b * T + pad[b]) * V, want, n);
            CHECK_MSG(err <= 1e-4, "%s: padded row %d differs by %.3g", FAMILIES[f], b, err);
            next[b] = 1 + 37 * b;
            free(want);
        }
        float *dec = got ? host_f32(lm_forward(m, kn_from_host(next, KN_I64, KN_SHAPE(B, 1), KN_CPU), cache)) : NULL;
        for (int b = 0; dec && b < B; b++) {
            cJSON *seq = cJSON_Duplicate(cJSON_GetArrayItem(seqs, b), true);
            cJSON_AddItemToArray(seq, cJSON_CreateNumber((double)next[b]));
            kn_tensor *alone = lm_forward_last(m, ids_tensor(seq, 1), NULL);
            float *want = host_f32(alone);
            double err = rel_diff(dec + b * V, want, V);
            CHECK_MSG(err <= 1e-5, "%s: padded row %d's decode step differs by %.3g", FAMILIES[f], b, err);
            free(want);
            cJSON_Delete(seq);
        }
        CHECK_MSG(dec != NULL, "%s: %s", FAMILIES[f], kn_last_error());
        free(got), free(dec);
        cJSON_Delete(flat);
        lm_cache_free(cache);
        kn_scope_pop();
        cJSON_Delete(ref);
        lm_free(m);
    }
}

static void test_loss_matches_transformers(void) {
    for (int f = 0; f < N_FAMILIES; f++) {
        lm *m = load(FAMILIES[f], KN_CPU, KN_DTYPE_COUNT);
        cJSON *ref = reference(FAMILIES[f]);
        const cJSON *seq = cJSON_GetArrayItem(cJSON_GetObjectItem(ref, "seqs"), 0);
        int T = cJSON_GetArraySize(seq);
        int64_t targets[64];
        for (int t = 0; t < T; t++) targets[t] = t + 1 < T ? (int64_t)cJSON_GetArrayItem(seq, t + 1)->valuedouble : -1;
        kn_scope_push();
        double loss = NAN, want = cJSON_GetObjectItem(ref, "loss")->valuedouble;
        kn_tensor *l = lm_loss(m, ids_tensor(seq, 1), kn_from_host(targets, KN_I64, KN_SHAPE(1, T), KN_CPU));
        CHECK_MSG(l && kn_item(l, &loss) == KN_OK && fabs(loss - want) <= 1e-5 * want, "%s: loss %.9g, transformers %.9g",
                  FAMILIES[f], loss, want);
        kn_scope_pop();
        cJSON_Delete(ref);
        lm_free(m);
    }
}

/* Fine-tuning runs through lm_loss: every parameter of each family gets a finite gradient. */
static void test_loss_backward_reaches_every_parameter(void) {
    for (int f = 0; f < N_FAMILIES; f++) {
        lm *m = load(FAMILIES[f], KN_CPU, KN_F32);
        kn_scope_push();
        int64_t ids[6] = {1, 17, 300, 42, 7, 9}, targets[6] = {17, 300, 42, 7, 9, -1};
        kn_tensor *loss = m ? lm_loss(m, kn_from_host(ids, KN_I64, KN_SHAPE(1, 6), KN_CPU),
                                      kn_from_host(targets, KN_I64, KN_SHAPE(1, 6), KN_CPU)) : NULL;
        CHECK_MSG(loss && kn_backward(loss) == KN_OK, "%s: %s", FAMILIES[f], kn_last_error());
        kn_named_tensors list = {0};
        CHECK(m && kn_module_named(lm_module(m), KN_PARAMS, &list) == KN_OK);
        for (int i = 0; i < list.count; i++) {
            kn_tensor *g = kn_grad(list.tensors[i]);
            double norm = NAN;
            CHECK_MSG(g && kn_item(kn_norm(g, 2, KN_ALL_DIMS, false), &norm) == KN_OK && isfinite(norm) && norm > 0,
                      "%s: %s has no finite gradient", FAMILIES[f], list.names[i]);
        }
        kn_named_tensors_free(&list);
        kn_scope_pop();
        lm_free(m);
    }
}

static void test_sharded_files_load_as_the_single_file(void) {
    lm *a = load("llama3", KN_CPU, KN_DTYPE_COUNT), *b = load("llama3_sharded", KN_CPU, KN_DTYPE_COUNT);
    CHECK(logits_error(b, "llama3") == logits_error(a, "llama3"));
    lm_free(a), lm_free(b);
}

/* f16 and bf16 files, into f32 and as stored. The tolerances are those of the weights'
 * rounding (into f32) and of computing in that dtype (as stored), with room for the seed. */
static void test_f16_and_bf16_files_load(void) {
    struct { const char *name; kn_dtype dtype; double tol; } cases[] = {
        {"llama3_f16", KN_F32, 3e-3}, {"llama3_f16", KN_DTYPE_COUNT, 1e-2},
        {"llama3_bf16", KN_F32, 2e-2}, {"llama3_bf16", KN_DTYPE_COUNT, 6e-2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        lm *m = load(cases[i].name, KN_CPU, cases[i].dtype);
        kn_dtype want = cases[i].dtype != KN_DTYPE_COUNT ? cases[i].dtype : strstr(cases[i].name, "bf16") ? KN_BF16 : KN_F16;
        CHECK(m && lm_dtype(m) == want);
        double err = logits_error(m, "llama3");
        printf("  %s as %s: logits within %.3g of the largest\n", cases[i].name, kn_dtype_name(want), err);
        CHECK_MSG(err <= cases[i].tol, "%s as %s: %.3g > %.3g", cases[i].name, kn_dtype_name(want), err, cases[i].tol);
        lm_free(m);
    }
}

static void test_meta_device_load_gives_shapes_only(void) {
    lm *m = load("qwen3", KN_META, KN_DTYPE_COUNT);
    kn_tensor *k = m ? kn_module_get(lm_module(m), "model.layers.1.self_attn.k_proj.weight") : NULL;
    kn_tensor *qn = m ? kn_module_get(lm_module(m), "model.layers.0.self_attn.q_norm.weight") : NULL;
    CHECK(k && kn_device_of(k).type == KN_DEVICE_META && kn_size(k, 0) == 64 && kn_size(k, 1) == 64);
    CHECK(qn && kn_ndim(qn) == 1 && kn_size(qn, 0) == 32);
    CHECK(m && kn_module_num_params(lm_module(m)) > 0);
    /* a forward traces shapes on the meta device too */
    kn_scope_push();
    kn_device was = kn_default_device();
    kn_set_default_device(KN_META);
    kn_tensor *x = kn_empty(KN_SHAPE(1, 3), KN_I64);
    kn_set_default_device(was);
    kn_tensor *logits = m ? lm_forward(m, x, NULL) : NULL;
    CHECK_MSG(logits && kn_device_of(logits).type == KN_DEVICE_META && kn_size(logits, 2) == 512, "%s", kn_last_error());
    kn_scope_pop();
    lm_free(m);
}

/* GPT-2 files written without the "transformer." prefix (the original openai-community layout). */
static void test_gpt2_without_the_transformer_prefix(void) {
    lm *m = load("gpt2", KN_CPU, KN_DTYPE_COUNT);
    char dir[] = "/tmp/kiln_lm_XXXXXX", path[600];
    CHECK(mkdtemp(dir) != NULL);
    kn_named_tensors list = {0};
    CHECK(m && kn_module_named(lm_module(m), KN_STATE, &list) == KN_OK);
    for (int i = 0; i < list.count; i++)
        if (strncmp(list.names[i], "transformer.", 12) == 0) memmove(list.names[i], list.names[i] + 12, strlen(list.names[i]) - 11);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    CHECK(kn_safetensors_save(path, list.count, (const char *const *)list.names, list.tensors, NULL, NULL, 0) == KN_OK);
    kn_named_tensors_free(&list);
    snprintf(path, sizeof path, "cp " LM_DIR "gpt2/config.json %s/", dir);
    CHECK(system(path) == 0);
    lm *bare = lm_load(dir, NULL);
    CHECK_MSG(bare != NULL, "%s", kn_last_error());
    CHECK(logits_error(bare, "gpt2") <= 1e-4);
    lm_free(bare), lm_free(m);
    remove_tree(dir);
}

static void test_saved_weights_load_back(void) {
    const char *names[] = {"llama2", "qwen2"};
    for (int f = 0; f < 2; f++) {
        lm *m = load(names[f], KN_CPU, KN_DTYPE_COUNT);
        char dir[] = "/tmp/kiln_lm_XXXXXX", path[600];
        CHECK(mkdtemp(dir) != NULL);
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        CHECK(m && lm_save_weights(m, path) == KN_OK);
        snprintf(path, sizeof path, "cp " LM_DIR "%s/config.json %s/", names[f], dir);
        CHECK(system(path) == 0);
        lm *back = lm_load(dir, NULL);
        CHECK_MSG(back && logits_error(back, names[f]) == logits_error(m, names[f]), "%s: %s", names[f], kn_last_error());
        lm_free(back), lm_free(m);
        remove_tree(dir);
    }
}

static void test_rope_frequencies_match_transformers(void) {
    cJSON *root = kn_hf_read_json(LM_DIR "rope.json", KN_HF_JSON_MAX_BYTES);
    const cJSON *c;
    CHECK(root != NULL);
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "cases")) {
        const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
        char path[] = "/tmp/kiln_rope_XXXXXX";
        int fd = mkstemp(path);
        char *text = cJSON_Print(cJSON_GetObjectItem(c, "config"));
        CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text));
        close(fd);
        free(text);
        lm_config cfg;
        CHECK_MSG(lm_config_load(path, &cfg) == KN_OK, "%s: %s", name, kn_last_error());
        unlink(path);
        const cJSON *want = cJSON_GetObjectItem(c, "inv_freq");
        float got[64];
        double factor = 0, want_factor = cJSON_GetObjectItem(c, "attention_factor")->valuedouble;
        CHECK(lm_rope_frequencies(&cfg, (int64_t)cJSON_GetObjectItem(c, "seq_len")->valuedouble, got, &factor) == KN_OK);
        CHECK(cJSON_GetArraySize(want) == cfg.head_dim / 2);
        for (int i = 0; i < cJSON_GetArraySize(want); i++) {
            double w = cJSON_GetArrayItem(want, i)->valuedouble;
            CHECK_MSG(fabs(got[i] - w) <= 2e-6 * fabs(w), "%s: inv_freq[%d] %.9g, transformers %.9g", name, i, got[i], w);
        }
        CHECK_MSG(fabs(factor - want_factor) <= 1e-12, "%s: attention factor %.12g, transformers %.12g", name, factor, want_factor);
    }
    cJSON_Delete(root);
}

/* ---- bad input ---------------------------------------------------------------------------------- */

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fputs(text, f) >= 0);
    if (f) fclose(f);
}

static void sh(const char *fmt, const char *a, const char *b) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, fmt, a, b);
    CHECK_MSG(system(cmd) == 0, "%s", cmd);
}

/* dir/config.json: fixture model's config (as cJSON prints it) with `from` replaced by `to`. */
static void edit_config_of(const char *model, const char *dir, const char *from, const char *to) {
    char source[512];
    snprintf(source, sizeof source, LM_DIR "%s/config.json", model);
    cJSON *c = kn_hf_read_json(source, KN_HF_JSON_MAX_BYTES);
    char *text = cJSON_Print(c), *at = text ? strstr(text, from) : NULL, out[4096], path[600];
    CHECK(at != NULL);
    if (at) {
        snprintf(out, sizeof out, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
        snprintf(path, sizeof path, "%s/config.json", dir);
        write_text(path, out);
    }
    free(text);
    cJSON_Delete(c);
}

static void edited_config(const char *dir, const char *from, const char *to) { edit_config_of("llama3", dir, from, to); }

static void test_bad_input_is_an_error_naming_the_file(void) {
    char dir[] = "/tmp/kiln_lm_bad_XXXXXX", path[600];
    CHECK(mkdtemp(dir) != NULL);
    lm_config cfg;
    CHECK_ERROR(lm_load(dir, NULL) != NULL, KN_ERR_IO, "config.json: cannot open");
    snprintf(path, sizeof path, "%s/config.json", dir);
    write_text(path, "{\"model_type\": \"bert\"}");
    CHECK_ERROR(lm_config_load(path, &cfg) == KN_OK, KN_ERR_IO,
                "model_type \"bert\" is not one kiln runs (it runs gpt2, llama, mistral, qwen2, qwen3)");
    write_text(path, "{\"model_type\": \"llama\", \"vocab_size\": 512");
    CHECK_ERROR(lm_config_load(path, &cfg) == KN_OK, KN_ERR_IO, "not valid JSON");
    edited_config(dir, "\"hidden_size\":", "\"hidden_width\":");
    CHECK_ERROR(lm_load(dir, NULL) != NULL, KN_ERR_IO, "\"hidden_size\" is missing");
    edited_config(dir, "\"num_key_value_heads\":\t2", "\"num_key_value_heads\":\t3");
    CHECK_ERROR(lm_config_load(path, &cfg) == KN_OK, KN_ERR_IO, "must divide num_attention_heads");
    edited_config(dir, "\"llama3\"", "\"longrope\"");
    CHECK_ERROR(lm_config_load(path, &cfg) == KN_OK, KN_ERR_IO, "rope_type kiln does not know");
    /* a config that does not fit the weights */
    edited_config(dir, "\"intermediate_size\":\t64", "\"intermediate_size\":\t80");
    sh("ln -s " LM_DIR "llama3/model.safetensors %s/%s", dir, "");
    CHECK_ERROR(lm_load(dir, NULL) != NULL, KN_ERR_SHAPE, "model.layers.0.mlp.gate_proj.weight");
    CHECK_ERROR(lm_load(dir, NULL) != NULL, KN_ERR_SHAPE, "model.safetensors");
    /* truncated weights */
    edited_config(dir, "\"intermediate_size\":\t64", "\"intermediate_size\":\t64");
    sh("rm %s/model.safetensors && head -c 100000 " LM_DIR "llama3/model.safetensors > %s/model.safetensors", dir, dir);
    CHECK_ERROR(lm_load(dir, NULL) != NULL, KN_ERR_IO, "model.safetensors");
    /* a missing shard */
    sh("rm %s/model.safetensors && cd " LM_DIR "llama3_sharded && cp model-00001-of-00003.safetensors "
       "model-00003-of-00003.safetensors model.safetensors.index.json %s/", dir, dir);
    CHECK_ERROR(lm_load(dir, NULL) != NULL, KN_ERR_IO, "model-00002-of-00003.safetensors");
    /* a tensor of an integer dtype where the model has a float weight */
    sh("rm %s/model*.safetensors*%s", dir, "");
    lm *m = load("llama3", KN_CPU, KN_DTYPE_COUNT);
    kn_named_tensors list = {0};
    CHECK(m && kn_module_named(lm_module(m), KN_STATE, &list) == KN_OK);
    kn_scope_push();
    kn_no_grad_push();
    for (int i = 0; i < list.count; i++)
        if (strcmp(list.names[i], "model.norm.weight") == 0) list.tensors[i] = kn_cast(list.tensors[i], KN_I32);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    CHECK(kn_safetensors_save(path, list.count, (const char *const *)list.names, list.tensors, NULL, NULL, 0) == KN_OK);
    kn_no_grad_pop();
    kn_scope_pop();
    kn_named_tensors_free(&list);
    lm_free(m);
    CHECK_ERROR(lm_load(dir, NULL) != NULL, KN_ERR_DTYPE, "'model.norm.weight' is I32[64]");
    remove_tree(dir);
}

/* dir/config.json holding text, beside a link to the weights of fixture `model`. */
static void config_beside_weights(const char *dir, const char *model, const char *text) {
    char path[600], target[600];
    snprintf(path, sizeof path, "%s/config.json", dir);
    write_text(path, text);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    snprintf(target, sizeof target, LM_DIR "%s/model.safetensors", model);
    unlink(path);
    CHECK(symlink(target, path) == 0);
}

#define LLAMA_SMALL "\"model_type\":\"llama\",\"vocab_size\":8,\"hidden_size\":8,\"intermediate_size\":8,\"num_attention_heads\":1"

/* Numbers that overflowed their int casts (the configs of shared/repro, beside the weights of
 * a fixture model of their family) are errors naming the file and the key. */
static void test_out_of_range_config_numbers_are_errors_naming_the_key(void) {
    struct { const char *model, *config, *words; kn_status code; } cases[] = {
        {"gpt2", "{\"model_type\":\"gpt2\",\"n_layer\":6666666664}",
         "config.json: \"n_layer\" is 6666666664; it must be an integer in [1, 2147483647]", KN_ERR_IO},
        {"gpt2", "{\"model_type\":\"gpt2\",\"n_layer\":1,\"n_head\":1,\"n_embd\":600000000,\"vocab_size\":8,\"n_positions\":8}",
         "config.json: gpt2: n_embd 600000000 is too large: the MLP's width, 4 * n_embd, overflows", KN_ERR_ARG},
        {"llama2", "{" LLAMA_SMALL ",\"num_hidden_layers\":1,\"bos_token_id\":1e10}",
         "config.json: \"bos_token_id\" is 10000000000; it must be an integer in [0, 2147483647]", KN_ERR_IO},
        {"llama2", "{" LLAMA_SMALL ",\"num_hidden_layers\":1,\"eos_token_id\":[1e10]}",
         "config.json: \"eos_token_id\" is 10000000000", KN_ERR_IO},
        {"llama2", "{" LLAMA_SMALL ",\"num_hidden_layers\":1.5}", "config.json: \"num_hidden_layers\" is 1.5", KN_ERR_IO},
        {"llama2", "{" LLAMA_SMALL ",\"num_hidden_layers\":1,\"head_dim\":-2}", "\"head_dim\" is -2", KN_ERR_IO},
        {"llama2", "{" LLAMA_SMALL ",\"num_hidden_layers\":1,\"num_attention_heads\":16}",
         "\"head_dim\" is missing, and hidden_size / num_attention_heads is 0", KN_ERR_IO},
    };
    char dir[] = "/tmp/kiln_lm_range_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        config_beside_weights(dir, cases[i].model, cases[i].config);
        CHECK_ERROR(lm_load(dir, NULL) != NULL, cases[i].code, cases[i].words);
    }
    remove_tree(dir);
}

/* Float fields are checked where they are read (a message naming the file and the key), not
 * left to fail later. */
static void test_float_fields_out_of_range_are_refused(void) {
    char dir[] = "/tmp/kiln_lm_float_XXXXXX", path[600];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/config.json", dir);
    lm_config cfg;
    struct { const char *from, *to, *words; } cases[] = {
        {"\"rope_theta\":\t500000", "\"rope_theta\":\t0", "\"rope_parameters.rope_theta\" is 0; it must be a finite number > 0"},
        {"\"rope_theta\":\t500000", "\"rope_theta\":\t-1", "\"rope_parameters.rope_theta\" is -1"},
        {"\"rope_theta\":\t500000", "\"rope_theta\":\t1e999", "\"rope_parameters.rope_theta\" is inf"},
        {"\"factor\":\t8", "\"factor\":\t-8", "\"rope_parameters.factor\" is -8"},
        {"\"low_freq_factor\":\t1", "\"low_freq_factor\":\t5", "\"rope_parameters.high_freq_factor\" must be above"},
        {"\"rms_norm_eps\":\t1e-05", "\"rms_norm_eps\":\t0", "\"rms_norm_eps\" is 0; it must be a finite number > 0"},
        {"\"attention_dropout\":\t0", "\"attention_dropout\":\t1", "\"attention_dropout\" is 1"},
        {"\"tie_word_embeddings\":\ttrue", "\"tie_word_embeddings\":\t1", "\"tie_word_embeddings\" is 1; it must be true or false"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        edited_config(dir, cases[i].from, cases[i].to);
        CHECK_ERROR(lm_config_load(path, &cfg) == KN_OK, KN_ERR_IO, cases[i].words);
    }
    remove_tree(dir);
}

/* config.json is read as Python's json reads it: a repeated key keeps its last value, bytes
 * after the value are an error, and a file past the size cap is refused by name. */
static void test_config_json_is_read_as_transformers_reads_it(void) {
    char dir[] = "/tmp/kiln_lm_json_XXXXXX", path[600];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/config.json", dir);
    lm_config cfg;
    edited_config(dir, "\"architectures\"", "\"num_hidden_layers\": 7, \"architectures\"");
    CHECK(lm_config_load(path, &cfg) == KN_OK && cfg.n_layers == 2); /* the file's later 2 wins */
    edited_config(dir, "\"vocab_size\":\t512", "\"vocab_size\":\t512, \"num_hidden_layers\": 3");
    CHECK(lm_config_load(path, &cfg) == KN_OK && cfg.n_layers == 3);
    edited_config(dir, "\"vocab_size\":\t512\n}", "\"vocab_size\":\t512\n}\n}");
    CHECK_ERROR(lm_config_load(path, &cfg) == KN_OK, KN_ERR_IO, "config.json: not valid JSON (bytes after the value, line");
    FILE *f = fopen(path, "wb");
    CHECK(f && fputc('{', f) != EOF);
    for (int i = 0; f && i < (17 << 20) / 64; i++) fputs("                                                                ", f);
    if (f) fputs("}", f), fclose(f);
    CHECK_ERROR(lm_config_load(path, &cfg) == KN_OK, KN_ERR_IO, "config.json: larger than 16 MiB, kiln's limit");
    remove_tree(dir);
}

/* A config is held against the weights' headers before anything is built from it: a layer
 * count or a head_dim the weights do not have is an error naming the key at once (not hours
 * of building 100000 layers, or gigabytes of rotary tables, before the shapes are compared). */
static void test_config_is_checked_against_the_weights_before_building(void) {
    char dir[] = "/tmp/kiln_lm_headers_XXXXXX", link[600];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(link, sizeof link, "%s/model.safetensors", dir);
    CHECK(symlink(LM_DIR "llama3/model.safetensors", link) == 0);
    edited_config(dir, "\"num_hidden_layers\":\t2", "\"num_hidden_layers\":\t100000");
    CHECK_ERROR(lm_load(dir, NULL) != NULL, KN_ERR_SHAPE,
                "model.safetensors: no tensor 'model.layers.99999.input_layernorm.weight', which");
    CHECK_ERROR(lm_load(dir, NULL) != NULL, KN_ERR_SHAPE, "config.json's num_hidden_layers 100000 needs");
    edited_config(dir, "\"head_dim\":\t16", "\"head_dim\":\t1000000000");
    CHECK_ERROR(lm_load(dir, NULL) != NULL, KN_ERR_SHAPE,
                "config.json: num_attention_heads 4 and head_dim 1000000000 make 'model.layers.0.self_attn.q_proj.weight' "
                "[4000000000, 64], but");
    edited_config(dir, "\"vocab_size\":\t512", "\"vocab_size\":\t2147483647");
    CHECK_ERROR(lm_load(dir, NULL) != NULL, KN_ERR_SHAPE, "vocab_size 2147483647 and hidden_size 64 make");
    unlink(link);
    CHECK(symlink(LM_DIR "gpt2/model.safetensors", link) == 0);
    edit_config_of("gpt2", dir, "\"n_layer\":\t2", "\"n_layer\":\t100000");
    CHECK_ERROR(lm_load(dir, NULL) != NULL, KN_ERR_SHAPE, "no tensor 'h.99999.ln_1.weight', which");
    remove_tree(dir);
}

/* Mistral's sliding_window: absent is transformers' default (4096), null is none, and the
 * window is what makes the fixture's logits (without it they differ). */
static void test_mistral_sliding_window_config(void) {
    char dir[] = "/tmp/kiln_lm_window_XXXXXX", path[600];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/config.json", dir);
    lm_config cfg;
    CHECK(lm_config_load(LM_DIR "mistral/config.json", &cfg) == KN_OK && cfg.family == LM_MISTRAL &&
          cfg.sliding_window == 4 && !cfg.attention_bias);
    edit_config_of("mistral", dir, "\"sliding_window\":\t4,", "");
    CHECK(lm_config_load(path, &cfg) == KN_OK && cfg.sliding_window == 4096);
    edit_config_of("mistral", dir, "\"sliding_window\":\t4", "\"sliding_window\":\t0");
    CHECK_ERROR(lm_config_load(path, &cfg) == KN_OK, KN_ERR_IO, "\"sliding_window\" is 0");
    edit_config_of("mistral", dir, "\"sliding_window\":\t4", "\"sliding_window\":\tnull");
    CHECK(lm_config_load(path, &cfg) == KN_OK && cfg.sliding_window == 0);
    config_beside_weights(dir, "mistral", ""); /* the link; the config is written again below */
    edit_config_of("mistral", dir, "\"sliding_window\":\t4", "\"sliding_window\":\tnull");
    lm *m = lm_load(dir, NULL);
    double err = logits_error(m, "mistral");
    CHECK_MSG(err > 1e-2, "without its window, mistral's logits still match (%.3g): the window does not matter", err);
    lm_free(m);
    remove_tree(dir);
}

int main(void) {
    RUN(test_logits_match_transformers_in_f32);
    RUN(test_greedy_tokens_match_generate);
    RUN(test_cached_decode_equals_uncached_forward);
    RUN(test_left_padded_batch_rows_equal_unpadded_rows);
    RUN(test_loss_matches_transformers);
    RUN(test_loss_backward_reaches_every_parameter);
    RUN(test_sharded_files_load_as_the_single_file);
    RUN(test_f16_and_bf16_files_load);
    RUN(test_meta_device_load_gives_shapes_only);
    RUN(test_gpt2_without_the_transformer_prefix);
    RUN(test_saved_weights_load_back);
    RUN(test_rope_frequencies_match_transformers);
    RUN(test_bad_input_is_an_error_naming_the_file);
    RUN(test_out_of_range_config_numbers_are_errors_naming_the_key);
    RUN(test_float_fields_out_of_range_are_refused);
    RUN(test_config_json_is_read_as_transformers_reads_it);
    RUN(test_config_is_checked_against_the_weights_before_building);
    RUN(test_mistral_sliding_window_config);
    return test_summary();
}
