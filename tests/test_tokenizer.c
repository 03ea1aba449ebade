/* Tokenizers from tokenizer.json: ids and decodings identical to the Hugging Face `tokenizers`
 * library's for small real tokenizers of each layout (tests/fixtures/make_tokenizer_fixtures.py),
 * streaming decoding that never splits a character, and a clear error for each bad input. */
#define _GNU_SOURCE /* mkdtemp */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "tokenize/tok_internal.h"

#define FIXTURES KILN_SOURCE_DIR "/tests/fixtures/tokenizers"

static const char *kinds[] = {"gpt2", "llama3", "qwen2", "llama2", "llama2_metaspace"};

static cJSON *expected_for(const char *kind) {
    char path[512];
    snprintf(path, sizeof path, FIXTURES "/%s/expected.json", kind);
    char *s = read_text_file(path);
    cJSON *j = s ? cJSON_Parse(s) : NULL;
    free(s);
    CHECK_MSG(j != NULL, "cannot read %s", path);
    return j;
}

static kn_tokenizer *load_kind(const char *kind) {
    char path[512];
    snprintf(path, sizeof path, FIXTURES "/%s", kind);
    kn_tokenizer *t = kn_tokenizer_load(path);
    CHECK_MSG(t != NULL, "%s: %s", kind, kn_last_error());
    return t;
}

/* s[0..n) is well-formed UTF-8 that ends on a character boundary (a strict check of its own). */
static bool utf8_whole(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    for (size_t i = 0; i < n;) {
        int k = s[i] < 0x80 ? 1 : s[i] >= 0xC2 && s[i] <= 0xDF ? 2 : s[i] >= 0xE0 && s[i] <= 0xEF ? 3
                : s[i] >= 0xF0 && s[i] <= 0xF4 ? 4 : 0;
        if (k == 0 || i + (size_t)k > n) return false;
        for (int c = 1; c < k; c++)
            if ((s[i + c] & 0xC0) != 0x80) return false;
        i += (size_t)k;
    }
    return true;
}

/* ids[0..n) equal the JSON array want. */
static bool same_ids(const int32_t *ids, size_t n, const cJSON *want) {
    if ((size_t)cJSON_GetArraySize(want) != n) return false;
    for (size_t i = 0; i < n; i++)
        if (cJSON_GetArrayItem(want, (int)i)->valueint != ids[i]) return false;
    return true;
}

static void print_ids(const char *what, const int32_t *ids, size_t n) {
    fprintf(stderr, "  %s:", what);
    for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "\n");
}

static int32_t *ids_of(const cJSON *arr, size_t *n) {
    *n = (size_t)cJSON_GetArraySize(arr);
    int32_t *v = malloc((*n + 1) * sizeof *v);
    for (size_t i = 0; i < *n; i++) v[i] = cJSON_GetArrayItem(arr, (int)i)->valueint;
    return v;
}

static void test_encode_matches_the_library_for_every_kind_and_text(void) {
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        kn_tokenizer *t = load_kind(kinds[k]);
        cJSON *exp = expected_for(kinds[k]);
        if (!t || !exp) continue;
        CHECK_MSG(kn_tokenizer_vocab_size(t) == cJSON_GetObjectItem(exp, "vocab_size")->valueint, "%s: vocab size %lld",
                  kinds[k], (long long)kn_tokenizer_vocab_size(t));
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(exp, "cases")) {
            const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
            for (int special = 0; special < 2; special++) {
                const cJSON *want = cJSON_GetObjectItem(c, special ? "ids" : "ids_no_special");
                int32_t *ids = NULL;
                size_t n = 0;
                kn_status st = kn_tokenizer_encode(t, text, strlen(text), special, &ids, &n);
                CHECK_MSG(st == KN_OK && same_ids(ids, n, want), "%s: encode(\"%s\", add_special=%d) differs", kinds[k],
                          text, special);
                if (st == KN_OK && !same_ids(ids, n, want)) {
                    print_ids("kiln", ids, n);
                    char *w = cJSON_PrintUnformatted(want);
                    fprintf(stderr, "  want: %s\n", w);
                    free(w);
                }
                free(ids);
            }
        }
        cJSON_Delete(exp);
        kn_tokenizer_free(t);
    }
}

static void check_decode(const kn_tokenizer *t, const char *kind, const cJSON *c) {
    size_t n;
    int32_t *ids = ids_of(cJSON_GetObjectItem(c, "ids"), &n);
    for (int skip = 0; skip < 2; skip++) {
        const char *want = cJSON_GetObjectItem(c, skip ? "decoded_skip_special" : "decoded")->valuestring;
        char *text = NULL;
        size_t len = 0;
        kn_status st = kn_tokenizer_decode(t, ids, n, skip, &text, &len);
        CHECK_MSG(st == KN_OK && len == strlen(want) && memcmp(text, want, len) == 0,
                  "%s: decode(skip_special=%d) gave \"%s\", want \"%s\"", kind, skip, st == KN_OK ? text : kn_last_error(),
                  want);
        free(text);
    }
    free(ids);
}

static void test_decode_matches_the_library(void) {
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        kn_tokenizer *t = load_kind(kinds[k]);
        cJSON *exp = expected_for(kinds[k]);
        if (!t || !exp) continue;
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(exp, "cases")) check_decode(t, kinds[k], c);
        /* Arbitrary ids: broken UTF-8 becomes U+FFFD exactly where the library puts it. */
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(exp, "decodes")) check_decode(t, kinds[k], c);
        cJSON_Delete(exp);
        kn_tokenizer_free(t);
    }
}

