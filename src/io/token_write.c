/* Writing token files atomically (through kn_atomic_file): readers see the old file or the
 * whole new one, never a partial write; tokens may be written as they come. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/token_le.h"
#include "kiln/data.h"
#include "kiln/io.h"

struct kn_token_writer {
    kn_atomic_file *file;
    char *path;
    kn_token_format format;
    int64_t count;
};

/* The llm.c header for count tokens. */
static bool write_llmc_header(FILE *f, int64_t count) {
    unsigned char h[KN_LLMC_HEADER_INTS * 4] = {0};
    kn_put_le(h, KN_LLMC_MAGIC, 4);
    kn_put_le(h + 4, KN_LLMC_VERSION, 4);
    kn_put_le(h + 8, (uint32_t)count, 4);
    return fwrite(h, 1, sizeof h, f) == sizeof h;
}

kn_token_writer *kn_token_writer_open(const char *path, kn_token_format format) {
    if (!path) return kn_error_null(KN_ERR_NULL, "token file write: NULL path");
    if (format != KN_TOKENS_U16 && format != KN_TOKENS_U32 && format != KN_TOKENS_LLMC)
        return kn_error_null(KN_ERR_ARG, "token file %s: writing needs an explicit format (U16, U32 or LLMC)", path);
    kn_token_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path))) {
        free(w);
        return kn_error_null(KN_ERR_OOM, "token file %s: out of host memory", path);
    }
    w->format = format;
    w->file = kn_atomic_file_open(path);
    if (!w->file) {
        free(w->path);
        free(w);
        return NULL;
    }
    /* llm.c's count is not known yet: a header now, its count at commit. */
    if (format == KN_TOKENS_LLMC && !write_llmc_header(kn_atomic_file_stream(w->file), 0)) {
        kn_error(KN_ERR_IO, "token file %s: cannot write its header", path);
        kn_token_writer_abort(w);
        return NULL;
    }
    return w;
}

kn_status kn_token_writer_put(kn_token_writer *w, const uint32_t *tokens, size_t n) {
    if (!w || (!tokens && n)) return kn_error(KN_ERR_NULL, "token file write: NULL writer or tokens");
    enum { CHUNK = 1 << 16 };
    unsigned char buf[CHUNK];
    int width = w->format == KN_TOKENS_U32 ? 4 : 2;
    size_t used = 0;
    FILE *f = kn_atomic_file_stream(w->file);
    for (size_t i = 0; i < n; i++, w->count++) {
        if (width == 2 && tokens[i] > UINT16_MAX)
            return kn_error(KN_ERR_ARG, "token file %s: token %u at position %lld does not fit in uint16 (use "
                            "KN_TOKENS_U32)", w->path, tokens[i], (long long)w->count);
        if (w->format == KN_TOKENS_LLMC && w->count == INT32_MAX)
            return kn_error(KN_ERR_ARG, "token file %s: more than %d tokens do not fit the llm.c header's int32 count",
                            w->path, INT32_MAX);
        kn_put_le(buf + used, tokens[i], width);
        used += (size_t)width;
        if (used == CHUNK || i + 1 == n) {
            if (fwrite(buf, 1, used, f) != used) /* the stream's error flag makes commit fail too */
                return kn_error(KN_ERR_IO, "token file %s: cannot write", w->path);
            used = 0;
        }
    }
    return KN_OK;
}

int64_t kn_token_writer_count(const kn_token_writer *w) { return w ? w->count : 0; }

kn_status kn_token_writer_commit(kn_token_writer *w) {
    if (!w) return kn_error(KN_ERR_NULL, "token file write: NULL writer");
    FILE *f = kn_atomic_file_stream(w->file);
    if (w->format == KN_TOKENS_LLMC && (fseek(f, 0, SEEK_SET) != 0 || !write_llmc_header(f, w->count))) {
        kn_status s = kn_error(KN_ERR_IO, "token file %s: cannot write its header", w->path);
        kn_token_writer_abort(w);
        return s;
    }
    kn_status s = kn_atomic_file_commit(w->file);
    free(w->path);
    free(w);
    return s;
}

void kn_token_writer_abort(kn_token_writer *w) {
    if (!w) return;
    kn_atomic_file_abort(w->file);
    free(w->path);
    free(w);
}

kn_status kn_token_file_write(const char *path, const uint32_t *tokens, int64_t n, kn_token_format format) {
    if (!path || (!tokens && n > 0)) return kn_error(KN_ERR_NULL, "token file write: NULL path or tokens");
    if (n < 0) return kn_error(KN_ERR_ARG, "token file %s: negative token count %lld", path, (long long)n);
    kn_token_writer *w = kn_token_writer_open(path, format);
    if (!w) return kn_last_status();
    kn_status s = kn_token_writer_put(w, tokens, (size_t)n);
    if (s != KN_OK) {
        kn_token_writer_abort(w);
        return s;
    }
    return kn_token_writer_commit(w);
}
