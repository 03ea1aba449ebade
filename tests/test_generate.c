/* lm_generate against transformers' generate() on the tiny models of tests/fixtures/lm/
 * (generate.json, made by make_generate_fixture.py): greedy ids alone and in a left-padded
 * batch, the repetition penalty, text and stop strings through the tokenizers beside them, EOS,
 * the context limit, and generation_config.json. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "lm/generate.h"

#define FIXTURES KILN_SOURCE_DIR "/tests/fixtures"

static cJSON *fixture;
static char tmp[256];

/* A JSON array of ids into out (at most cap); the count. */
static int ids_of(const cJSON *a, int32_t *out, int cap) {
    int n = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, a) if (n < cap) out[n++] = (int32_t)v->valuedouble;
    return n;
}

static bool same_ids(const int32_t *got, size_t n_got, const cJSON *want, const char *what, int row) {
    int32_t w[64];
    int n = ids_of(want, w, 64);
    bool ok = (int)n_got == n && memcmp(got, w, (size_t)n * sizeof *w) == 0;
    if (!ok) {
        fprintf(stderr, "  %s row %d: kiln made", what, row);
        for (size_t i = 0; i < n_got; i++) fprintf(stderr, " %d", got[i]);
        fprintf(stderr, "; transformers");
        for (int i = 0; i < n; i++) fprintf(stderr, " %d", w[i]);
        fprintf(stderr, "\n");
    }
    return ok;
}

static lm *load(const char *name) {
    char dir[512];
    snprintf(dir, sizeof dir, FIXTURES "/lm/%s", name);
    lm_load_options lo = {.device = KN_CPU, .dtype = KN_F32};
    lm *m = lm_load(dir, &lo);
    CHECK_MSG(m != NULL, "%s: %s", dir, kn_last_error());
    return m;
}

/* The fixture's prompts as arrays. */
typedef struct prompt_set {
    int n;
    int32_t ids[8][32];
    size_t lens[8];
    const int32_t *ptrs[8];
} prompt_set;

static void prompts(prompt_set *p) {
    *p = (prompt_set){0};
    const cJSON *a;
    cJSON_ArrayForEach(a, cJSON_GetObjectItem(fixture, "prompts")) {
        p->lens[p->n] = (size_t)ids_of(a, p->ids[p->n], 32);
        p->ptrs[p->n] = p->ids[p->n];
        p->n++;
    }
}

static lm_generate_options greedy_options(void) {
    lm_generate_options o = lm_generate_defaults();
    o.max_new_tokens = cJSON_GetObjectItem(fixture, "max_new_tokens")->valueint;
    return o;
}

/* ---- ids ------------------------------------------------------------------------------------ */

static void check_model_greedy(const char *name, const cJSON *ref) {
    lm *m = load(name);
    if (!m) return;
    prompt_set p;
    prompts(&p);
    lm_generate_options o = greedy_options();
    lm_generation g;
    char what[64];
    for (int b = 0; b < p.n; b++) { /* one at a time */
        CHECK(lm_generate(m, NULL, 1, &p.ptrs[b], &p.lens[b], &o, &g) == KN_OK);
        snprintf(what, sizeof what, "%s alone", name);
        if (g.n_rows == 1) CHECK(same_ids(g.ids[0], g.n_ids[0], cJSON_GetArrayItem(cJSON_GetObjectItem(ref, "greedy"), b), what, b));
        CHECK(g.prefill_tokens == (int64_t)p.lens[b]);
        lm_generation_free(&g);
    }
    /* all at once, left-padded: each row as alone */
    CHECK(lm_generate(m, NULL, p.n, p.ptrs, p.lens, &o, &g) == KN_OK);
    snprintf(what, sizeof what, "%s batched", name);
    for (int b = 0; b < g.n_rows; b++)
        CHECK(same_ids(g.ids[b], g.n_ids[b], cJSON_GetArrayItem(cJSON_GetObjectItem(ref, "greedy"), b), what, b));
    lm_generation_free(&g);
    /* the repetition penalty over prompt and generated ids */
    o.sampling.repetition_penalty = cJSON_GetObjectItem(fixture, "repetition_penalty")->valuedouble;
    CHECK(lm_generate(m, NULL, p.n, p.ptrs, p.lens, &o, &g) == KN_OK);
    snprintf(what, sizeof what, "%s penalty", name);
    for (int b = 0; b < g.n_rows; b++)
        CHECK(same_ids(g.ids[b], g.n_ids[b], cJSON_GetArrayItem(cJSON_GetObjectItem(ref, "greedy_penalty"), b), what, b));
    lm_generation_free(&g);
    lm_free(m);
}

