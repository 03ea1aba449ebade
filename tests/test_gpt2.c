/* The GPT-2 model: parameter names and count, loading Hugging Face files (and refusing bad
 * ones), logits, loss and per-parameter gradients against PyTorch's on the committed fixture,
 * and a tiny GPT whose loss falls. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpt2/gpt2.h"
#include "harness.h"
#include "lm/lm.h"

#define FIXTURE KILN_SOURCE_DIR "/tests/fixtures/gpt2_train"

static cJSON *expected(void) {
    FILE *f = fopen(FIXTURE "/expected.json", "rb");
    if (!f) return NULL;
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    return cJSON_Parse(text);
}

static void test_names_and_size_of_gpt2_small(void) {
    kn_set_default_device(KN_META); /* shapes only: no memory for 124M parameters */
    gpt2_config cfg = gpt2_config_124m();
    gpt2 *m = gpt2_new(&cfg);
    kn_set_default_device(KN_CPU);
    CHECK(m && gpt2_num_params(m) == 124439808); /* GPT-2 small, lm_head tied */
    CHECK(m && strcmp(m->names[0], "transformer.wte.weight") == 0);
    CHECK(m && strcmp(m->names[2], "transformer.h.0.ln_1.weight") == 0);
    CHECK(m && strcmp(m->names[m->n_params - 1], "transformer.ln_f.bias") == 0);
    gpt2_free(m);
    gpt2_config bad = cfg;
    bad.n_head = 5;
    CHECK_ERROR(gpt2_new(&bad) != NULL, KN_ERR_ARG, "not a multiple of n_head");
}

/* Micro-batch 0 of the fixture: rows b read tokens [b*T, b*T + T] (batch rule of data.h). */
static void fixture_batch(kn_tensor **x, kn_tensor **y, int64_t B, int64_t T) {
    kn_token_file *f = kn_token_file_open(FIXTURE "/tokens.bin", KN_TOKENS_U16, 0);
    int64_t *tok = malloc(sizeof *tok * (size_t)(B * T + 1)), *xs = malloc(sizeof *xs * (size_t)(B * T)),
            *ys = malloc(sizeof *ys * (size_t)(B * T));
    CHECK(f && kn_token_file_read(f, 0, B * T + 1, tok) == KN_OK);
    for (int64_t i = 0; i < B * T; i++) xs[i] = tok[i], ys[i] = tok[i + 1];
    *x = kn_from_host(xs, KN_I64, KN_SHAPE(B, T), KN_CPU);
    *y = kn_from_host(ys, KN_I64, KN_SHAPE(B, T), KN_CPU);
    free(tok), free(xs), free(ys);
    kn_token_file_close(f);
}

static void test_matches_pytorch_on_the_fixture(void) {
    kn_scope_push();
    cJSON *e = expected();
    gpt2_config cfg;
    CHECK(gpt2_config_load(FIXTURE "/config.json", &cfg) == KN_OK);
    gpt2 *m = gpt2_new(&cfg);
    CHECK(m && gpt2_load_weights(m, FIXTURE "/init.safetensors") == KN_OK);
    const cJSON *micro0 = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(e, "step0"), "float64"), "micro0");
    kn_tensor *x, *y;
    fixture_batch(&x, &y, 4, 16);
    kn_tensor *logits = gpt2_forward(m, x);
    double *lv = read_f64(logits);
    const cJSON *want = cJSON_GetObjectItem(micro0, "logits_b0_t0_first8");
    for (int i = 0; lv && i < 8; i++) {
        double w = cJSON_GetArrayItem(want, i)->valuedouble;
        CHECK_MSG(fabs(lv[i] - w) <= 1e-5 + 1e-4 * fabs(w), "logit %d: %.9g, PyTorch %.9g", i, lv[i], w);
    }
    free(lv);
    kn_tensor *loss = gpt2_loss(m, x, y);
    double l = NAN, want_loss = cJSON_GetObjectItem(micro0, "loss")->valuedouble;
    CHECK(kn_item(loss, &l) == KN_OK && fabs(l - want_loss) <= 1e-5 * want_loss);
    CHECK(kn_backward(loss) == KN_OK);
    const cJSON *norms = cJSON_GetObjectItem(micro0, "grad_norms");
    for (int i = 0; m && i < m->n_params; i++) {
        double got = NAN, w = cJSON_GetObjectItem(norms, m->names[i])->valuedouble;
        kn_tensor *g = kn_grad(m->params[i]);
        CHECK_MSG(g && kn_item(kn_norm(g, 2, KN_ALL_DIMS, false), &got) == KN_OK && fabs(got - w) <= 1e-7 + 1e-4 * w,
                  "%s: gradient norm %.9g, PyTorch %.9g", m->names[i], got, w);
    }
    gpt2_free(m);
    cJSON_Delete(e);
    kn_scope_pop();
}

