/* Token files read through mmap: nanoGPT uint16, flat uint32 and llm.c (header + uint16).
 * Every check happens at open, so readers of an open file cannot fail. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "io/token_le.h"
#include "kiln/data.h"

struct kn_token_file {
    char *path;
    void *map;
    size_t map_bytes;
    const unsigned char *tokens; /* the first token's bytes, inside map */
    int64_t count;
    int width;                   /* bytes per token: 2 or 4 */
    kn_token_format format;
};

#define LLMC_HEADER_BYTES (KN_LLMC_HEADER_INTS * 4)

static uint32_t token_at(const kn_token_file *f, int64_t i) {
    const unsigned char *p = f->tokens + i * f->width;
    return f->width == 2 ? kn_le16(p) : kn_le32(p);
}

/* Checks the llm.c header and sets the token range; KN_OK or an error naming the file. */
static kn_status parse_llmc(kn_token_file *f, int64_t bytes) {
    const char *path = f->path;
    const unsigned char *h = f->map;
    if (bytes < LLMC_HEADER_BYTES)
        return kn_error(KN_ERR_IO, "token file %s: %lld bytes, shorter than the llm.c header (%d bytes)", path,
                        (long long)bytes, LLMC_HEADER_BYTES);
    int32_t magic = (int32_t)kn_le32(h), version = (int32_t)kn_le32(h + 4), declared = (int32_t)kn_le32(h + 8);
    if (magic != KN_LLMC_MAGIC)
        return kn_error(KN_ERR_IO, "token file %s: llm.c magic %d, expected %d", path, magic, KN_LLMC_MAGIC);
    if (version != KN_LLMC_VERSION)
        return kn_error(KN_ERR_IO, "token file %s: llm.c header version %d, expected %d", path, version,
                        KN_LLMC_VERSION);
    int64_t payload = bytes - LLMC_HEADER_BYTES;
    if (payload % 2)
        return kn_error(KN_ERR_IO, "token file %s: the %lld bytes after the llm.c header are not a whole number of "
                        "uint16 tokens", path, (long long)payload);
    if (declared != payload / 2)
        return kn_error(KN_ERR_IO, "token file %s: llm.c header says %d tokens but the file holds %lld", path,
                        declared, (long long)(payload / 2));
    if (payload == 0) return kn_error(KN_ERR_IO, "token file %s: no tokens after the llm.c header", path);
    f->tokens = h + LLMC_HEADER_BYTES;
    f->width = 2;
    f->count = payload / 2;
    return KN_OK;
}

static kn_status parse_flat(kn_token_file *f, int64_t bytes) {
    f->width = f->format == KN_TOKENS_U32 ? 4 : 2;
    if (bytes % f->width)
        return kn_error(KN_ERR_IO, "token file %s: %lld bytes is not a whole number of %d-byte tokens (%s)", f->path,
                        (long long)bytes, f->width, f->width == 4 ? "uint32" : "uint16");
    f->tokens = f->map;
    f->count = bytes / f->width;
    return KN_OK;
}

static kn_status check_vocab(const kn_token_file *f, int64_t vocab_size) {
    for (int64_t i = 0; i < f->count; i++) {
        uint32_t t = token_at(f, i);
        if (t >= (uint64_t)vocab_size)
            return kn_error(KN_ERR_IO, "token file %s: token %u at position %lld is not below vocab_size %lld",
                            f->path, t, (long long)i, (long long)vocab_size);
    }
    return KN_OK;
}

/* Maps the whole file; f->map_bytes is set once the mapping exists, for close. */
static kn_status map_file(kn_token_file *f, int64_t *bytes) {
    int fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return kn_error(KN_ERR_IO, "token file %s: cannot open (%s)", f->path, strerror(errno));
    struct stat st;
    kn_status s = KN_OK;
    if (fstat(fd, &st) != 0) {
        s = kn_error(KN_ERR_IO, "token file %s: cannot stat (%s)", f->path, strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        s = kn_error(KN_ERR_IO, "token file %s: not a regular file", f->path);
    } else if (st.st_size == 0) {
        s = kn_error(KN_ERR_IO, "token file %s: empty file", f->path);
    } else {
        void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            s = kn_error(KN_ERR_IO, "token file %s: cannot map (%s)", f->path, strerror(errno));
        } else {
            f->map = map;
            f->map_bytes = (size_t)st.st_size;
            *bytes = st.st_size;
        }
    }
    close(fd);
    return s;
}

kn_token_file *kn_token_file_open(const char *path, kn_token_format format, int64_t vocab_size) {
    if (!path) return kn_error_null(KN_ERR_NULL, "token file: path is NULL");
    if (format < KN_TOKENS_AUTO || format > KN_TOKENS_LLMC)
        return kn_error_null(KN_ERR_ARG, "token file %s: unknown format %d", path, (int)format);
    if (vocab_size < 0)
        return kn_error_null(KN_ERR_ARG, "token file %s: vocab_size %lld is negative", path, (long long)vocab_size);
    kn_token_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return kn_error_null(KN_ERR_OOM, "token file %s: out of host memory", path);
    }
    int64_t bytes = 0;
    kn_status s = map_file(f, &bytes);
    if (s == KN_OK) {
        /* AUTO: the llm.c magic decides; a flat uint16 file starting with tokens 54504, 308
         * would be misread, which no vocabulary below 54505 tokens can produce. */
        f->format = format != KN_TOKENS_AUTO ? format
                    : bytes >= LLMC_HEADER_BYTES && kn_le32(f->map) == KN_LLMC_MAGIC ? KN_TOKENS_LLMC
                                                                                     : KN_TOKENS_U16;
        s = f->format == KN_TOKENS_LLMC ? parse_llmc(f, bytes) : parse_flat(f, bytes);
    }
    if (s == KN_OK && vocab_size > 0) s = check_vocab(f, vocab_size);
    if (s != KN_OK) {
        kn_token_file_close(f);
        return NULL;
    }
    return f;
}

void kn_token_file_close(kn_token_file *f) {
    if (!f) return;
    if (f->map_bytes) munmap(f->map, f->map_bytes);
    free(f->path);
    free(f);
}

int64_t kn_token_file_count(const kn_token_file *f) { return f ? f->count : 0; }
kn_token_format kn_token_file_format(const kn_token_file *f) { return f ? f->format : KN_TOKENS_AUTO; }

kn_status kn_token_file_read(const kn_token_file *f, int64_t start, int64_t count, int64_t *dst) {
    if (!f || (!dst && count > 0)) return kn_error(KN_ERR_NULL, "token file read: NULL file or destination");
    if (start < 0 || count < 0 || start > f->count - count)
        return kn_error(KN_ERR_INDEX, "token file %s: tokens [%lld, %lld + %lld) are outside its %lld tokens",
                        f->path, (long long)start, (long long)start, (long long)count, (long long)f->count);
    for (int64_t i = 0; i < count; i++) dst[i] = token_at(f, start + i);
    return KN_OK;
}
