/* Atomic file replacement: a temporary file beside the target, made durable, renamed over it.
 * rename() within one directory is atomic, so readers see the old file or the new one; the
 * fsyncs order the data before the rename and make the rename itself survive a crash.
 *
 * The stream is a stdio stream over our own write function (fopencookie), so that the errno
 * of a failed write ("No space left on device") is kept: stdio only keeps an error flag, and
 * errno is long overwritten by the time commit reports it. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/atomic_file.h"

struct kn_atomic_file {
    FILE *stream;
    int fd;     /* the temporary file's */
    int err;    /* the errno of the first failed write, 0 if none */
    char *path; /* the target */
    char *tmp;  /* the temporary file beside it */
};

/* Distinguishes the temporary files of threads writing the same target at once. */
static atomic_uint temp_counter;

static void atomic_free(kn_atomic_file *a) {
    free(a->path);
    free(a->tmp);
    free(a);
}

/* The stream's write function: all of buf, or a short count (stdio then sets the stream's
 * error flag) with the failure's errno kept for commit. */
static ssize_t write_to_fd(void *cookie, const char *buf, size_t n) {
    kn_atomic_file *a = cookie;
    size_t done = 0;
    while (done < n && !a->err) {
        ssize_t w = write(a->fd, buf + done, n - done);
        if (w > 0) done += (size_t)w;
        else if (w < 0 && errno != EINTR) a->err = errno;
        else if (w == 0) a->err = EIO;
    }
    return (ssize_t)done;
}

/* The stream seeks like a file's (a header written last, at the start: token files). */
static int seek_fd(void *cookie, off64_t *offset, int whence) {
    kn_atomic_file *a = cookie;
    off_t at = lseek(a->fd, (off_t)*offset, whence);
    if (at < 0) return -1;
    *offset = at;
    return 0;
}

/* The descriptor is closed by commit or abort, which check close's result. */
static int keep_fd(void *cookie) {
    (void)cookie;
    return 0;
}

kn_atomic_file *kn_atomic_file_open(const char *path) {
    if (!path) return kn_error_null(KN_ERR_NULL, "atomic write: path is NULL");
    if (!*path) return kn_error_null(KN_ERR_ARG, "atomic write: path is empty");
    kn_atomic_file *a = calloc(1, sizeof *a);
    size_t tmp_len = strlen(path) + 48;
    if (a) {
        a->path = strdup(path);
        a->tmp = malloc(tmp_len);
    }
    if (!a || !a->path || !a->tmp) {
        if (a) atomic_free(a);
        return kn_error_null(KN_ERR_OOM, "%s: out of memory opening it for writing", path);
    }
    /* O_EXCL never reuses a name; a clash (a file left by a crashed process with our pid)
     * just moves on to the next counter value. Mode 0666 lets the umask decide, as fopen. */
    for (int attempt = 0;; attempt++) {
        snprintf(a->tmp, tmp_len, "%s.tmp.%ld.%u", path, (long)getpid(), atomic_fetch_add(&temp_counter, 1));
        int fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0) {
            a->fd = fd;
            a->stream = fopencookie(a, "wb", (cookie_io_functions_t){.write = write_to_fd, .seek = seek_fd, .close = keep_fd});
            if (a->stream) return a;
            int err = errno;
            close(fd);
            unlink(a->tmp);
            errno = err;
        }
        if (fd >= 0 || errno != EEXIST || attempt == 100) {
            kn_error(KN_ERR_IO, "%s: cannot create a temporary file beside it: %s", path, strerror(errno));
            atomic_free(a);
            return NULL;
        }
    }
}

FILE *kn_atomic_file_stream(kn_atomic_file *a) { return a ? a->stream : NULL; }

int kn_atomic_file_fd(kn_atomic_file *a) { return a ? a->fd : -1; }

void kn_atomic_file_abort(kn_atomic_file *a) {
    if (!a) return;
    fclose(a->stream);
    close(a->fd);
    unlink(a->tmp);
    atomic_free(a);
}

/* fsync of the directory makes the rename durable. Some file systems cannot sync a
 * directory (EINVAL); there the rename is as durable as they allow. */
static kn_status sync_parent_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir) return kn_error(KN_ERR_OOM, "%s: out of memory syncing its directory", path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), err = 0;
    if (fd < 0) {
        err = errno;
    } else {
        if (fsync(fd) != 0) err = errno;
        close(fd);
    }
    free(dir);
    if (err && err != EINVAL)
        return kn_error(KN_ERR_IO, "%s: written, but syncing its directory failed: %s", path, strerror(err));
    return KN_OK;
}

kn_status kn_atomic_file_commit(kn_atomic_file *a) {
    if (!a) {
        kn_error_null_input("atomic write commit", 0);
        return kn_last_status();
    }
    /* The first failing step is the one reported, with its errno; the stream and the
     * descriptor are closed in every case. */
    const char *failed = NULL;
    int err = 0;
    if (ferror(a->stream) || fflush(a->stream) != 0) {
        failed = "writing the temporary file";
        err = a->err; /* every write goes through write_to_fd */
    } else if (fsync(a->fd) != 0) {
        failed = "syncing the temporary file";
        err = errno;
    }
    fclose(a->stream);
    if (close(a->fd) != 0 && !failed) {
        failed = "closing the temporary file";
        err = errno;
    }
    if (!failed && rename(a->tmp, a->path) != 0) {
        failed = "renaming the temporary file over it";
        err = errno;
    }
    if (failed) {
        unlink(a->tmp);
        kn_error(KN_ERR_IO, "%s: %s failed%s%s", a->path, failed, err ? ": " : "", err ? strerror(err) : "");
        atomic_free(a);
        return KN_ERR_IO;
    }
    kn_status st = sync_parent_dir(a->path);
    atomic_free(a);
    return st;
}

kn_status kn_write_file_atomic(const char *path, const void *data, size_t n) {
    if (!data && n) return kn_error(KN_ERR_NULL, "%s: data is NULL", path ? path : "atomic write");
    kn_atomic_file *a = kn_atomic_file_open(path);
    if (!a) return kn_last_status();
    if (n) fwrite(data, 1, n, a->stream); /* a short write sets the stream's error flag */
    return kn_atomic_file_commit(a);
}
