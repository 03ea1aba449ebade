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
 * malformed JSON, a model or component kiln does not have, named) on failure. Components:
 * docs/decisions.md, "Tokenizers (issue 5)". A loaded tokenizer is read-only: any number of
 * threads may encode and decode with it at once. */
kn_tokenizer *kn_tokenizer_load(const char *path);
void kn_tokenizer_free(kn_tokenizer *t);   /* NULL is ignored */

/* The number of ids (the largest id + 1, added tokens included). */
int64_t kn_tokenizer_vocab_size(const kn_tokenizer *t);
/* The id of a token's string (a vocabulary or added token), or -1. */
int32_t kn_tokenizer_token_to_id(const kn_tokenizer *t, const char *token);
/* The token string of an id (as stored in the vocabulary, e.g. "Ġthe"), or NULL. */
const char *kn_tokenizer_id_to_token(const kn_tokenizer *t, int32_t id);
/* Whether id is an added token marked special (skipped by decoding with skip_special). */
bool kn_tokenizer_is_special(const kn_tokenizer *t, int32_t id);

/* Encodes len bytes of UTF-8 text (invalid UTF-8 is KN_ERR_ARG). add_special runs the
 * post-processor (Llama's BOS), as encode(text, add_special_tokens=True) does. *ids is
 * malloc'd (free it, even when *n_ids is 0), *n_ids its length. */
kn_status kn_tokenizer_encode(const kn_tokenizer *t, const char *text, size_t len, bool add_special, int32_t **ids,
                              size_t *n_ids);
/* Decodes ids to malloc'd, NUL-terminated UTF-8 (*len bytes without the NUL) as
 * decode(ids, skip_special_tokens=skip_special) does; an id out of range is KN_ERR_INDEX. */
kn_status kn_tokenizer_decode(const kn_tokenizer *t, const int32_t *ids, size_t n_ids, bool skip_special, char **text,
                              size_t *len);

/* Streaming decoding for generation: push ids one at a time and get the text they complete.
 * Bytes of a UTF-8 character split across tokens are held back until the character is whole,
 * so concatenating every piece equals kn_tokenizer_decode of all ids. */
typedef struct kn_detokenizer kn_detokenizer;
/* NULL with KN_ERR_UNSUPPORTED for a decoder that cannot stream (one stripping the end of the
 * whole text: Strip with stop > 0 after Fuse); kn_tokenizer_decode still works there. */
kn_detokenizer *kn_detokenizer_new(const kn_tokenizer *t, bool skip_special);
/* The new text (possibly empty) after id; valid until the next call. NULL with an error for an
 * id out of range. */
const char *kn_detokenizer_push(kn_detokenizer *d, int32_t id, size_t *len);
/* What is left at the end (an incomplete character becomes U+FFFD, as decode does). */
const char *kn_detokenizer_flush(kn_detokenizer *d, size_t *len);
void kn_detokenizer_free(kn_detokenizer *d);

#ifdef __cplusplus
}
#endif
#endif