/* Pushing ids one at a time: the pieces concatenate to decode's text and each is whole UTF-8. */
static void test_streaming_pieces_concatenate_to_the_decode(void) {
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        kn_tokenizer *t = load_kind(kinds[k]);
        cJSON *exp = expected_for(kinds[k]);
        if (!t || !exp) continue;
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(exp, "cases")) {
            size_t n;
            int32_t *ids = ids_of(cJSON_GetObjectItem(c, "ids"), &n);
            for (int skip = 0; skip < 2; skip++) {
                const char *want = cJSON_GetObjectItem(c, skip ? "decoded_skip_special" : "decoded")->valuestring;
                kn_detokenizer *d = kn_detokenizer_new(t, skip);
                char *all = calloc(strlen(want) * 2 + 64, 1);
                size_t used = 0;
                bool whole = true;
                for (size_t i = 0; i <= n && d; i++) {
                    size_t len = 0;
                    const char *piece = i < n ? kn_detokenizer_push(d, ids[i], &len) : kn_detokenizer_flush(d, &len);
                    CHECK(piece != NULL);
                    if (!piece || used + len > strlen(want) * 2 + 32) break;
                    /* Each piece on its own is valid UTF-8: no character is split across pieces. */
                    whole = whole && utf8_whole(piece, len);
                    memcpy(all + used, piece, len);
                    used += len;
                }
                CHECK_MSG(used == strlen(want) && memcmp(all, want, used) == 0, "%s: streamed \"%s\", want \"%s\"",
                          kinds[k], all, want);
                CHECK_MSG(whole, "%s: a streamed piece of \"%s\" splits a character", kinds[k], want);
                free(all);
                kn_detokenizer_free(d);
            }
            free(ids);
        }
        cJSON_Delete(exp);
        kn_tokenizer_free(t);
    }
}

/* Every vocabulary entry and added token of the file maps both ways. */
static void test_token_to_id_and_id_to_token_follow_the_file(void) {
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        kn_tokenizer *t = load_kind(kinds[k]);
        char path[512];
        snprintf(path, sizeof path, FIXTURES "/%s/tokenizer.json", kinds[k]);
        char *s = read_text_file(path);
        cJSON *j = s ? cJSON_Parse(s) : NULL;
        free(s);
        if (!t || !j) {
            CHECK(j != NULL);
            kn_tokenizer_free(t);
            continue;
        }
        const cJSON *it;
        int bad = 0;
        cJSON_ArrayForEach(it, cJSON_GetObjectItem(cJSON_GetObjectItem(j, "model"), "vocab")) {
            const char *back = kn_tokenizer_id_to_token(t, it->valueint);
            bad += kn_tokenizer_token_to_id(t, it->string) != it->valueint || !back || strcmp(back, it->string) != 0;
        }
        cJSON_ArrayForEach(it, cJSON_GetObjectItem(j, "added_tokens")) {
            int id = cJSON_GetObjectItem(it, "id")->valueint;
            const char *content = cJSON_GetObjectItem(it, "content")->valuestring;
            bad += kn_tokenizer_token_to_id(t, content) != id || strcmp(kn_tokenizer_id_to_token(t, id), content) != 0;
            bad += kn_tokenizer_is_special(t, id) != cJSON_IsTrue(cJSON_GetObjectItem(it, "special"));
        }
        CHECK_MSG(bad == 0, "%s: %d vocabulary entries do not map both ways", kinds[k], bad);
        CHECK(kn_tokenizer_token_to_id(t, "no such token \x01") == -1);
        CHECK(kn_tokenizer_id_to_token(t, (int32_t)kn_tokenizer_vocab_size(t)) == NULL);
        CHECK(kn_tokenizer_id_to_token(t, -1) == NULL);
        /* The library's token strings for the encoded ids. */
        cJSON *exp = expected_for(kinds[k]);
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(exp, "cases")) {
            const cJSON *ids = cJSON_GetObjectItem(c, "ids"), *tokens = cJSON_GetObjectItem(c, "tokens");
            for (int i = 0; i < cJSON_GetArraySize(ids); i++) {
                const char *tok = kn_tokenizer_id_to_token(t, cJSON_GetArrayItem(ids, i)->valueint);
                CHECK(tok && strcmp(tok, cJSON_GetArrayItem(tokens, i)->valuestring) == 0);
            }
        }
        cJSON_Delete(exp);
        cJSON_Delete(j);
        kn_tokenizer_free(t);
    }
}

static char tmp_dir[64];

/* Writes json to a file in the test's directory and loads it. */
static kn_tokenizer *load_text(const char *name, const char *json) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", tmp_dir, name);
    FILE *f = fopen(path, "wb");
    fputs(json, f);
    fclose(f);
    return kn_tokenizer_load(path);
}

#define BPE_AB "{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[[\"a\",\"b\"]]}"

