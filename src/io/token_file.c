/* Token files read with pread: nanoGPT uint16, flat uint32 and llm.c (header + uint16). The
 * format and every id are checked at open; a read checks again, so a file that shrinks or
 * changes under a reader is an error naming it, never a SIGBUS (as a mapping would give). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "io/token_le.h"
#include "kiln/data.h"

struct kn_token_file {
    char *path;
    int fd;
    int64_t bytes;      /* the size at open */
    int64_t first;      /* the first token's byte offset */
    int64_t count;
    int width;          /* bytes per token: 2 or 4 */
    kn_token_format format;
    int64_t vocab_size; /* > 0: every id read is checked against it */
};

#define LLMC_HEADER_BYTES (KN_LLMC_HEADER_INTS * 4)
#define SNIFF_BYTES 4096 /* how much of the start decides whether a file is text */
#define CHUNK_TOKENS 4096

/* Reads bytes [off, off + n) of the file; a short read means it shrank since open. */
static kn_status read_bytes(const kn_token_file *f, int64_t off, size_t n, unsigned char *dst) {
    size_t done = 0;
    while (done < n) {
        ssize_t got = pread(f->fd, dst + done, n - done, (off_t)(off + (int64_t)done));
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return kn_error(KN_ERR_IO, "token file %s: read failed (%s)", f->path, strerror(errno));
        if (got == 0) {
            struct stat st;
            long long now = fstat(f->fd, &st) == 0 ? (long long)st.st_size : -1;
            return kn_error(KN_ERR_IO, "token file %s: shrank while in use (%lld bytes at open, %lld now): bytes "
                            "[%lld, %lld) are gone", f->path, (long long)f->bytes, now, (long long)off + (long long)done,
                            (long long)(off + (int64_t)n));
        }
        done += (size_t)got;
    }
    return KN_OK;
}

/* Tokens [start, start + n) (n <= CHUNK_TOKENS) as int64, each checked against the vocabulary. */
static kn_status read_chunk(const kn_token_file *f, int64_t start, int64_t n, int64_t *dst, bool at_open) {
    unsigned char raw[CHUNK_TOKENS * 4];
    kn_status s = read_bytes(f, f->first + start * f->width, (size_t)(n * f->width), raw);
    for (int64_t i = 0; s == KN_OK && i < n; i++) {
        uint32_t t = f->width == 2 ? kn_le16(raw + i * 2) : kn_le32(raw + i * 4);
        if (f->vocab_size > 0 && t >= (uint64_t)f->vocab_size)
            return kn_error(KN_ERR_IO, "token file %s: %stoken %u at position %lld is not below vocab_size %lld", f->path,
                            at_open ? "" : "changed while in use: ", t, (long long)(start + i), (long long)f->vocab_size);
        dst[i] = t;
    }
    return s;
}

/* The length of the UTF-8 sequence a text could have at s (2 to 4 bytes; one cut off by the
 * end of the n bytes counts), or 0. */
static size_t utf8_sequence(const unsigned char *s, size_t n) {
    size_t len = s[0] >= 0xC2 && s[0] <= 0xDF ? 2 : s[0] >= 0xE0 && s[0] <= 0xEF ? 3 : s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : 0;
    for (size_t k = 1; k < len && k < n; k++)
        if ((s[k] & 0xC0) != 0x80) return 0;
    return len;
}

/* Whether the file's first n bytes read as text: printable ASCII, tab, newline, form feed,
 * carriage return and UTF-8 sequences, nothing else. A token file has a zero or control byte
 * within a few tokens (every id below 8192 has one), and random 16-bit ids pass a byte here
 * with a chance of about 0.4, so 16 bytes of them pass with one in a few million. */
static bool looks_like_text(const unsigned char *s, size_t n) {
    if (n < 16) return false; /* too little to tell */
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        if ((c >= 0x20 && c < 0x7f) || c == '\t' || c == '\n' || c == '\f' || c == '\r') {
            i++;
            continue;
        }
        size_t len = utf8_sequence(s + i, n - i);
        if (!len) return false;
        i += len;
    }
    return true;
}

/* Checks the llm.c header (the first bytes of the file, `have` of them read) and sets the
 * token range; KN_OK or an error naming the file. */
