/* Fuzz target: tokenizer.json, loaded, then encoding fixed texts and text from the input,
 * decoding the ids (and ids from the input) at once and streamed.
 *
 * Input: the file's bytes, optionally followed by a NUL byte and text to encode (whose bytes,
 * two at a time, are also decoded as ids). Checks beyond the error contract: a file that loads
 * is one JSON value, encode refuses invalid UTF-8 (KN_ERR_ARG), encoded ids are in the
 * vocabulary, streaming encoding gives the same ids, decode takes every id that is not negative,
 * and the streamed pieces put together are the text of decode (tokenizer.h promises these). */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

#define MAX_IDS 64

/* Fixed texts: ASCII, spaces, accents and a precomposed character (normalizers), a ligature
 * and case pairs (NFKC, Lowercase), CJK and an emoji (byte fallback), special tokens of the
 * common families, and invalid UTF-8 (refused with an error). */
static const char *const texts[] = {
    "Hello world",
    "ab caf\xc3\xa9 \xc2\xa9\n",
    "  two  spaces\tand a tab \n\n",
    "\xef\xac\x81 \xc7\x84 \xc4\xb0 \xe1\xba\x9e \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80",
    "x<|endoftext|>y<s></s><unk><|im_start|>",
    "caf\xc3",
    "",
};

/* Streams ids (ones decode took) through a detokenizer: the pieces must join to want. */
static void check_stream(const kn_tokenizer *t, const int32_t *ids, size_t n, bool skip, const char *want,
                         size_t want_len) {
    kn_clear_error();
    kn_detokenizer *d = kn_detokenizer_new(t, skip);
    if (fuzz_failed(!d, "kn_detokenizer_new")) return;
    char *got = NULL;
    size_t got_len = 0;
    for (size_t i = 0; i <= n; i++) {
        size_t len = 0;
        kn_clear_error();
        const char *piece = i < n ? kn_detokenizer_push(d, ids[i], &len) : kn_detokenizer_flush(d, &len);
        fuzz_failed(!piece, i < n ? "kn_detokenizer_push" : "kn_detokenizer_flush");
        fuzz_require(piece != NULL, "the detokenizer fails on id %d, which decode takes: %s", i < n ? ids[i] : -1,
                     kn_last_error());
        got = realloc(got, got_len + len + 1);
        fuzz_require(got != NULL, "out of memory");
        memcpy(got + got_len, piece, len);
        got_len += len;
    }
    fuzz_require(got_len == want_len && memcmp(got, want, want_len) == 0,
                 "streamed decoding (skip_special %d) gives \"%.*s\", decode gives \"%.*s\"", skip, (int)got_len, got,
                 (int)want_len, want);
    free(got);
    kn_detokenizer_free(d);
}

/* Decodes ids both ways (skip_special or not): only a negative id may fail (an id past the
 * vocabulary decodes to nothing). */
static void check_decode(const kn_tokenizer *t, const int32_t *ids, size_t n, bool negative) {
    for (int skip = 0; skip < 2; skip++) {
        char *text = NULL;
        size_t len = 0;
        kn_clear_error();
        kn_status st = kn_tokenizer_decode(t, ids, n, skip, &text, &len);
        fuzz_failed(st != KN_OK, "kn_tokenizer_decode");
        fuzz_require(st == KN_OK || negative, "decode fails on ids that are not negative: %s", kn_last_error());
        if (st != KN_OK) continue;
        fuzz_require(text && text[len] == '\0' && strlen(text) <= len, "decode gives no NUL-terminated text");
        check_stream(t, ids, n, skip, text, len);
        free(text);
    }
}

/* Well-formed UTF-8 (Unicode's table 3-7: no overlong forms, surrogates or code points above
 * U+10FFFF), which encode must refuse anything else than. */
static bool utf8_valid(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        size_t k = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (!k || i + k > n) return false;
        uint8_t lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80, hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
        for (size_t j = 1; j < k; j++)
            if (s[i + j] < (j == 1 ? lo : 0x80) || s[i + j] > (j == 1 ? hi : 0xBF)) return false;
        i += k;
    }
    return true;
}

/* Streaming encoding in blocks of 1 to 8 bytes (cutting characters) must give encode's ids, or
 * fail as it did: under 64 KiB the text is one segment (tokenizer.h). */