static void test_bad_files_give_errors_naming_the_problem(void) {
    CHECK_ERROR(kn_tokenizer_load("/nonexistent/kiln/model") != NULL, KN_ERR_IO, "cannot open");
    CHECK_ERROR(kn_tokenizer_load(tmp_dir) != NULL, KN_ERR_IO, "tokenizer.json: cannot open");
    CHECK_ERROR(load_text("truncated.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\"") != NULL, KN_ERR_IO,
                "truncated.json: not valid JSON (parse error, line 1)");
    CHECK_ERROR(load_text("array.json", "[1, 2]") != NULL, KN_ERR_IO, "array.json: the JSON is not an object");
    CHECK_ERROR(load_text("nomodel.json", "{\"normalizer\": null}") != NULL, KN_ERR_IO, "no \"model\"");
    CHECK_ERROR(load_text("unigram.json", "{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}") != NULL, KN_ERR_IO,
                "model type \"Unigram\" is not supported");
    CHECK_ERROR(load_text("merge.json", "{\"model\": {\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},"
                                        "\"merges\":[[\"a\",\"zz\"]]}}") != NULL,
                KN_ERR_IO, "model.merges[0]: token \"zz\" is not in the vocabulary");
    CHECK_ERROR(load_text("merged.json", "{\"model\": {\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},"
                                         "\"merges\":[\"a b\"]}}") != NULL,
                KN_ERR_IO, "the merged token \"ab\" is not in the vocabulary");
    CHECK_ERROR(load_text("pair.json", "{\"model\": {\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[[\"a\"]]}}") != NULL,
                KN_ERR_IO, "model.merges[0]: not a pair of tokens");
    CHECK_ERROR(load_text("vocab.json", "{\"model\": {\"type\":\"BPE\",\"vocab\":{\"a\":-3},\"merges\":[]}}") != NULL,
                KN_ERR_IO, "model.vocab[\"a\"]: id is not an integer in [0, ");
    CHECK_ERROR(load_text("huge.json", "{\"model\": {\"type\":\"BPE\",\"vocab\":{\"a\":2147483648},\"merges\":[]}}") != NULL,
                KN_ERR_IO, "model.vocab[\"a\"]: id is not an integer in [0, 2147483647]");
    CHECK_ERROR(load_text("unk.json", "{\"model\": {\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"vocab\":{\"a\":0},"
                                      "\"merges\":[]}}") != NULL,
                KN_ERR_IO, "unk_token \"<unk>\" is not in the vocabulary");
    CHECK_ERROR(load_text("norm.json", "{\"normalizer\": {\"type\": \"Precompiled\"}, \"model\": " BPE_AB "}") != NULL,
                KN_ERR_IO, "normalizer type \"Precompiled\" is not supported");
    CHECK_ERROR(load_text("pre.json", "{\"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"}, \"model\": " BPE_AB "}") != NULL,
                KN_ERR_IO, "pre_tokenizer type \"BertPreTokenizer\" is not supported");
    CHECK_ERROR(load_text("dec.json", "{\"decoder\": {\"type\": \"WordPiece\"}, \"model\": " BPE_AB "}") != NULL,
                KN_ERR_IO, "decoder type \"WordPiece\" is not supported");
    CHECK_ERROR(load_text("post.json", "{\"post_processor\": {\"type\": \"Mystery\"}, \"model\": " BPE_AB "}") != NULL,
                KN_ERR_IO, "post_processor type \"Mystery\" is not supported");
    CHECK_ERROR(load_text("regex.json", "{\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(a\"},"
                                        "\"behavior\": \"Isolated\"}, \"model\": " BPE_AB "}") != NULL,
                KN_ERR_IO, "does not compile");
    CHECK_ERROR(load_text("added.json", "{\"added_tokens\": [{\"id\": 5}], \"model\": " BPE_AB "}") != NULL, KN_ERR_IO,
                "added_tokens[0]");
    /* A well-formed minimal file loads and works. */
    kn_tokenizer *t = load_text("ok.json", "{\"model\": " BPE_AB "}");
    CHECK(t != NULL);
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK(t && kn_tokenizer_encode(t, "abba", 4, true, &ids, &n) == KN_OK && n == 3 && ids[0] == 2 && ids[1] == 1 &&
          ids[2] == 0);
    free(ids);
    /* A word of characters the vocabulary lacks (and no unk_token) gives no ids (NULL + 0 under UBSan). */
    CHECK(t && kn_tokenizer_encode(t, "c", 1, true, &ids, &n) == KN_OK && n == 0);
    free(ids);
    kn_tokenizer_free(t);
}

static void test_bad_text_and_ids_give_errors(void) {
    kn_tokenizer *t = load_kind("gpt2");
    if (!t) return;
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK_ERROR(kn_tokenizer_encode(t, "ab\xC3(", 4, false, &ids, &n) == KN_OK, KN_ERR_ARG, "not valid UTF-8 (byte 2)");
    CHECK_ERROR(kn_tokenizer_encode(t, "\xED\xA0\x80", 3, false, &ids, &n) == KN_OK, KN_ERR_ARG, "not valid UTF-8");
    int32_t bad[] = {5, -1};
    char *text = NULL;
    size_t len = 0;
    CHECK_ERROR(kn_tokenizer_decode(t, bad, 2, false, &text, &len) == KN_OK, KN_ERR_INDEX, "id -1 at position 1 is negative");
    kn_detokenizer *d = kn_detokenizer_new(t, false);
    CHECK_ERROR(kn_detokenizer_push(d, -7, &len) != NULL, KN_ERR_INDEX, "id -7 is negative");
    kn_detokenizer_free(d);
    /* An empty text encodes to nothing, and nothing decodes to "". */
    CHECK(kn_tokenizer_encode(t, "", 0, true, &ids, &n) == KN_OK && n == 0);
    free(ids);
    CHECK(kn_tokenizer_decode(t, NULL, 0, false, &text, &len) == KN_OK && len == 0 && text[0] == '\0');
    free(text);
    kn_tokenizer_free(t);
}

/* Decodes ids through the detokenizer, one at a time, into a malloc'd string; NULL if refused. */
static char *stream_all(const kn_tokenizer *t, const int32_t *ids, size_t n, bool skip, bool *whole) {
    kn_detokenizer *d = kn_detokenizer_new(t, skip);
    if (!d) return NULL;
    size_t used = 0, cap = 64;
    char *all = malloc(cap);
    *whole = true;
    for (size_t i = 0; i <= n; i++) {
        size_t len = 0;
        const char *piece = i < n ? kn_detokenizer_push(d, ids[i], &len) : kn_detokenizer_flush(d, &len);
        if (!piece) break;
        *whole = *whole && utf8_whole(piece, len);
        while (used + len + 1 > cap) all = realloc(all, cap *= 2);
        memcpy(all + used, piece, len);
        used += len;
    }
    all[used] = '\0';
    kn_detokenizer_free(d);
    return all;
}