static kn_status parse_llmc(kn_token_file *f, const unsigned char *h, size_t have) {
    const char *path = f->path;
    if (have < LLMC_HEADER_BYTES)
        return kn_error(KN_ERR_IO, "token file %s: %lld bytes, shorter than the llm.c header (%d bytes)", path,
                        (long long)f->bytes, LLMC_HEADER_BYTES);
    int32_t magic = (int32_t)kn_le32(h), version = (int32_t)kn_le32(h + 4), declared = (int32_t)kn_le32(h + 8);
    if (magic != KN_LLMC_MAGIC)
        return kn_error(KN_ERR_IO, "token file %s: llm.c magic %d, expected %d", path, magic, KN_LLMC_MAGIC);
    if (version != KN_LLMC_VERSION)
        return kn_error(KN_ERR_IO, "token file %s: llm.c header version %d, expected %d", path, version,
                        KN_LLMC_VERSION);
    int64_t payload = f->bytes - LLMC_HEADER_BYTES;
    if (payload % 2)
        return kn_error(KN_ERR_IO, "token file %s: the %lld bytes after the llm.c header are not a whole number of "
                        "uint16 tokens", path, (long long)payload);
    if (declared != payload / 2)
        return kn_error(KN_ERR_IO, "token file %s: llm.c header says %d tokens but the file holds %lld", path,
                        declared, (long long)(payload / 2));
    if (payload == 0) return kn_error(KN_ERR_IO, "token file %s: no tokens after the llm.c header", path);
    f->first = LLMC_HEADER_BYTES;
    f->width = 2;
    f->count = payload / 2;
    return KN_OK;
}

static kn_status parse_flat(kn_token_file *f) {
    f->width = f->format == KN_TOKENS_U32 ? 4 : 2;
    if (f->bytes % f->width)
        return kn_error(KN_ERR_IO, "token file %s: %lld bytes is not a whole number of %d-byte tokens (%s)", f->path,
                        (long long)f->bytes, f->width, f->width == 4 ? "uint32" : "uint16");
    f->first = 0;
    f->count = f->bytes / f->width;
    return KN_OK;
}

/* Every id below the vocabulary (the error names the first that is not). */
static kn_status check_vocab(const kn_token_file *f) {
    int64_t ids[CHUNK_TOKENS];
    kn_status s = KN_OK;
    for (int64_t i = 0; s == KN_OK && i < f->count; i += CHUNK_TOKENS)
        s = read_chunk(f, i, f->count - i < CHUNK_TOKENS ? f->count - i : CHUNK_TOKENS, ids, true);
    return s;
}

/* Opens the file, checks it is a regular, non-empty file and reads its first bytes. */
static kn_status open_file(kn_token_file *f, unsigned char *head, size_t *have) {
    f->fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0) return kn_error(KN_ERR_IO, "token file %s: cannot open (%s)", f->path, strerror(errno));
    struct stat st;
    if (fstat(f->fd, &st) != 0) return kn_error(KN_ERR_IO, "token file %s: cannot stat (%s)", f->path, strerror(errno));
    if (!S_ISREG(st.st_mode)) return kn_error(KN_ERR_IO, "token file %s: not a regular file", f->path);
    if (st.st_size == 0) return kn_error(KN_ERR_IO, "token file %s: empty file", f->path);
    f->bytes = st.st_size;
    *have = f->bytes < SNIFF_BYTES ? (size_t)f->bytes : SNIFF_BYTES;
    return read_bytes(f, 0, *have, head);
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
    f->fd = -1;
    f->vocab_size = vocab_size;
    unsigned char head[SNIFF_BYTES];
    size_t have = 0;
    kn_status s = open_file(f, head, &have);
    if (s == KN_OK && looks_like_text(head, have))
        s = kn_error(KN_ERR_IO, "token file %s: looks like text, not token ids (its first %zu bytes are all printable); "
                     "make a token file with `kiln tokenize MODEL_DIR --input FILE --output tokens.bin`", path, have);
    if (s == KN_OK) {
        /* AUTO: the llm.c magic decides; a flat uint16 file starting with tokens 54504, 308
         * would be misread, which no vocabulary below 54505 tokens can produce. */
        f->format = format != KN_TOKENS_AUTO ? format
                    : have >= LLMC_HEADER_BYTES && kn_le32(head) == KN_LLMC_MAGIC ? KN_TOKENS_LLMC
                                                                                  : KN_TOKENS_U16;
        s = f->format == KN_TOKENS_LLMC ? parse_llmc(f, head, have) : parse_flat(f);
    }
    if (s == KN_OK && vocab_size > 0) s = check_vocab(f);
    if (s != KN_OK) {
        kn_token_file_close(f);
        return NULL;
    }
    return f;
}

void kn_token_file_close(kn_token_file *f) {
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
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
    kn_status s = KN_OK;
    for (int64_t i = 0; s == KN_OK && i < count; i += CHUNK_TOKENS)
        s = read_chunk(f, start + i, count - i < CHUNK_TOKENS ? count - i : CHUNK_TOKENS, dst + i, false);
    return s;
}
