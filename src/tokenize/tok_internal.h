/* The tokenizer's parts, shared by the files of src/tokenize: text buffers and piece lists,
 * string maps, the regex wrapper, and one struct per pipeline stage read from tokenizer.json. */
#ifndef KILN_TOKENIZE_INTERNAL_H
#define KILN_TOKENIZE_INTERNAL_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/strmap.h"
#include "kiln/status.h"
#include "kiln/tokenizer.h"

/* ---- text ---- */

/* A growable byte buffer; every put returns false (with KN_ERR_OOM set) when memory runs out. */
typedef struct kn_tok_buf {
    char *p;
    size_t n, cap;
} kn_tok_buf;
bool kn_tok_buf_put(kn_tok_buf *b, const void *s, size_t n);
bool kn_tok_buf_putc(kn_tok_buf *b, char c);
bool kn_tok_buf_put_cp(kn_tok_buf *b, uint32_t cp); /* a code point as UTF-8 */
void kn_tok_buf_free(kn_tok_buf *b);

/* Whether a stretch of text continues text encoded before or after it: a long text encoded in
 * segments (kn_encoder) keeps the rules of a text's edges (Prepend, Strip, a prefix space) for
 * its real start and end. */
typedef struct kn_tok_edges {
    bool continues_before, continues_after;
} kn_tok_edges;
#define KN_TOK_WHOLE ((kn_tok_edges){false, false})

/* Where a piece starts: at offset 0 of the original text (Metaspace's prepend_scheme "first"),
 * right where the text encoded before it ended (no prefix of any kind), or elsewhere. */
typedef enum { KN_TOK_SPLIT, KN_TOK_ORIGIN, KN_TOK_CONTINUES } kn_tok_start;

/* Pieces of text in one buffer: what each pipeline stage takes and makes. */
typedef struct kn_tok_span {
    size_t off, len;
    kn_tok_start start;
} kn_tok_span;
typedef struct kn_tok_pieces {
    kn_tok_buf text;
    kn_tok_span *spans;
    size_t n, cap;
} kn_tok_pieces;
/* Appends a piece (its bytes copied); an empty one is dropped, as the library drops them. */
bool kn_tok_pieces_add(kn_tok_pieces *p, const char *s, size_t n, kn_tok_start start);
/* Appends a token for the decoders, kept even when empty (their rules count positions). */
bool kn_tok_pieces_add_token(kn_tok_pieces *p, const char *s, size_t n);
void kn_tok_pieces_clear(kn_tok_pieces *p);
void kn_tok_pieces_free(kn_tok_pieces *p);

/* The UTF-8 character at s[0..n), n > 0: its length (1..4), its code point in *cp. An ill-formed
 * byte is a unit of its own, of length 1 with *cp = KN_UTF8_ILL_FORMED (no Unicode class holds
 * it), so every loop over text advances whatever the bytes are. */
#define KN_UTF8_ILL_FORMED UINT32_MAX
size_t kn_utf8_next(const char *s, size_t n, uint32_t *cp);
/* The length of the longest well-formed prefix of s: the offset of the first ill-formed byte, or n. */
size_t kn_utf8_valid_prefix(const char *s, size_t n);
bool kn_utf8_valid(const char *s, size_t n);
/* Whether the NUL-terminated s is exactly one character (Metaspace's and Strip's settings). */
bool kn_utf8_one_char(const char *s, uint32_t *cp);
/* Appends bytes as UTF-8 with every ill-formed stretch replaced by U+FFFD, exactly as Rust's
 * String::from_utf8_lossy does (one U+FFFD per maximal ill-formed subpart). */
bool kn_utf8_put_lossy(kn_tok_buf *out, const unsigned char *s, size_t n);
/* Unicode White_Space, and the \w of Rust's regex crate (letters, marks, digits, connectors). */
bool kn_unicode_is_space(uint32_t cp);
bool kn_unicode_is_word(uint32_t cp);

/* GPT-2's reversible byte <-> code point mapping used by ByteLevel. */
uint32_t kn_byte_level_char(unsigned char b);
int kn_byte_level_byte(uint32_t cp); /* -1 for a code point outside the mapping */

/* ---- maps ---- */

/* String -> int32: core/strmap.h (keys point at strings owned elsewhere). The same map keyed by
 * int32 ids (their bytes, which must stay where they are): id -> what has it, in memory that
 * grows with the ids present, never with the largest one. */