/* Arbitrary ids through every decoder (byte-level, byte fallback): partial and invalid UTF-8 across tokens, held back
 * while a character may still complete; the pieces still concatenate to the library's decode. */
static void test_streaming_arbitrary_byte_level_ids(void) {
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        kn_tokenizer *t = load_kind(kinds[k]);
        cJSON *exp = expected_for(kinds[k]);
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(exp, "decodes")) {
            if (!t) break;
            size_t n;
            int32_t *ids = ids_of(cJSON_GetObjectItem(c, "ids"), &n);
            for (int skip = 0; skip < 2; skip++) {
                const char *want = cJSON_GetObjectItem(c, skip ? "decoded_skip_special" : "decoded")->valuestring;
                bool whole = true;
                char *got = stream_all(t, ids, n, skip, &whole);
                CHECK_MSG(got && strcmp(got, want) == 0 && whole, "%s: streamed \"%s\", want \"%s\"", kinds[k],
                          got ? got : kn_last_error(), want);
                free(got);
            }
            free(ids);
        }
        cJSON_Delete(exp);
        kn_tokenizer_free(t);
    }
}

/* Other components (Split behaviors, Metaspace options, normalizers, decoders) swapped into
 * the fixture files give the library's ids and text (tests/fixtures/tokenizers/variants.json). */
static void test_component_variants_match_the_library(void) {
    char *s = read_text_file(FIXTURES "/variants.json");
    cJSON *variants = s ? cJSON_Parse(s) : NULL;
    free(s);
    CHECK(variants != NULL);
    const cJSON *v;
    int index = 0;
    cJSON_ArrayForEach(v, variants) {
        const char *base = cJSON_GetObjectItem(v, "base")->valuestring, *key = cJSON_GetObjectItem(v, "key")->valuestring;
        char path[512];
        snprintf(path, sizeof path, FIXTURES "/%s/tokenizer.json", base);
        char *text = read_text_file(path);
        cJSON *j = cJSON_Parse(text);
        free(text);
        cJSON_ReplaceItemInObject(j, key, cJSON_Duplicate(cJSON_GetObjectItem(v, "component"), true));
        char *json = cJSON_PrintUnformatted(j), *what = cJSON_PrintUnformatted(cJSON_GetObjectItem(v, "component"));
        char name[64];
        snprintf(name, sizeof name, "variant%d.json", index++);
        kn_tokenizer *t = load_text(name, json);
        CHECK_MSG(t != NULL, "%s %s: %s", base, what, kn_last_error());
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(v, "cases")) {
            if (!t) break;
            const char *in = cJSON_GetObjectItem(c, "text")->valuestring;
            int32_t *ids = NULL;
            size_t n = 0;
            CHECK_MSG(kn_tokenizer_encode(t, in, strlen(in), true, &ids, &n) == KN_OK &&
                          same_ids(ids, n, cJSON_GetObjectItem(c, "ids")),
                      "%s %s: encode(\"%s\") differs", base, what, in);
            free(ids);
            ids = ids_of(cJSON_GetObjectItem(c, "ids"), &n);
            for (int skip = 0; skip < 2; skip++) {
                const cJSON *want = cJSON_GetObjectItem(c, skip ? "decoded_skip_special" : "decoded");
                if (!cJSON_IsString(want)) continue; /* the library panics on this one */
                char *got = NULL;
                size_t len = 0;
                CHECK_MSG(kn_tokenizer_decode(t, ids, n, skip, &got, &len) == KN_OK && strcmp(got, want->valuestring) == 0,
                          "%s %s: decode of \"%s\" gave \"%s\", want \"%s\"", base, what, in, got ? got : "", want->valuestring);
                free(got);
                bool whole = true;
                char *streamed = stream_all(t, ids, n, skip, &whole);
                if (!streamed) { /* only a decoder that strips the end of fused text may refuse */
                    CHECK_MSG(kn_last_status() == KN_ERR_UNSUPPORTED && strstr(what, "\"stop\":1"),
                              "%s %s: detokenizer refused: %s", base, what, kn_last_error());
                    continue;
                }
                CHECK_MSG(strcmp(streamed, want->valuestring) == 0 && whole, "%s %s: streamed \"%s\", want \"%s\"", base,
                          what, streamed, want->valuestring);
                free(streamed);
            }
            free(ids);
        }
        kn_tokenizer_free(t);
        free(json);
        free(what);
        cJSON_Delete(j);
    }
    cJSON_Delete(variants);
}

/* A decoder chain swapped into the llama2 fixture, and whether it can stream. */
typedef struct chain_case {
    const char *decoders; /* a JSON list */
    bool streams;
} chain_case;

/* Ids from an LCG, spread over the vocabulary and the byte tokens (ids 3..258 in llama2). */
static size_t pseudo_random_ids(uint32_t *state, int64_t vocab, int32_t *ids, size_t cap) {
    size_t n = (*state = *state * 1664525u + 1013904223u) >> 29; /* 0..7 */
    for (size_t i = 0; i < n && i < cap; i++) {
        *state = *state * 1664525u + 1013904223u;
        ids[i] = (int32_t)((*state >> 8) % (*state & 1 ? 259 : (uint32_t)vocab));
    }
    return n < cap ? n : cap;
}

/* Steps after Fuse see the whole text as one token: a chain streams only when each such step acts
 * on one character at a time (Metaspace, which drops its character in every continuing piece, a
 * Strip of the start, a Replace of one character); the others are refused, never streamed wrong.
 * Streamed pieces join to decode for arbitrary ids, skipping specials or not. */
