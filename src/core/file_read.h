/* Reading a whole file that another process may have put in our way: never following a
 * symlink, never blocking on a FIFO, never trusting the size fstat gave. */
#ifndef KILN_CORE_FILE_READ_H
#define KILN_CORE_FILE_READ_H

#include <stddef.h>
#include <sys/stat.h>

/* The regular file `name` (relative to the directory fd `dir`, or AT_FDCWD) as malloc'd bytes,
 * their count in *n and the file's status in *st. NULL with errno: that of openat (ELOOP: a
 * symlink), EINVAL when it is not a regular file (*st says what it is), EIO when fewer bytes
 * could be read than fstat promised (the file shrank, or a read failed), ENOMEM. */
void *kn_read_regular_file(int dir, const char *name, size_t *n, struct stat *st);

#endif