static void test_greedy_ids_match_transformers_alone_and_batched(void) {
    const cJSON *model;
    cJSON_ArrayForEach(model, cJSON_GetObjectItem(fixture, "models")) check_model_greedy(model->string, model);
}

static void test_an_eos_id_ends_its_row_and_the_others_go_on(void) {
    lm *m = load("llama3");
    if (!m) return;
    const cJSON *greedy = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(fixture, "models"), "llama3"), "greedy");
    prompt_set p;
    prompts(&p);
    lm_generate_options o = greedy_options();
    int32_t row0[32];
    ids_of(cJSON_GetArrayItem(greedy, 0), row0, 32);
    o.eos_ids[0] = row0[3]; /* row 0's fourth id ends it; does it occur earlier in other rows? then they end too */
    o.n_eos = 1;
    lm_generation g;
    CHECK(lm_generate(m, NULL, p.n, p.ptrs, p.lens, &o, &g) == KN_OK);
    for (int b = 0; b < g.n_rows; b++) {
        int32_t want[32];
        int n = ids_of(cJSON_GetArrayItem(greedy, b), want, 32), end = n;
        for (int i = 0; i < n; i++)
            if (want[i] == row0[3]) {
                end = i + 1;
                break;
            }
        CHECK_MSG((int)g.n_ids[b] == end && memcmp(g.ids[b], want, (size_t)end * sizeof *want) == 0,
                  "row %d: %zu ids, want %d ending at the EOS", b, g.n_ids[b], end);
    }
    CHECK(g.n_ids[0] == 4);
    lm_generation_free(&g);
    o.ignore_eos = true;
    CHECK(lm_generate(m, NULL, 1, p.ptrs, p.lens, &o, &g) == KN_OK);
    CHECK(g.n_ids[0] == (size_t)o.max_new_tokens);
    lm_generation_free(&g);
    o.max_new_tokens = 0;
    CHECK(lm_generate(m, NULL, 1, p.ptrs, p.lens, &o, &g) == KN_OK);
    CHECK(g.n_rows == 1 && g.n_ids[0] == 0);
    lm_generation_free(&g);
    lm_free(m);
}

static void test_seeded_sampling_repeats_itself(void) {
    lm *m = load("qwen2");
    if (!m) return;
    prompt_set p;
    prompts(&p);
    lm_generate_options o = greedy_options();
    o.sampling = (lm_sampling){.temperature = 1.5, .top_k = 0, .top_p = 0.95, .repetition_penalty = 1, .seed = 11};
    lm_generation a, b, c;
    CHECK(lm_generate(m, NULL, p.n, p.ptrs, p.lens, &o, &a) == KN_OK);
    CHECK(lm_generate(m, NULL, p.n, p.ptrs, p.lens, &o, &b) == KN_OK);
    o.sampling.seed = 12;
    CHECK(lm_generate(m, NULL, p.n, p.ptrs, p.lens, &o, &c) == KN_OK);
    bool differs = false;
    for (int r = 0; r < a.n_rows && r < b.n_rows && r < c.n_rows; r++) {
        CHECK(a.n_ids[r] == b.n_ids[r] && memcmp(a.ids[r], b.ids[r], a.n_ids[r] * sizeof(int32_t)) == 0);
        differs |= a.n_ids[r] != c.n_ids[r] || memcmp(a.ids[r], c.ids[r], a.n_ids[r] * sizeof(int32_t)) != 0;
    }
    CHECK_MSG(differs, "seeds 11 and 12 drew the same ids");
    lm_generation_free(&a);
    lm_generation_free(&b);
    lm_generation_free(&c);
    lm_free(m);
}

static void test_a_prompt_longer_than_the_context_is_an_error(void) {
    lm *m = load("gpt2"); /* 64 positions */
    if (!m) return;
    int32_t ids[65] = {0};
    const int32_t *ptr = ids;
    size_t len = 65, empty = 0;
    lm_generate_options o = greedy_options();
    lm_generation g;
    CHECK_ERROR(lm_generate(m, NULL, 1, &ptr, &len, &o, &g) == KN_OK, KN_ERR_ARG,
                "65 tokens long, longer than the model's context of 64 tokens");
    CHECK_ERROR(lm_generate(m, NULL, 1, &ptr, &empty, &o, &g) == KN_OK, KN_ERR_ARG, "no tokens");
    ids[3] = 100000;
    len = 5;
    CHECK_ERROR(lm_generate(m, NULL, 1, &ptr, &len, &o, &g) == KN_OK, KN_ERR_INDEX, "vocabulary");
    /* A prompt that fills the context leaves room for one token: generation stops there. */
    ids[3] = 0;
    len = 64;
    CHECK(lm_generate(m, NULL, 1, &ptr, &len, &o, &g) == KN_OK);
    CHECK(g.n_ids[0] == 1);
    lm_generation_free(&g);
    lm_free(m);
}