static void test_decoder_chains_stream_exactly_or_are_refused(void) {
    static const chain_case cases[] = {
        {"[{\"type\":\"Fuse\"},{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\",\"prepend_scheme\":\"first\"}]", true},
        {"[{\"type\":\"ByteLevel\"},{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\",\"prepend_scheme\":\"always\"}]",
         true},
        {"[{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"},{\"type\":\"Replace\",\"pattern\":{\"String\":\"\\u2581\"},"
         "\"content\":\"  \"},{\"type\":\"Strip\",\"content\":\" \",\"start\":3,\"stop\":0}]",
         true},
        {"[{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\",\"prepend_scheme\":\"first\"},{\"type\":\"ByteFallback\"}]",
         true},
        {"[{\"type\":\"Fuse\"},{\"type\":\"ByteFallback\"}]", false},
        {"[{\"type\":\"ByteLevel\"},{\"type\":\"ByteLevel\"}]", false},
        {"[{\"type\":\"Fuse\"},{\"type\":\"Replace\",\"pattern\":{\"String\":\"ab\"},\"content\":\"Q\"}]", false},
        {"[{\"type\":\"Fuse\"},{\"type\":\"Replace\",\"pattern\":{\"Regex\":\" +\"},\"content\":\"_\"}]", false},
        {"[{\"type\":\"Fuse\"},{\"type\":\"Strip\",\"content\":\" \",\"start\":0,\"stop\":1}]", false},
    };
    char *text = read_text_file(FIXTURES "/llama2/tokenizer.json");
    cJSON *base = text ? cJSON_Parse(text) : NULL;
    free(text);
    CHECK(base != NULL);
    for (size_t c = 0; base && c < sizeof cases / sizeof *cases; c++) {
        cJSON *chain = cJSON_CreateObject();
        cJSON_AddStringToObject(chain, "type", "Sequence");
        cJSON_AddItemToObject(chain, "decoders", cJSON_Parse(cases[c].decoders));
        cJSON_ReplaceItemInObject(base, "decoder", chain);
        char *json = cJSON_PrintUnformatted(base);
        kn_tokenizer *t = load_text("chain.json", json);
        free(json);
        CHECK_MSG(t != NULL, "%s: %s", cases[c].decoders, kn_last_error());
        if (!t) continue;
        kn_clear_error();
        kn_detokenizer *d = kn_detokenizer_new(t, false);
        CHECK_MSG((d != NULL) == cases[c].streams && (d || kn_last_status() == KN_ERR_UNSUPPORTED),
                  "%s: the detokenizer %s (%s)", cases[c].decoders, d ? "streams" : "is refused", kn_last_error());
        kn_detokenizer_free(d);
        uint32_t state = (uint32_t)c + 1;
        int32_t ids[8];
        for (int round = 0; round < 400 && cases[c].streams; round++) {
            size_t n = pseudo_random_ids(&state, kn_tokenizer_vocab_size(t), ids, 8);
            for (int skip = 0; skip < 2; skip++) {
                char *want = NULL;
                size_t len = 0;
                bool whole = true;
                CHECK(kn_tokenizer_decode(t, ids, n, skip, &want, &len) == KN_OK);
                char *got = stream_all(t, ids, n, skip, &whole);
                CHECK_MSG(got && strcmp(got, want) == 0, "%s, round %d: streamed \"%s\", decode \"%s\"", cases[c].decoders,
                          round, got ? got : kn_last_error(), want);
                free(got);
                free(want);
            }
        }
        kn_tokenizer_free(t);
    }
    cJSON_Delete(base);
}

/* A token an earlier step turns into a byte token ("_<0xA9>" without its "_") continues the
 * run ByteFallback decodes as a whole: streaming holds the run until a token of another kind. */
static void test_a_run_of_byte_tokens_made_by_an_earlier_step_is_held_whole(void) {
    kn_tokenizer *t = load_text("made_bytes.json",
                                "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"<0xC3>\":0,\"<0xA9>\":1,\"x\":2,\"_<0xA9>\":3},"
                                "\"merges\":[]},\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\","
                                "\"pattern\":{\"String\":\"_\"},\"content\":\"\"},{\"type\":\"ByteFallback\"},"
                                "{\"type\":\"Fuse\"}]}}");
    CHECK_MSG(t != NULL, "%s", kn_last_error());
    if (!t) return;
    const int32_t runs[][4] = {{0, 3, 1, 2}, {0, 3, 2, 1}, {3, 0, 3, 2}};
    const char *want[] = {"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBDx", "\xC3\xA9x\xEF\xBF\xBD",
                          "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBDx"};
    for (size_t i = 0; i < 3; i++) {
        bool whole = true;
        char *got = stream_all(t, runs[i], 4, false, &whole);
        CHECK_MSG(got && strcmp(got, want[i]) == 0 && whole, "ids %zu: streamed \"%s\", want \"%s\"", i,
                  got ? got : kn_last_error(), want[i]);
        free(got);
    }
    kn_tokenizer_free(t);
}

/* A file of tests/fixtures/tokenizers/bad and the words its load error must contain. */
typedef struct bad_fixture {
    const char *file, *needle;
} bad_fixture;

static void refuse_bad_fixtures(const bad_fixture *cases, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char path[512];
        snprintf(path, sizeof path, FIXTURES "/bad/%s", cases[i].file);
        kn_tokenizer *t = kn_tokenizer_load(path);
        CHECK_ERROR(t != NULL, KN_ERR_IO, cases[i].needle);
        kn_tokenizer_free(t);
    }
}