static void check_encoder(const kn_tokenizer *t, const char *text, size_t len, bool special, kn_status want_st,
                          const int32_t *want, size_t n_want) {
    kn_clear_error();
    kn_encoder *e = kn_encoder_new(t, special);
    if (fuzz_failed(!e, "kn_encoder_new")) return;
    int32_t *got = NULL;
    size_t n_got = 0, at = 0;
    kn_status st = KN_OK;
    for (size_t k = 0; st == KN_OK; k++) {
        size_t block = len - at < k % 8 + 1 ? len - at : k % 8 + 1;
        const int32_t *ids;
        size_t n;
        kn_clear_error();
        st = at < len ? kn_encoder_push(e, text + at, block, &ids, &n) : kn_encoder_finish(e, &ids, &n);
        if (fuzz_failed(st != KN_OK, at < len ? "kn_encoder_push" : "kn_encoder_finish")) break;
        if (n) {
            got = realloc(got, sizeof *got * (n_got + n));
            fuzz_require(got != NULL, "out of memory");
            memcpy(got + n_got, ids, sizeof *ids * n);
            n_got += n;
        }
        if (at == len) break;
        at += block;
    }
    fuzz_require((st == KN_OK) == (want_st == KN_OK), "streaming encoding gives status %d, encode %d", (int)st,
                 (int)want_st);
    fuzz_require(st != KN_OK || (n_got == n_want && (!n_got || memcmp(got, want, sizeof *got * n_got) == 0)),
                 "streaming encoding gives %zu ids, encode %zu (or other ids)", n_got, n_want);
    free(got);
    kn_encoder_free(e);
}

static void check_encode(const kn_tokenizer *t, const char *text, size_t len) {
    int64_t vocab = kn_tokenizer_vocab_size(t);
    bool valid = utf8_valid((const uint8_t *)text, len);
    for (int special = 0; special < 2; special++) {
        int32_t *ids = NULL;
        size_t n = 0;
        kn_clear_error();
        kn_status st = kn_tokenizer_encode(t, text, len, special, &ids, &n);
        fuzz_require(valid || (st != KN_OK && kn_last_status() == KN_ERR_ARG),
                     "encode of invalid UTF-8 gives status %d, not KN_ERR_ARG", (int)st);
        if (!fuzz_failed(st != KN_OK, "kn_tokenizer_encode")) {
            for (size_t i = 0; i < n; i++)
                fuzz_require(ids[i] >= 0 && ids[i] < vocab, "encode gives id %d at %zu; the vocabulary has %lld ids",
                             ids[i], i, (long long)vocab);
            check_decode(t, ids, n, false);
        }
        check_encoder(t, text, len, special, st, ids, n);
        free(ids);
    }
}

/* Ids from pairs of text bytes, spread over the vocabulary and one past each end of it. */
static void check_ids_from(const kn_tokenizer *t, const uint8_t *p, size_t len) {
    int64_t vocab = kn_tokenizer_vocab_size(t);
    int32_t ids[MAX_IDS];
    size_t n = 0;
    bool negative = false;
    for (size_t i = 0; i + 1 < len && n < MAX_IDS; i += 2) {
        ids[n] = (int32_t)((p[i] | p[i + 1] << 8) % (vocab + 2)) - 1;
        negative |= ids[n] < 0;
        n++;
    }
    check_decode(t, ids, n, negative);
    for (size_t i = 0; i < n; i++) {
        const char *token = kn_tokenizer_id_to_token(t, ids[i]);
        fuzz_require(!token || kn_tokenizer_token_to_id(t, token) >= 0, "token '%s' of id %d has no id", token, ids[i]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t json_len = nul ? (size_t)(nul - data) : size;
    const char *path = fuzz_write("tokenizer.json", data, json_len);
    kn_clear_error();
    kn_tokenizer *t = kn_tokenizer_load(path);
    if (fuzz_failed(!t, "kn_tokenizer_load")) return 0;
    fuzz_require(fuzz_is_json(data, json_len), "kn_tokenizer_load accepts a file that is not one JSON value");
    fuzz_require(kn_tokenizer_vocab_size(t) > 0, "a loaded tokenizer has no ids");
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) check_encode(t, texts[i], strlen(texts[i]));
    /* the file's start holds its added tokens and normalizer: text that matches them */
    check_encode(t, (const char *)data, json_len < 256 ? json_len : 256);
    if (nul) {
        const uint8_t *text = nul + 1;
        size_t text_len = size - json_len - 1;
        check_encode(t, (const char *)text, text_len);
        check_ids_from(t, text, text_len);
    }
    kn_tokenizer_free(t);
    return 0;
}