static void test_save_load_round_trip_and_bad_files(void) {
    kn_scope_push();
    gpt2_config cfg = {.n_layer = 1, .n_head = 2, .n_embd = 8, .vocab_size = 11, .n_positions = 5,
                       .layer_norm_epsilon = 1e-5, .tie_word_embeddings = true};
    gpt2 *a = gpt2_new(&cfg), *b = gpt2_new(&cfg);
    char path[] = "/tmp/kiln-gpt2-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0 && a && b && gpt2_save_weights(a, path) == KN_OK && gpt2_load_weights(b, path) == KN_OK);
    for (int i = 0; a && b && i < a->n_params; i++) {
        double *va = read_f64(a->params[i]), *vb = read_f64(b->params[i]);
        CHECK_MSG(va && vb && memcmp(va, vb, sizeof(double) * (size_t)kn_numel(a->params[i])) == 0, "%s differs", a->names[i]);
        free(va), free(vb);
    }
    /* A file with its own lm_head.weight unties a tied model's head. */
    gpt2_config untied = cfg;
    untied.tie_word_embeddings = false;
    gpt2 *u = gpt2_new(&untied);
    CHECK(u && gpt2_save_weights(u, path) == KN_OK && gpt2_load_weights(b, path) == KN_OK);
    CHECK(b && b->lm_head && !b->cfg.tie_word_embeddings && b->n_params == u->n_params);
    double *hu = u ? read_f64(u->lm_head) : NULL, *hb = b && b->lm_head ? read_f64(b->lm_head) : NULL;
    CHECK(hu && hb && memcmp(hu, hb, sizeof(double) * (size_t)kn_numel(u->lm_head)) == 0);
    free(hu), free(hb);
    gpt2_free(u);
    gpt2_config wider = cfg;
    wider.n_embd = 12;
    gpt2 *c = gpt2_new(&wider);
    CHECK_ERROR(gpt2_load_weights(c, path) == KN_OK, KN_ERR_SHAPE, "transformer.wte.weight");
    CHECK_ERROR(gpt2_load_weights(c, FIXTURE "/tokens.bin") == KN_OK, KN_ERR_IO, "tokens.bin");
    CHECK(truncate(path, 64) == 0);
    CHECK_ERROR(gpt2_load_weights(b, path) == KN_OK, KN_ERR_IO, path);
    CHECK_ERROR(gpt2_config_load(FIXTURE "/tokens.bin", &wider) == KN_OK, KN_ERR_IO, "not valid JSON");
    CHECK_ERROR(gpt2_config_load("/nonexistent/config.json", &wider) == KN_OK, KN_ERR_IO, "cannot open");
    FILE *f = fopen(path, "w");
    fputs("{\"model_type\": \"llama\", \"n_layer\": 2}", f);
    fclose(f);
    CHECK_ERROR(gpt2_config_load(path, &wider) == KN_OK, KN_ERR_IO, "\"model_type\" is \"llama\"");
    f = fopen(path, "w");
    fputs("{\"model_type\": \"gpt2\", \"n_layer\": 2, \"n_head\": 2, \"n_embd\": 8, \"vocab_size\": -3}", f);
    fclose(f);
    CHECK_ERROR(gpt2_config_load(path, &wider) == KN_OK, KN_ERR_IO, "vocab_size");
    unlink(path);
    if (fd >= 0) close(fd);
    gpt2_free(a), gpt2_free(b), gpt2_free(c);
    kn_scope_pop();
}

/* gpt2_config_load of a config.json holding text. */
static kn_status load_config_text(const char *text, gpt2_config *c) {
    char path[] = "/tmp/kiln-gpt2-config-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    if (fd >= 0) close(fd);
    kn_status st = gpt2_config_load(path, c);
    unlink(path);
    return st;
}

#define SMALL "\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 8, \"vocab_size\": 11, \"n_positions\": 5"

/* Every number is range-checked before it becomes an int (shared/repro/cfg-*.json), and the
 * file is read as Python's json reads it (transformers): no trailing bytes, the last of a
 * repeated key. */
