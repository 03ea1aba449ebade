/* kn_read_regular_file: one open, one fstat, reads until the promised size or failure. */
#include "core/file_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

void *kn_read_regular_file(int dir, const char *name, size_t *n, struct stat *st) {
    *n = 0;
    /* O_NOFOLLOW: a symlink fails (ELOOP) instead of leading elsewhere. O_NONBLOCK: a FIFO
     * opens at once instead of waiting for a writer, and fstat then refuses it. */
    int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return NULL;
    unsigned char *buf = NULL;
    int err = 0;
    if (fstat(fd, st) != 0) {
        err = errno;
    } else if (!S_ISREG(st->st_mode)) {
        err = EINVAL;
    } else if ((uintmax_t)st->st_size >= SIZE_MAX || !(buf = malloc((size_t)st->st_size + 1))) {
        err = ENOMEM;
    } else {
        size_t size = (size_t)st->st_size, got = 0;
        while (got < size) {
            ssize_t r = read(fd, buf + got, size - got);
            if (r > 0)
                got += (size_t)r;
            else if (r == 0 || errno != EINTR)
                break;
        }
        if (got == size) {
            *n = size;
        } else {
            err = EIO;
            free(buf);
            buf = NULL;
        }
    }
    close(fd);
    if (!buf) errno = err;
    return buf;
}
