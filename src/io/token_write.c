/* Writing token files atomically: readers see the old file or the whole new one, never a
 * partial write (a temporary in the same directory, fsync, rename, fsync of the directory). */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "io/token_le.h"
#include "kiln/data.h"

static bool write_all(int fd, const unsigned char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* The header (llm.c) and the tokens, encoded through a small buffer. */
static bool write_tokens(int fd, const uint32_t *tokens, int64_t n, kn_token_format format) {
    enum { CHUNK = 1 << 16 };
    _Static_assert(CHUNK >= KN_LLMC_HEADER_INTS * 4, "the llm.c header fits in one chunk");
    unsigned char buf[CHUNK];
    if (format == KN_TOKENS_LLMC) {
        memset(buf, 0, KN_LLMC_HEADER_INTS * 4);
        kn_put_le(buf, KN_LLMC_MAGIC, 4);
        kn_put_le(buf + 4, KN_LLMC_VERSION, 4);
        kn_put_le(buf + 8, (uint32_t)n, 4);
        if (!write_all(fd, buf, KN_LLMC_HEADER_INTS * 4)) return false;
    }
    int width = format == KN_TOKENS_U32 ? 4 : 2;
    size_t used = 0;
    for (int64_t i = 0; i < n; i++) {
        kn_put_le(buf + used, tokens[i], width);
        used += (size_t)width;
        if (used == CHUNK) {
            if (!write_all(fd, buf, used)) return false;
            used = 0;
        }
    }
    return write_all(fd, buf, used);
}

/* Makes the rename itself durable; some file systems cannot fsync a directory, which only
 * weakens durability, so failures here are not errors. */
static void sync_parent_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, (size_t)(slash - path) + 1) : strdup(".");
    int fd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(dir);
}

static kn_status check_args(const char *path, const uint32_t *tokens, int64_t n, kn_token_format format) {
    if (!path || (!tokens && n > 0)) return kn_error(KN_ERR_NULL, "token file write: NULL path or tokens");
    if (n < 0) return kn_error(KN_ERR_ARG, "token file %s: negative token count %lld", path, (long long)n);
    if (format != KN_TOKENS_U16 && format != KN_TOKENS_U32 && format != KN_TOKENS_LLMC)
        return kn_error(KN_ERR_ARG, "token file %s: writing needs an explicit format (U16, U32 or LLMC)", path);
    if (format == KN_TOKENS_LLMC && n > INT32_MAX)
        return kn_error(KN_ERR_ARG, "token file %s: %lld tokens do not fit the llm.c header's int32 count", path,
                        (long long)n);
    if (format != KN_TOKENS_U32)
        for (int64_t i = 0; i < n; i++)
            if (tokens[i] > UINT16_MAX)
                return kn_error(KN_ERR_ARG, "token file %s: token %u at position %lld does not fit in uint16 "
                                "(use KN_TOKENS_U32)", path, tokens[i], (long long)i);
    return KN_OK;
}

kn_status kn_token_file_write(const char *path, const uint32_t *tokens, int64_t n, kn_token_format format) {
    kn_status s = check_args(path, tokens, n, format);
    if (s != KN_OK) return s;
    /* A name no other writer uses: the process id and a counter, with O_EXCL to be sure. */
    static atomic_uint serial;
    size_t len = strlen(path) + 48;
    char *tmp = malloc(len);
    if (!tmp) return kn_error(KN_ERR_OOM, "token file %s: out of host memory", path);
    snprintf(tmp, len, "%s.tmp.%ld.%u", path, (long)getpid(), atomic_fetch_add(&serial, 1));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        s = kn_error(KN_ERR_IO, "token file %s: cannot create %s (%s)", path, tmp, strerror(errno));
    } else {
        bool ok = write_tokens(fd, tokens, n, format) && fsync(fd) == 0;
        ok = close(fd) == 0 && ok;
        if (!ok || rename(tmp, path) != 0) {
            s = kn_error(KN_ERR_IO, "token file %s: cannot write (%s)", path, strerror(errno));
            unlink(tmp);
        } else {
            sync_parent_dir(path);
        }
    }
    free(tmp);
    return s;
}