/* ---- text ------------------------------------------------------------------------------------ */

typedef struct collected {
    char text[1024];
    int pieces;
} collected;

static bool collect(void *ctx, int row, const char *text, size_t len) {
    collected *c = ctx;
    CHECK(row == 0);
    strncat(c->text, text, len);
    c->pieces++;
    return true;
}

static void check_text(const char *name, const cJSON *ref) {
    const cJSON *t = cJSON_GetObjectItem(ref, "text");
    char dir[512];
    snprintf(dir, sizeof dir, FIXTURES "/lm/%s", name);
    lm_load_options lo = {.device = KN_CPU, .dtype = KN_F32};
    lm *m = lm_load(dir, &lo);
    kn_tokenizer *tok = kn_tokenizer_load(dir);
    CHECK_MSG(m && tok, "%s: %s", dir, kn_last_error());
    if (!m || !tok) goto done;
    const char *text = cJSON_GetObjectItem(t, "prompt_text")->valuestring;
    int32_t *ids, want[64];
    size_t n;
    CHECK(kn_tokenizer_encode(tok, text, strlen(text), true, &ids, &n) == KN_OK);
    CHECK((int)n == ids_of(cJSON_GetObjectItem(t, "prompt"), want, 64) && memcmp(ids, want, n * sizeof *ids) == 0);
    lm_generate_options o = lm_generate_defaults();
    o.max_new_tokens = 12;
    collected c = {0};
    o.on_text = collect;
    o.ctx = &c;
    const int32_t *ptr = ids;
    lm_generation g;
    CHECK(lm_generate(m, tok, 1, &ptr, &n, &o, &g) == KN_OK);
    if (g.n_rows == 1) {
        CHECK(same_ids(g.ids[0], g.n_ids[0], cJSON_GetObjectItem(t, "ids"), name, 0));
        const char *want_text = cJSON_GetObjectItem(t, "text")->valuestring;
        CHECK_MSG(strcmp(g.text[0], want_text) == 0, "%s: text \"%s\", transformers \"%s\"", name, g.text[0], want_text);
        CHECK_MSG(strcmp(c.text, want_text) == 0, "%s: streamed \"%s\"", name, c.text);
    }
    lm_generation_free(&g);
    const cJSON *stop = cJSON_GetObjectItem(t, "stop");
    if (cJSON_IsString(stop)) { /* a stop string spanning two tokens: neither it nor what follows */
        const char *stops[] = {stop->valuestring};
        o.stop = stops;
        o.n_stop = 1;
        memset(&c, 0, sizeof c);
        CHECK(lm_generate(m, tok, 1, &ptr, &n, &o, &g) == KN_OK);
        const char *before = cJSON_GetObjectItem(t, "before_stop")->valuestring;
        if (g.n_rows == 1) {
            CHECK_MSG(strcmp(g.text[0], before) == 0, "%s: stop \"%s\": text \"%s\", want \"%s\"", name, stop->valuestring,
                      g.text[0], before);
            CHECK_MSG(strcmp(c.text, before) == 0, "%s: streamed \"%s\"", name, c.text);
            CHECK(g.n_ids[0] < 12);
        }
        lm_generation_free(&g);
    }
    free(ids);
done:
    kn_tokenizer_free(tok);
    lm_free(m);
}

static void test_text_and_stop_strings_match_transformers(void) {
    const cJSON *model;
    cJSON_ArrayForEach(model, cJSON_GetObjectItem(fixture, "models")) check_text(model->string, model);
}

static bool stop_after_two_pieces(void *ctx, int row, const char *text, size_t len) {
    int *calls = ctx;
    return ++*calls < 2;
}

static void test_on_text_returning_false_stops_generation(void) {
    const char *dir = FIXTURES "/lm/qwen3";
    lm_load_options lo = {.device = KN_CPU, .dtype = KN_F32};
    lm *m = lm_load(dir, &lo);
    kn_tokenizer *tok = kn_tokenizer_load(dir);
    if (m && tok) {
        int32_t ids[] = {72, 75, 267, 85};
        const int32_t *ptr = ids;
        size_t n = 4;
        int calls = 0;
        lm_generate_options o = lm_generate_defaults();
        o.max_new_tokens = 12;
        o.ignore_eos = true;
        o.on_text = stop_after_two_pieces;
        o.ctx = &calls;
        lm_generation g;
        CHECK(lm_generate(m, tok, 1, &ptr, &n, &o, &g) == KN_OK);
        CHECK(calls == 2 && g.n_ids[0] < 12);
        lm_generation_free(&g);
    }
    kn_tokenizer_free(tok);
    lm_free(m);
}

