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

/* Ids beyond this are refused at load: real vocabularies hold a few hundred thousand, and a
 * corrupt id must not make kiln allocate gigabytes of id tables. */
#define KN_TOK_MAX_IDS (1 << 26)

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

/* Pieces of text in one buffer: what each pipeline stage takes and makes. at_origin marks a
 * piece that starts at offset 0 of the original text (Metaspace's prepend_scheme "first"). */
typedef struct kn_tok_span {
    size_t off, len;
    bool at_origin;
} kn_tok_span;
typedef struct kn_tok_pieces {
    kn_tok_buf text;
    kn_tok_span *spans;
    size_t n, cap;
} kn_tok_pieces;
/* Appends a piece (its bytes copied); an empty one is dropped, as the library drops them. */
bool kn_tok_pieces_add(kn_tok_pieces *p, const char *s, size_t n, bool at_origin);
/* Appends a token for the decoders, kept even when empty (their rules count positions). */
bool kn_tok_pieces_add_token(kn_tok_pieces *p, const char *s, size_t n);
void kn_tok_pieces_clear(kn_tok_pieces *p);
void kn_tok_pieces_free(kn_tok_pieces *p);

/* The length of the UTF-8 character at s (1..4), reading its code point into *cp; 0 if the
 * bytes there are not a well-formed character. */
int kn_utf8_next(const char *s, size_t n, uint32_t *cp);
bool kn_utf8_valid(const char *s, size_t n);
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

/* String -> int32: core/strmap.h (keys point at strings owned elsewhere). */

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
/* A status for a component the loader does not know: KN_ERR_UNSUPPORTED naming it. */
kn_status kn_tok_unsupported(const char *file, const char *where, const cJSON *component);
char *kn_tok_strdup(const char *s);

/* ---- pipeline stages ---- */

typedef struct kn_normalizer kn_normalizer;   /* a flattened Sequence of normalizers */
kn_normalizer *kn_normalizer_load(const cJSON *j, const char *file);
void kn_normalizer_free(kn_normalizer *n);
/* Normalizes s into out (cleared first). */
kn_status kn_normalizer_apply(const kn_normalizer *n, const char *s, size_t len, kn_tok_buf *out);

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
    int32_t *by_first_byte[2][256];  /* per set (raw, normalized): indices, longest first, -1 ends */
} kn_added_vocab;
kn_status kn_added_vocab_load(kn_added_vocab *a, const cJSON *list, const kn_normalizer *norm, const char *file);
void kn_added_vocab_free(kn_added_vocab *a);
/* Splits s on the added tokens of one set (normalized or not) as the library does: calls
 * piece(ctx, start, end, id) for each stretch, id -1 for text between tokens. */
kn_status kn_added_vocab_split(const kn_added_vocab *a, bool normalized_set, const char *s, size_t n,
                               kn_status (*piece)(void *ctx, size_t start, size_t end, int32_t id), void *ctx);

typedef struct kn_post_processor kn_post_processor;
kn_post_processor *kn_post_processor_load(const cJSON *j, const kn_tokenizer *t, const char *file);
void kn_post_processor_free(kn_post_processor *p);
/* Wraps ids (one sequence) in the special tokens the processor adds. */
kn_status kn_post_processor_apply(const kn_post_processor *p, const kn_tok_ids *in, kn_tok_ids *out);

typedef struct kn_decoder kn_decoder;
kn_decoder *kn_decoder_load(const cJSON *j, const char *file);
void kn_decoder_free(kn_decoder *d);
/* Runs the decoder chain over tokens (pieces) and appends the joined text to out. at_start: the
 * tokens begin the sequence (false when streaming continues earlier text: Metaspace's and
 * Strip's rules for the first token then do not apply). */
kn_status kn_decoder_apply(const kn_decoder *d, kn_tok_pieces *tokens, kn_tok_pieces *scratch, bool at_start,
                           kn_tok_buf *out);
/* Whether decoding pieces one after another can equal decoding them together (a Strip of the
 * end of fused text cannot know where the end is). */
bool kn_decoder_streamable(const kn_decoder *d);

struct kn_tokenizer {
    kn_normalizer *normalizer;       /* NULL: none */
    kn_pre_tokenizer *pre_tokenizer; /* NULL: none */
    kn_bpe *model;
    kn_added_vocab added;
    kn_post_processor *post;         /* NULL: none */
    kn_decoder *decoder;             /* NULL: tokens joined by spaces */
    int32_t *added_at;               /* id -> index in added.tokens, or -1 */
    int64_t vocab_size;
};

/* Decodes ids into out (appending), at_start as for kn_decoder_apply. */
kn_status kn_tokenizer_decode_into(const kn_tokenizer *t, const int32_t *ids, size_t n, bool skip_special,
                                   bool at_start, kn_tok_buf *out);

#endif