static inline bool kn_tok_idmap_put(kn_strmap *m, const int32_t *id, int32_t value) {
    return kn_strmap_put(m, (const char *)id, sizeof *id, value);
}
static inline int32_t kn_tok_idmap_get(const kn_strmap *m, int32_t id) {
    return kn_strmap_get(m, (const char *)&id, sizeof id);
}

/* ---- regex (PCRE2 with UTF and Unicode properties, JIT-compiled where available) ---- */

typedef struct kn_tok_regex kn_tok_regex;
/* NULL with KN_ERR_IO naming `where` and PCRE2's message when the pattern does not compile. */
kn_tok_regex *kn_tok_regex_new(const char *pattern, const char *where);
void kn_tok_regex_free(kn_tok_regex *re);
/* Calls found(ctx, start, end) for each non-overlapping match in s, left to right. */
kn_status kn_tok_regex_each(const kn_tok_regex *re, const char *s, size_t n,
                            bool (*found)(void *ctx, size_t start, size_t end), void *ctx);

/* A pattern of the library's {"String": s} or {"Regex": r} form. */
typedef struct kn_tok_pattern {
    char *literal; /* set for a String pattern */
    size_t literal_len;
    kn_tok_regex *regex; /* set for a Regex pattern */
} kn_tok_pattern;
kn_status kn_tok_pattern_load(kn_tok_pattern *p, const cJSON *j, const char *where);
void kn_tok_pattern_free(kn_tok_pattern *p);
/* The (start, end) of each match of p in s, as a malloc'd array of 2 * *n offsets. */
kn_status kn_tok_pattern_matches(const kn_tok_pattern *p, const char *s, size_t n, size_t **se, size_t *count);

/* ---- loading helpers ---- */

/* The string member `key` of o, or NULL (then an error naming where.key is set when required). */
const char *kn_tok_json_str(const cJSON *o, const char *key, const char *where, bool required);
bool kn_tok_json_bool(const cJSON *o, const char *key, bool fallback);
/* Whether v is a number holding an integer in [lo, hi] (*out gets it): checked before any cast,
 * since a file's 1e30 or 2.5 cast to an integer is undefined or silently wrong. */
bool kn_tok_json_integer(const cJSON *v, int64_t lo, int64_t hi, int64_t *out);
/* The same for a token id: an integer in [0, INT32_MAX] (the library's ids are u32; kiln's int32). */
bool kn_tok_json_id(const cJSON *v, int32_t *id);
/* KN_ERR_IO naming the first string or key under root that is not valid UTF-8 ("file:
 * added_tokens[3].content is not valid UTF-8"): the library refuses such a file, and the
 * pipeline's rules are defined on characters. */
kn_status kn_tok_json_check_utf8(const cJSON *root, const char *file);
/* A status for a component the loader does not know: KN_ERR_UNSUPPORTED naming it. */
kn_status kn_tok_unsupported(const char *file, const char *where, const cJSON *component);
char *kn_tok_strdup(const char *s);

/* ---- pipeline stages ---- */

typedef struct kn_normalizer kn_normalizer;   /* a flattened Sequence of normalizers */
kn_normalizer *kn_normalizer_load(const cJSON *j, const char *file);
void kn_normalizer_free(kn_normalizer *n);
/* Normalizes s into out (cleared first); edges: KN_TOK_WHOLE, or which edges of s continue text. */
kn_status kn_normalizer_apply(const kn_normalizer *n, const char *s, size_t len, kn_tok_edges edges, kn_tok_buf *out);

typedef struct kn_pre_tokenizer kn_pre_tokenizer;
kn_pre_tokenizer *kn_pre_tokenizer_load(const cJSON *j, const char *file);
void kn_pre_tokenizer_free(kn_pre_tokenizer *p);
/* Splits and rewrites the pieces in place (*pieces swapped with scratch as stages run). */
kn_status kn_pre_tokenizer_apply(const kn_pre_tokenizer *p, kn_tok_pieces *pieces, kn_tok_pieces *scratch);

/* Token ids as a growable array. */
typedef struct kn_tok_ids {
    int32_t *v;
    size_t n, cap;
} kn_tok_ids;
bool kn_tok_ids_push(kn_tok_ids *ids, int32_t id);

