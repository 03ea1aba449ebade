/* Training data: token files and a deterministic, resumable batch loader.
 *
 * Token files (all little-endian, read with pread, so a file truncated while it is read is an
 * error naming it, not a SIGBUS):
 *   KN_TOKENS_U16   nanoGPT: a flat uint16 array, no header.
 *   KN_TOKENS_U32   a flat uint32 array, for vocabularies above 65536 tokens.
 *   KN_TOKENS_LLMC  llm.c: 256 int32 of header (header[0] = 20240520, header[1] = 1,
 *                   header[2] = token count), then the tokens as uint16.
 *   KN_TOKENS_AUTO  llm.c if the file starts with the llm.c magic, else U16 (a U32 file must
 *                   be named explicitly: its bytes cannot tell it from U16).
 *
 * Loader batches. With N tokens in the file, batch i (from 0) row b is the T + 1 tokens from
 * a start s; inputs[b] are the first T of them and targets[b] the last T (shifted by one).
 *   In order:  s = ((i * B + b) * T) mod (N - T - 1).
 *   Shuffled:  the windows are the starts k * T with k in [0, K), K = floor((N - 2) / T) (every
 *              k * T <= N - T - 2, the range of the in-order rule). Window number g = i * B + b
 *              falls in epoch e = g / K at place p = g mod K, and s = perm_e[p] * T, where
 *              perm_e is a Fisher-Yates permutation of [0, K) drawn from Philox keyed by
 *              (seed, e). Each epoch shows every window once; batch i depends only on (seed, i).
 * Either way batch i is a function of i alone, so kn_token_loader_seek(l, i) followed by next
 * gives exactly the batch that reading from the start would, and prefetching changes nothing.
 *
 * Errors: a problem with a file's contents (missing, empty, text rather than tokens, a size
 * that is not a whole number of tokens, a bad llm.c header, too few tokens for T, a token id
 * >= vocab_size) is KN_ERR_IO with a message that names the file and the first problem; so is
 * a file that shrank or changed after it was opened, when it is read; bad options are
 * KN_ERR_ARG. A file is text when its first 4096 bytes (at least 16) are printable ASCII,
 * tab, newline, form feed, carriage return and UTF-8 sequences: token ids below 8192 make zero
 * or control bytes, so real token files fail that within a few tokens. */
#ifndef KILN_DATA_H
#define KILN_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kn_token_format {
    KN_TOKENS_AUTO = 0,
    KN_TOKENS_U16,
    KN_TOKENS_U32,
    KN_TOKENS_LLMC,
} kn_token_format;

#define KN_LLMC_MAGIC 20240520
#define KN_LLMC_VERSION 1
#define KN_LLMC_HEADER_INTS 256

/* ---- token files ------------------------------------------------------------------------ */
typedef struct kn_token_file kn_token_file;

/* Opens and checks a token file. vocab_size > 0 checks every token id here (the error names
 * the first bad position and value), and again as it is read; 0 leaves ids unchecked. NULL
 * with an error on failure. The file stays open until kn_token_file_close. */
KN_API kn_token_file *kn_token_file_open(const char *path, kn_token_format format, int64_t vocab_size);
KN_API void kn_token_file_close(kn_token_file *f); /* NULL is ignored */
KN_API int64_t kn_token_file_count(const kn_token_file *f);
/* The format actually read (AUTO resolved to U16 or LLMC). */
KN_API kn_token_format kn_token_file_format(const kn_token_file *f);
/* Copies tokens [start, start + count) into dst as int64. KN_ERR_IO, naming the file and its
 * sizes, if it shrank (or, with a vocab_size, changed) since it was opened. */
KN_API kn_status kn_token_file_read(const kn_token_file *f, int64_t start, int64_t count, int64_t *dst);

/* Writes n tokens in format (U16, U32 or LLMC) atomically: a temporary file in the same
 * directory, fsync, then rename over path. U16 and LLMC refuse an id above 65535, naming it. */
KN_API kn_status kn_token_file_write(const char *path, const uint32_t *tokens, int64_t n, kn_token_format format);

/* Writing a token file as its tokens come (a tokenizer's output, too long to hold whole), as
 * atomically as kn_token_file_write: the file appears, whole, at commit; abort or a failure
 * leaves the old one. format: U16, U32 or LLMC (its header's count is written at commit). */
typedef struct kn_token_writer kn_token_writer;
KN_API kn_token_writer *kn_token_writer_open(const char *path, kn_token_format format);
/* Appends n tokens; KN_ERR_ARG naming its position for one the format cannot hold (then abort). */
KN_API kn_status kn_token_writer_put(kn_token_writer *w, const uint32_t *tokens, size_t n);
KN_API int64_t kn_token_writer_count(const kn_token_writer *w); /* tokens written so far */
KN_API kn_status kn_token_writer_commit(kn_token_writer *w);    /* frees w, whatever the outcome */
KN_API void kn_token_writer_abort(kn_token_writer *w);          /* NULL is ignored */

/* ---- the batch loader -------------------------------------------------------------------- */
typedef struct kn_token_loader_options {
    int64_t B, T;           /* batch size and sequence length, both > 0 */
    kn_token_format format;
    int64_t vocab_size;     /* > 0: every token id must be below it; 0: unchecked */
    bool shuffle;           /* the shuffled rule above, else in order */
    uint64_t seed;          /* for shuffle */
    bool prefetch;          /* prepare the next batch on a background thread */
} kn_token_loader_options;

/* Set B and T after taking the defaults: AUTO format, in order, prefetch on. */
#define KN_TOKEN_LOADER_OPTIONS_DEFAULT ((kn_token_loader_options){.format = KN_TOKENS_AUTO, .prefetch = true})

typedef struct kn_token_loader kn_token_loader;

/* NULL with an error for bad options or a bad file (including fewer than T + 2 tokens). */
KN_API kn_token_loader *kn_token_loader_open(const char *path, const kn_token_loader_options *opt);
/* Waits for and joins the prefetch thread, then closes the file. NULL is ignored. */
KN_API void kn_token_loader_close(kn_token_loader *l);
/* The next batch as two new [B, T] int64 CPU tensors (owned like any op's result); the
 * position advances by one. Fails (position unchanged) if the file can no longer be read. */
KN_API kn_status kn_token_loader_next(kn_token_loader *l, kn_tensor **inputs, kn_tensor **targets);
/* The number of batches handed out so far (or the index seeked to): save it to resume. */
KN_API int64_t kn_token_loader_position(const kn_token_loader *l);
/* Makes batch_index (>= 0) the next batch; a pending prefetch of another batch is dropped. */
KN_API kn_status kn_token_loader_seek(kn_token_loader *l, int64_t batch_index);
KN_API int64_t kn_token_loader_num_tokens(const kn_token_loader *l);

#ifdef __cplusplus
}
#endif
#endif