static void test_config_numbers_are_checked_before_they_are_cast(void) {
    gpt2_config c;
    CHECK_ERROR(load_config_text("{\"n_layer\":6666666664}", &c) == KN_OK, KN_ERR_IO,
                "\"n_layer\" is 6666666664; it must be an integer in [1, 2147483647]");
    CHECK_ERROR(load_config_text("{\"model_type\":\"gpt2\",\"n_layer\":1,\"n_head\":1,\"n_embd\":600000000,"
                                 "\"vocab_size\":8,\"n_positions\":8}", &c) == KN_OK,
                KN_ERR_ARG, "4 * n_embd, overflows");
    CHECK_ERROR(load_config_text("{" SMALL ", \"n_head\": 2.5}", &c) == KN_OK, KN_ERR_IO, "\"n_head\" is 2.5");
    CHECK_ERROR(load_config_text("{" SMALL ", \"n_inner\": -1e300}", &c) == KN_OK, KN_ERR_IO, "\"n_inner\" is -1e+300");
    CHECK_ERROR(load_config_text("{" SMALL ", \"layer_norm_epsilon\": 0}", &c) == KN_OK, KN_ERR_IO,
                "\"layer_norm_epsilon\" is 0; it must be a finite number > 0");
    CHECK_ERROR(load_config_text("{" SMALL ", \"resid_pdrop\": 1}", &c) == KN_OK, KN_ERR_IO, "\"resid_pdrop\" is 1");
    CHECK_ERROR(load_config_text("{" SMALL "} {}", &c) == KN_OK, KN_ERR_IO, "bytes after the value");
    CHECK(load_config_text("{" SMALL ", \"n_layer\": 3}\n", &c) == KN_OK && c.n_layer == 3 && c.n_inner == 0);
}

/* config.json written for a model reads back as the same config, through gpt2_config_load
 * and models/lm's loader; a base config's other keys (token ids) survive, GPT-2's own
 * <|endoftext|> is the default only where the vocabulary has it. */
static void test_config_save_round_trip(void) {
    char path[] = "/tmp/kiln-gpt2-config-XXXXXX";
    int fd = mkstemp(path);
    gpt2_config cfg = {.n_layer = 3, .n_head = 2, .n_embd = 8, .n_inner = 24, .vocab_size = 50257, .n_positions = 7,
                       .layer_norm_epsilon = 1e-6, .dropout = 0.25, .tie_word_embeddings = false}, back;
    CHECK(fd >= 0 && gpt2_config_save(&cfg, NULL, path) == KN_OK && gpt2_config_load(path, &back) == KN_OK);
    CHECK(back.n_layer == 3 && back.n_head == 2 && back.n_embd == 8 && back.n_inner == 24 && back.vocab_size == 50257 &&
          back.n_positions == 7 && back.layer_norm_epsilon == 1e-6 && back.dropout == 0.25 && !back.tie_word_embeddings);
    lm_config lc;
    CHECK(lm_config_load(path, &lc) == KN_OK && lc.family == LM_GPT2 && lc.n_eos == 1 && lc.eos_token_ids[0] == 50256);
    /* A small vocabulary has no 50256: null ids; a base's ids are kept, its shape replaced. */
    cfg.vocab_size = 64;
    CHECK(gpt2_config_save(&cfg, NULL, path) == KN_OK && lm_config_load(path, &lc) == KN_OK && lc.n_eos == 0 &&
          lc.bos_token_id == -1);
    CHECK(gpt2_config_save(&cfg, KILN_SOURCE_DIR "/tests/fixtures/lm/gpt2/config.json", path) == KN_OK);
    CHECK(lm_config_load(path, &lc) == KN_OK && lc.n_eos == 1 && lc.eos_token_ids[0] == 2 && lc.bos_token_id == 1 &&
          lc.n_layers == 3 && lc.hidden_size == 8 && lc.vocab_size == 64);
    CHECK_ERROR(gpt2_config_save(&cfg, "/nonexistent/config.json", path) == KN_OK, KN_ERR_IO, "/nonexistent/config.json");
    CHECK_ERROR(gpt2_config_save(&cfg, NULL, "/nonexistent/dir/config.json") == KN_OK, KN_ERR_IO, "/nonexistent/dir/config.json");
    unlink(path);
    if (fd >= 0) close(fd);
}

int main(void) {
    RUN(test_names_and_size_of_gpt2_small);
    RUN(test_config_numbers_are_checked_before_they_are_cast);
    RUN(test_save_load_round_trip_and_bad_files);
    RUN(test_config_save_round_trip);
    RUN(test_matches_pytorch_on_the_fixture);
    return test_summary();
}