/* The repro files of issue 11 (tests/fixtures/tokenizers/bad): each is refused at load, naming
 * the field. Three of them made encode (or the load itself) loop forever: SIGALRM bounds the
 * test instead of ctest's timeout. */
static void test_invalid_utf8_in_the_file_is_refused_naming_the_field(void) {
    alarm(60);
    static const bad_fixture cases[] = {
        {"tok-lowercase-invalid-added-token.json", "added_tokens[0].content is not valid UTF-8 (byte 0)"},
        {"tok-raw-added-token-splits-utf8.json", "added_tokens[0].content is not valid UTF-8 (byte 0)"},
        {"tok-replace-breaks-utf8-then-lowercase.json", "normalizer.normalizers[0].pattern.String is not valid UTF-8"},
    };
    refuse_bad_fixtures(cases, sizeof cases / sizeof *cases);
    CHECK_ERROR(load_text("key.json", "{\"model\": {\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\xC3\":1},\"merges\":[]}}") != NULL,
                KN_ERR_IO, "key.json: model.vocab: key number 1 is not valid UTF-8 (byte 1)");
    CHECK_ERROR(load_text("merge8.json", "{\"model\": {\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[[\"a\",\"\xED\xA0\x80\"]]}}") != NULL,
                KN_ERR_IO, "model.merges[0][1] is not valid UTF-8");
    CHECK_ERROR(load_text("dec8.json", "{\"decoder\": {\"type\": \"Replace\", \"pattern\": {\"String\": \"x\"}, \"content\": "
                                       "\"\xFF\"}, \"model\": " BPE_AB "}") != NULL,
                KN_ERR_IO, "decoder.content is not valid UTF-8");
    alarm(0);
}

/* Defence in depth: were ill-formed bytes to reach the pipeline, every loop still advances
 * (Lowercase and Strip keep them as they are; added tokens are still found around them). */
static kn_status count_piece(void *ctx, size_t start, size_t end, int32_t id) {
    (void)start, (void)end;
    *(int *)ctx += id >= 0 ? 100 : 1;
    return KN_OK;
}

static void test_every_loop_advances_over_ill_formed_bytes(void) {
    alarm(60);
    cJSON *j = cJSON_Parse("{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Lowercase\"}, {\"type\": \"Strip\"}]}");
    kn_normalizer *nz = kn_normalizer_load(j, "test");
    cJSON_Delete(j);
    CHECK(nz != NULL);
    static const char in[] = " \xFF\xC3" "Ab\xE2\x82 \xC2";
    kn_tok_buf out = {0};
    CHECK(nz && kn_normalizer_apply(nz, in, sizeof in - 1, KN_TOK_WHOLE, &out) == KN_OK &&
          out.n == sizeof in - 2 && memcmp(out.p, "\xFF\xC3" "ab\xE2\x82 \xC2", out.n) == 0);
    kn_tok_buf_free(&out);
    kn_normalizer_free(nz);
    /* <mask> has lstrip; kiln has single_word (the GPT-2 fixture's added tokens). */
    kn_tokenizer *t = load_kind("gpt2");
    static const char text[] = "\x80 <mask> \xFF" "kiln\xE2";
    int pieces = 0;
    CHECK(t && kn_added_vocab_split(&t->added, false, text, sizeof text - 1, count_piece, &pieces) == KN_OK &&
          pieces == 102);
    kn_tok_ids ids = {0};
    CHECK(t && kn_bpe_encode_word(t->model, "\xFF\xFE" "a", 3, NULL, &ids) == KN_OK);
    free(ids.v);
    kn_tokenizer_free(t);
    alarm(0);
}

/* Numbers out of range (or not integers) are refused before any cast, naming the field; the
 * first three are issue 11's repros (encode returned id -2147483648; a float-to-int overflow). */
static void test_out_of_range_numbers_are_refused_naming_the_field(void) {
    static const bad_fixture cases[] = {
        {"tok-template-special-id-2pow32.json", "special_tokens[\"<s>\"].ids[0] is not an id (an integer in [0, 2147483647])"},
        {"tok-roberta-cls-id-3e9.json", "RobertaProcessing: cls and sep must be [token, id], the id an integer in [0, 2147483647]"},
        {"tok-strip-decoder-start-1e30.json", "decoder Strip: start and stop must be integers in [0, 2147483647]"},
    };
    refuse_bad_fixtures(cases, sizeof cases / sizeof *cases);
    CHECK_ERROR(load_text("frac.json", "{\"model\": {\"type\":\"BPE\",\"vocab\":{\"a\":2.5},\"merges\":[]}}") != NULL, KN_ERR_IO,
                "model.vocab[\"a\"]: id is not an integer");
    CHECK_ERROR(load_text("addfrac.json", "{\"added_tokens\": [{\"id\": 1.5, \"content\": \"x\"}], \"model\": " BPE_AB "}") != NULL,
                KN_ERR_IO, "added_tokens[0]: needs an \"id\" (an integer in [0, 2147483647])");
    CHECK_ERROR(load_text("addbig.json", "{\"added_tokens\": [{\"id\": 1e300, \"content\": \"x\"}], \"model\": " BPE_AB "}") != NULL,
                KN_ERR_IO, "added_tokens[0]");
    CHECK_ERROR(load_text("stop.json", "{\"decoder\": {\"type\": \"Strip\", \"content\": \" \", \"start\": 0, \"stop\": 0.5}, "
                                       "\"model\": " BPE_AB "}") != NULL,
                KN_ERR_IO, "start and stop must be integers");
    CHECK_ERROR(load_text("tmplfrac.json", "{\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": "
                                           "{\"id\": \"<s>\"}}, {\"Sequence\": {\"id\": \"A\"}}], \"special_tokens\": {\"<s>\": "
                                           "{\"ids\": [1.5]}}}, \"model\": " BPE_AB "}") != NULL,
                KN_ERR_IO, "is not an id");
}

