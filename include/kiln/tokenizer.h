/* Tokenizers read from a Hugging Face tokenizer.json, giving exactly the ids of the `tokenizers`
 * library: byte-level BPE (GPT-2, Qwen2/Qwen3, Llama 3: ByteLevel pre-tokenizer with its split
 * regex) and SentencePiece-style BPE with byte fallback (Llama 2: Metaspace / Prepend+Replace
 * normalizers, <0xNN> byte tokens), added and special tokens, the normalizers those files use
 * (NFC, NFKC, NFD, NFKD, Lowercase, Prepend, Replace, Strip, Sequence) and the post-processor
 * that adds BOS/EOS (TemplateProcessing, ByteLevel, RobertaProcessing).
 *
 * Errors name the file and the problem ("tokenizer.json: model.merges[12]: not a pair of
 * tokens"); nothing here aborts on bad input. */
#ifndef KILN_TOKENIZER_H
#define KILN_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kn_tokenizer kn_tokenizer;

/* path: a tokenizer.json file, or a directory that holds one. NULL with KN_ERR_IO (unreadable,
 * malformed JSON, a string that is not valid UTF-8, a number out of its range, a model or
 * component kiln does not have: each named) on failure. Ids are integers in [0, 2^31 - 1]
 * (the library's are u32, kiln's int32); memory grows with the number of ids, not with the
 * largest. Components:
 * docs/decisions.md, "Tokenizers (issue 5)". A loaded tokenizer is read-only: any number of
 * threads may encode and decode with it at once. */
KN_API kn_tokenizer *kn_tokenizer_load(const char *path);
KN_API void kn_tokenizer_free(kn_tokenizer *t);   /* NULL is ignored */

/* The number of ids (the largest id + 1, added tokens included; some ids below it may be missing). */
KN_API int64_t kn_tokenizer_vocab_size(const kn_tokenizer *t);
/* The id of a token's string (a vocabulary or added token), or -1. */
KN_API int32_t kn_tokenizer_token_to_id(const kn_tokenizer *t, const char *token);
/* The token string of an id (as stored in the vocabulary, e.g. "Ġthe"), or NULL. */
KN_API const char *kn_tokenizer_id_to_token(const kn_tokenizer *t, int32_t id);
/* Whether id is an added token marked special (skipped by decoding with skip_special). */
KN_API bool kn_tokenizer_is_special(const kn_tokenizer *t, int32_t id);

/* Encodes len bytes of UTF-8 text; text that is not valid UTF-8 is KN_ERR_ARG naming the offset
 * of the first ill-formed byte (the library takes only Rust strings, always valid; kiln does
 * not guess what other bytes mean). add_special runs the post-processor (Llama's BOS), as
 * encode(text, add_special_tokens=True) does. *ids is malloc'd (free it, even when *n_ids is
 * 0), *n_ids its length. */
KN_API kn_status kn_tokenizer_encode(const kn_tokenizer *t, const char *text, size_t len, bool add_special, int32_t **ids,
                              size_t *n_ids);
/* Decodes ids to malloc'd, NUL-terminated UTF-8 (*len bytes without the NUL) as
 * decode(ids, skip_special_tokens=skip_special) does. An id the tokenizer lacks (past the
 * vocabulary: a model's embedding is often padded beyond it) decodes to nothing, as in the
 * library; a negative id is KN_ERR_INDEX. */
KN_API kn_status kn_tokenizer_decode(const kn_tokenizer *t, const int32_t *ids, size_t n_ids, bool skip_special, char **text,
                              size_t *len);

/* Streaming decoding for generation: push ids one at a time and get the text they complete.
 * Bytes of a UTF-8 character split across tokens are held back until the character is whole,
 * so concatenating every piece equals kn_tokenizer_decode of all ids. */
typedef struct kn_detokenizer kn_detokenizer;
/* NULL with KN_ERR_UNSUPPORTED for a decoder that cannot stream: one whose step after Fuse or
 * ByteLevel reads more than a character of the whole text at a time (Strip with stop > 0, a
 * Replace of longer text, ByteFallback, ByteLevel); kn_tokenizer_decode still works there. */
KN_API kn_detokenizer *kn_detokenizer_new(const kn_tokenizer *t, bool skip_special);
/* The new text (possibly empty) after id; valid until the next call. An id the tokenizer lacks
 * adds nothing; NULL with KN_ERR_INDEX for a negative id. */
KN_API const char *kn_detokenizer_push(kn_detokenizer *d, int32_t id, size_t *len);
/* What is left at the end (an incomplete character becomes U+FFFD, as decode does). */
KN_API const char *kn_detokenizer_flush(kn_detokenizer *d, size_t *len);
KN_API void kn_detokenizer_free(kn_detokenizer *d);

/* Streaming encoding, for a text too long to hold whole (a corpus read in blocks): push bytes as
 * they come (a block may end inside a character) and take the ids of what could be encoded so
 * far; finish ends the text, and the encoder then starts a new one. Text is encoded in segments
 * of at least 64 KiB that end after a line break followed by a non-space, each continuing the
 * one before (the prefix space, Prepend and Strip rules apply only at the real start and end;
 * add_special's tokens wrap the whole text). The ids are those of kn_tokenizer_encode on the
 * whole text when the tokenizer ends its pieces at such line breaks, as the regex pre-tokenizers
 * of GPT-2, Llama 3 and Qwen do and Llama 2's byte-fallback newlines do; memory holds one
 * segment and the text of a line. Text that is not UTF-8 is KN_ERR_ARG naming its byte offset in
 * the current text. */
typedef struct kn_encoder kn_encoder;
/* NULL with KN_ERR_UNSUPPORTED when add_special and the post-processor's template holds the
 * text more than once. */
KN_API kn_encoder *kn_encoder_new(const kn_tokenizer *t, bool add_special);
/* *ids, *n_ids: the new ids (possibly none), valid until the next call. */
KN_API kn_status kn_encoder_push(kn_encoder *e, const char *text, size_t len, const int32_t **ids, size_t *n_ids);
/* The rest of the text's ids, the post-processor's closing tokens included. */
KN_API kn_status kn_encoder_finish(kn_encoder *e, const int32_t **ids, size_t *n_ids);
KN_API void kn_encoder_free(kn_encoder *e);

#ifdef __cplusplus
}
#endif
#endif