/* ---- generation_config.json ----------------------------------------------------------------- */

static kn_status load_config_text(const char *json, lm_generate_options *o) {
    char path[512];
    snprintf(path, sizeof path, "%s/generation_config.json", tmp);
    FILE *f = fopen(path, "w");
    fputs(json, f);
    fclose(f);
    *o = lm_generate_defaults();
    return lm_generation_config_load(tmp, o);
}

static void test_generation_config_is_read_as_transformers_reads_it(void) {
    lm_generate_options o;
    CHECK(load_config_text("{\"do_sample\": true, \"temperature\": 0.7, \"top_p\": 0.9, \"top_k\": 20, "
                           "\"repetition_penalty\": 1.1, \"max_new_tokens\": 33, \"eos_token_id\": [5, 6]}", &o) == KN_OK);
    CHECK(o.sampling.temperature == 0.7 && o.sampling.top_p == 0.9 && o.sampling.top_k == 20);
    CHECK(o.sampling.repetition_penalty == 1.1 && o.max_new_tokens == 33);
    CHECK(o.n_eos == 2 && o.eos_ids[0] == 5 && o.eos_ids[1] == 6);
    /* without do_sample, greedy (transformers ignores the temperature then) */
    CHECK(load_config_text("{\"temperature\": 0.7, \"eos_token_id\": 9}", &o) == KN_OK);
    CHECK(o.sampling.temperature == 0 && o.sampling.top_k == 50 && o.n_eos == 1 && o.eos_ids[0] == 9);
    CHECK(load_config_text("{\"do_sample\": true}", &o) == KN_OK);
    CHECK(o.sampling.temperature == 1 && o.n_eos == -1 && o.max_new_tokens == 64);
    CHECK_ERROR(load_config_text("{\"top_p\": 1.5}", &o) == KN_OK, KN_ERR_IO, "top_p");
    CHECK_ERROR(load_config_text("{\"eos_token_id\": \"x\"}", &o) == KN_OK, KN_ERR_IO, "eos_token_id");
    CHECK_ERROR(load_config_text("{\"do_sample\": 1}", &o) == KN_OK, KN_ERR_IO, "do_sample");
    CHECK_ERROR(load_config_text("{\"top_k\": ", &o) == KN_OK, KN_ERR_IO, "generation_config.json: not valid JSON");
    /* integers must be integers in range; a bad file changes nothing */
    CHECK_ERROR(load_config_text("{\"top_k\": 2.5}", &o) == KN_OK, KN_ERR_IO, "\"top_k\" is 2.5; it must be an integer");
    CHECK_ERROR(load_config_text("{\"max_new_tokens\": 1e300}", &o) == KN_OK, KN_ERR_IO, "\"max_new_tokens\" is 1e+300");
    CHECK_ERROR(load_config_text("{\"max_new_tokens\": 7, \"eos_token_id\": [2, 1e10]}", &o) == KN_OK, KN_ERR_IO,
                "\"eos_token_id\" is 10000000000");
    CHECK(o.max_new_tokens == 64 && o.n_eos == -1);
    CHECK(load_config_text("{\"max_new_tokens\": 7, \"max_new_tokens\": 9}", &o) == KN_OK && o.max_new_tokens == 9);
    char path[512];
    snprintf(path, sizeof path, "%s/generation_config.json", tmp);
    unlink(path);
    o = lm_generate_defaults();
    CHECK(lm_generation_config_load(tmp, &o) == KN_OK && o.max_new_tokens == 64); /* none: no change */
}

int main(void) {
    char *text = read_text_file(FIXTURES "/lm/generate.json");
    fixture = cJSON_Parse(text);
    free(text);
    if (!fixture) {
        fprintf(stderr, "cannot read " FIXTURES "/lm/generate.json\n");
        return 1;
    }
    snprintf(tmp, sizeof tmp, "/tmp/kiln_test_generate_XXXXXX");
    if (!mkdtemp(tmp)) return 1;
    kn_set_num_threads(2);
    RUN(test_greedy_ids_match_transformers_alone_and_batched);
    RUN(test_an_eos_id_ends_its_row_and_the_others_go_on);
    RUN(test_seeded_sampling_repeats_itself);
    RUN(test_a_prompt_longer_than_the_context_is_an_error);
    RUN(test_text_and_stop_strings_match_transformers);
    RUN(test_on_text_returning_false_stops_generation);
    RUN(test_generation_config_is_read_as_transformers_reads_it);
    cJSON_Delete(fixture);
    remove_tree(tmp);
    return test_summary();
}