/* Resident memory of the process, in bytes. */
static int64_t resident_bytes(void) {
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f && fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    if (f) fclose(f);
    return (int64_t)resident * sysconf(_SC_PAGESIZE);
}

/* One token of id 2^26 - 1 cost 267 MB (an id-indexed table); memory now follows the number of
 * ids, so any id the library allows that fits kiln's int32 loads, and works both ways. */
static void test_sparse_ids_take_memory_in_proportion_to_the_file(void) {
    int64_t before = resident_bytes();
    kn_tokenizer *t = kn_tokenizer_load(FIXTURES "/bad/tok-vocab-id-2pow26.json");
    int64_t grew = resident_bytes() - before;
    CHECK_MSG(t != NULL, "%s", kn_last_error());
    CHECK_MSG(grew < (16 << 20), "loading a one-token tokenizer took %lld MB", (long long)(grew >> 20));
    int32_t *ids = NULL;
    size_t n = 0;
    char *text = NULL;
    size_t len = 0;
    CHECK(t && kn_tokenizer_vocab_size(t) == (1 << 26) && kn_tokenizer_token_to_id(t, "a") == (1 << 26) - 1);
    CHECK(t && kn_tokenizer_encode(t, "aa", 2, true, &ids, &n) == KN_OK && n == 2 && ids[0] == (1 << 26) - 1);
    CHECK(t && kn_tokenizer_decode(t, ids, n, false, &text, &len) == KN_OK && strcmp(text, "a a") == 0);
    CHECK(t && kn_tokenizer_id_to_token(t, 5) == NULL);
    free(ids);
    free(text);
    kn_tokenizer_free(t);
    t = load_text("max.json", "{\"added_tokens\": [{\"id\": 2147483647, \"content\": \"<eos>\", \"special\": true}], "
                              "\"model\": " BPE_AB "}");
    CHECK_MSG(t != NULL, "%s", kn_last_error());
    CHECK(t && kn_tokenizer_vocab_size(t) == 2147483648LL && kn_tokenizer_is_special(t, INT32_MAX) &&
          kn_tokenizer_token_to_id(t, "<eos>") == INT32_MAX && !kn_tokenizer_is_special(t, 3));
    kn_tokenizer_free(t);
}

/* A model's embedding is often padded past its tokenizer (Qwen2.5: 151936 rows for 151665 ids);
 * generation may pick such an id, which decodes to nothing as in the library. */
static void test_ids_the_tokenizer_lacks_decode_to_nothing(void) {
    kn_tokenizer *t = load_kind("gpt2");
    if (!t) return;
    int32_t with[] = {300, 512, 100000, 301}, without[] = {300, 301};
    char *a = NULL, *b = NULL;
    size_t la = 0, lb = 0;
    CHECK(kn_tokenizer_decode(t, with, 4, false, &a, &la) == KN_OK &&
          kn_tokenizer_decode(t, without, 2, false, &b, &lb) == KN_OK && la == lb && strcmp(a, b) == 0);
    bool whole = true;
    char *streamed = stream_all(t, with, 4, false, &whole);
    CHECK(streamed && b && strcmp(streamed, b) == 0);
    size_t len = 1;
    kn_detokenizer *d = kn_detokenizer_new(t, true);
    const char *piece = kn_detokenizer_push(d, INT32_MAX, &len);
    CHECK(piece && len == 0);
    kn_detokenizer_free(d);
    free(a);
    free(b);
    free(streamed);
    kn_tokenizer_free(t);
}

/* Only special tokens, skipped: empty text (the decoders ran over no tokens: NULL + 0 under UBSan). */
static void test_decoding_only_skipped_specials_gives_empty_text(void) {
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        kn_tokenizer *t = load_kind(kinds[k]);
        if (!t) continue;
        int32_t ids[2];
        size_t n = 0;
        for (int32_t id = 0; id < kn_tokenizer_vocab_size(t) && n < 2; id++)
            if (kn_tokenizer_is_special(t, id)) ids[n++] = id;
        char *text = NULL;
        size_t len = 1;
        CHECK_MSG(n > 0 && kn_tokenizer_decode(t, ids, n, true, &text, &len) == KN_OK && len == 0, "%s", kinds[k]);
        free(text);
        kn_tokenizer_free(t);
    }
}

/* A text of at least `want` bytes: the fixture's texts, lines apart, over and over. */
static char *long_text(const cJSON *exp, size_t want, size_t *len) {
    size_t cap = want + 4096, n = 0;
    char *s = malloc(cap);
    while (n < want) {
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(exp, "cases")) {
            const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
            size_t k = strlen(text);
            if (n + k + 2 > cap) s = realloc(s, cap *= 2);
            memcpy(s + n, text, k);
            n += k;
            s[n++] = '\n';
        }
    }
    s[n] = '\0';
    *len = n;
    return s;
}

/* Streams text through e in blocks of `block` bytes (splitting characters); the ids in a malloc'd array. */
static int32_t *encode_streamed(kn_encoder *e, const char *text, size_t len, size_t block, size_t *n) {
    size_t cap = 1024;
    int32_t *all = malloc(cap * sizeof *all);
    *n = 0;
    for (size_t at = 0; at < len + block; at += block) { /* the last round finishes */
        const int32_t *ids;
        size_t k;
        kn_status st = at < len ? kn_encoder_push(e, text + at, len - at < block ? len - at : block, &ids, &k)
                                : kn_encoder_finish(e, &ids, &k);
        if (st != KN_OK) {
            free(all);
            return NULL;
        }
        while (*n + k > cap) all = realloc(all, (cap *= 2) * sizeof *all);
        if (k) memcpy(all + *n, ids, k * sizeof *ids);
        *n += k;
    }
    return all;
}