typedef struct kn_bpe kn_bpe;
kn_bpe *kn_bpe_load(const cJSON *model, const char *file);
void kn_bpe_free(kn_bpe *b);
int64_t kn_bpe_vocab_size(const kn_bpe *b); /* largest id + 1 */
int32_t kn_bpe_token_to_id(const kn_bpe *b, const char *s, size_t n);
const char *kn_bpe_id_to_token(const kn_bpe *b, int32_t id);
/* Encodes one pre-token, appending its ids; cache (NULL for none) remembers words seen. */
typedef struct kn_bpe_cache kn_bpe_cache;
kn_bpe_cache *kn_bpe_cache_new(void);
void kn_bpe_cache_free(kn_bpe_cache *c);
kn_status kn_bpe_encode_word(const kn_bpe *b, const char *w, size_t n, kn_bpe_cache *cache, kn_tok_ids *out);

typedef struct kn_added_token {
    char *content;
    size_t len;
    int32_t id;
    bool single_word, lstrip, rstrip, normalized, special;
    char *match; /* what is matched: the content, normalized if `normalized` */
    size_t match_len;
} kn_added_token;
typedef struct kn_added_vocab {
    kn_added_token *tokens;
    size_t n;
    kn_strmap by_content;        /* content -> index in tokens */
    kn_strmap by_id;             /* id (keyed by tokens[i].id) -> index in tokens */
    int32_t *by_first_byte[2][256];  /* per set (raw, normalized): indices, longest first, -1 ends */
    size_t longest;                  /* the longest match, in bytes */
} kn_added_vocab;
kn_status kn_added_vocab_load(kn_added_vocab *a, const cJSON *list, const kn_normalizer *norm, const char *file);
void kn_added_vocab_free(kn_added_vocab *a);
/* Splits s on the added tokens of one set (normalized or not) as the library does: calls
 * piece(ctx, start, end, id) for each stretch, id -1 for text between tokens. */
kn_status kn_added_vocab_split(const kn_added_vocab *a, bool normalized_set, const char *s, size_t n,
                               kn_status (*piece)(void *ctx, size_t start, size_t end, int32_t id), void *ctx);
/* Whether cutting s[0..n) at `at` could change how added tokens split it: a token (of either set,
 * matched in s as it is) spanning the cut, one with lstrip starting there or with single_word
 * ending there. s must show longest bytes past at. */
bool kn_added_vocab_would_cut(const kn_added_vocab *a, const char *s, size_t n, size_t at);

typedef struct kn_post_processor kn_post_processor;
kn_post_processor *kn_post_processor_load(const cJSON *j, const kn_tokenizer *t, const char *file);
void kn_post_processor_free(kn_post_processor *p);
/* Wraps ids (one sequence) in the special tokens the processor adds. */
kn_status kn_post_processor_apply(const kn_post_processor *p, const kn_tok_ids *in, kn_tok_ids *out);
/* The ids the processor puts before the sequence and after it (appended to prefix and suffix);
 * KN_ERR_UNSUPPORTED for a template that does not hold the sequence exactly once. */
kn_status kn_post_processor_parts(const kn_post_processor *p, kn_tok_ids *prefix, kn_tok_ids *suffix);

typedef struct kn_decoder kn_decoder;
kn_decoder *kn_decoder_load(const cJSON *j, const char *file);
void kn_decoder_free(kn_decoder *d);
/* Runs the decoder chain over tokens (pieces) and appends the joined text to out. at_start: the
 * tokens begin the sequence (false when streaming continues earlier text: Metaspace's and
 * Strip's rules for the first token then do not apply). *open_run: ByteFallback met a run of
 * byte tokens at the end, which tokens still to come may continue. */
kn_status kn_decoder_apply(const kn_decoder *d, kn_tok_pieces *tokens, kn_tok_pieces *scratch, bool at_start,
                           kn_tok_buf *out, bool *open_run);
/* Whether decoding pieces one after another can equal decoding them together: not where a step
 * after Fuse or ByteLevel reads more than one character of the fused text at a time (a Strip of
 * its end, a Replace of longer text, ByteFallback, ByteLevel). */
bool kn_decoder_streamable(const kn_decoder *d);

struct kn_tokenizer {
    kn_normalizer *normalizer;       /* NULL: none */
    kn_pre_tokenizer *pre_tokenizer; /* NULL: none */
    kn_bpe *model;
    kn_added_vocab added;
    kn_post_processor *post;         /* NULL: none */
    kn_decoder *decoder;             /* NULL: tokens joined by spaces */
    int64_t vocab_size;              /* the largest id + 1 */
};

/* Decodes ids into out (appending), at_start and *open_run as for kn_decoder_apply. */
kn_status kn_tokenizer_decode_into(const kn_tokenizer *t, const int32_t *ids, size_t n, bool skip_special,
                                   bool at_start, kn_tok_buf *out, bool *open_run);

#endif
