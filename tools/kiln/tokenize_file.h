/* `kiln tokenize MODEL_DIR --input FILE --output TOKENS.bin`: a text file (a corpus) into the
 * token file `kiln train --data` reads, streamed block by block. */
#ifndef KILN_TOOLS_TOKENIZE_FILE_H
#define KILN_TOOLS_TOKENIZE_FILE_H

#include <stdbool.h>

#include "kiln/kiln.h"

typedef struct tokenize_file_options {
    const char *model_dir;     /* where tokenizer.json is (a directory, or the file itself) */
    const char *input, *output;
    const char *format;        /* "auto", "u16" or "u32" */
    bool add_special;          /* the post-processor's tokens around each document */
    bool eos_between_docs;     /* documents separated by doc_separator, with EOS between */
    const char *doc_separator; /* as typed: \n, \t and \\ stand for themselves */
    const char *eos_token;     /* NULL: from the model directory */
} tokenize_file_options;

/* Writes the token file; the exit code (0, 1 with a message on stderr). */
int tokenize_file(const kn_tokenizer *t, const tokenize_file_options *o);

#endif