/* Streaming a long text of exp's cases gives exactly the ids of the whole text, special tokens
 * included, text after text. */
static void check_streamed(const kn_tokenizer *t, const cJSON *exp, size_t bytes, const char *what) {
    size_t len;
    char *text = long_text(exp, bytes, &len);
    for (int special = 0; special < 2; special++) {
        int32_t *want = NULL;
        size_t n_want = 0, n_got = 0;
        CHECK(kn_tokenizer_encode(t, text, len, special, &want, &n_want) == KN_OK);
        kn_encoder *e = kn_encoder_new(t, special);
        CHECK_MSG(e != NULL, "%s: %s", what, kn_last_error());
        for (int round = 0; round < 2 && e; round++) { /* the encoder starts a new text after finish */
            int32_t *got = encode_streamed(e, text, len, 4093, &n_got);
            CHECK_MSG(got && n_got == n_want && memcmp(got, want, n_want * sizeof *want) == 0,
                      "%s: streamed %zu ids, whole text %zu (add_special=%d)", what, n_got, n_want, special);
            free(got);
        }
        kn_encoder_free(e);
        free(want);
    }
    free(text);
}

/* A long text encoded piece by piece (segments cut at line breaks, blocks cutting characters)
 * gives the ids of the whole text, for every fixture kind and component variant. */
static void test_streamed_encoding_equals_whole_text_encoding(void) {
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        kn_tokenizer *t = load_kind(kinds[k]);
        cJSON *exp = expected_for(kinds[k]);
        if (t && exp) check_streamed(t, exp, 300000, kinds[k]);
        cJSON_Delete(exp);
        kn_tokenizer_free(t);
    }
    char *s = read_text_file(FIXTURES "/variants.json");
    cJSON *variants = s ? cJSON_Parse(s) : NULL;
    free(s);
    const cJSON *v;
    int index = 0;
    cJSON_ArrayForEach(v, variants) {
        const char *base = cJSON_GetObjectItem(v, "base")->valuestring, *key = cJSON_GetObjectItem(v, "key")->valuestring;
        char path[512], name[64];
        snprintf(path, sizeof path, FIXTURES "/%s/tokenizer.json", base);
        char *text = read_text_file(path);
        cJSON *j = cJSON_Parse(text);
        free(text);
        cJSON_ReplaceItemInObject(j, key, cJSON_Duplicate(cJSON_GetObjectItem(v, "component"), true));
        char *json = cJSON_PrintUnformatted(j), *what = cJSON_PrintUnformatted(cJSON_GetObjectItem(v, "component"));
        snprintf(name, sizeof name, "streamed%d.json", index++);
        kn_tokenizer *t = load_text(name, json);
        cJSON *exp = expected_for(base);
        if (t && exp) check_streamed(t, exp, 100000, what);
        cJSON_Delete(exp);
        kn_tokenizer_free(t);
        free(json);
        free(what);
        cJSON_Delete(j);
    }
    cJSON_Delete(variants);
}

static void test_streamed_encoding_names_the_offset_of_bad_utf8(void) {
    kn_tokenizer *t = load_kind("gpt2");
    kn_encoder *e = t ? kn_encoder_new(t, true) : NULL;
    CHECK(e != NULL);
    if (!e) return;
    size_t n = 100000;
    char *text = malloc(n);
    for (size_t i = 0; i < n; i++) text[i] = i % 20 == 19 ? '\n' : 'a' + (char)(i % 20);
    text[70001] = '\xC3';
    size_t got;
    int32_t *ids = encode_streamed(e, text, n, 8192, &got);
    CHECK_ERROR(ids != NULL, KN_ERR_ARG, "the text is not valid UTF-8 (byte 70001)");
    free(ids);
    text[70001] = 'x';
    ids = encode_streamed(e, text, n, 8192, &got); /* a failed text leaves the encoder usable */
    CHECK(ids != NULL && got > 0);
    free(ids);
    free(text);
    kn_encoder_free(e);
    kn_tokenizer_free(t);
}

int main(void) {
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/kiln_tok_XXXXXX");
    if (!mkdtemp(tmp_dir)) return 1;
    RUN(test_encode_matches_the_library_for_every_kind_and_text);
    RUN(test_decode_matches_the_library);
    RUN(test_streaming_pieces_concatenate_to_the_decode);
    RUN(test_token_to_id_and_id_to_token_follow_the_file);
    RUN(test_streaming_arbitrary_byte_level_ids);
    RUN(test_component_variants_match_the_library);
    RUN(test_decoder_chains_stream_exactly_or_are_refused);
    RUN(test_a_run_of_byte_tokens_made_by_an_earlier_step_is_held_whole);
    RUN(test_bad_files_give_errors_naming_the_problem);
    RUN(test_bad_text_and_ids_give_errors);
    RUN(test_invalid_utf8_in_the_file_is_refused_naming_the_field);
    RUN(test_every_loop_advances_over_ill_formed_bytes);
    RUN(test_out_of_range_numbers_are_refused_naming_the_field);
    RUN(test_sparse_ids_take_memory_in_proportion_to_the_file);
    RUN(test_ids_the_tokenizer_lacks_decode_to_nothing);
    RUN(test_decoding_only_skipped_specials_gives_empty_text);
    RUN(test_streamed_encoding_equals_whole_text_encoding);
    RUN(test_streamed_encoding_names_the_offset_of_bad_utf8);
    remove_tree(tmp_dir);
    return test_summary();
}
