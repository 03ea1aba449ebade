/* The save directory of `kiln train` (train_save_dir.h).
 *
 * A flock on DIR/.kiln-train.lock, not the pids in the leftovers' names, tells a live writer's
 * files from a killed one's: the lock goes with its holder's death, works across pid namespaces
 * (containers sharing a volume) and is not fooled by a pid reused by an unrelated process. So
 * while this process holds the lock every leftover is stale. Only where the file system refuses
 * locks does the sweep fall back to the pids, removing the files of processes that are gone. */
#define _DEFAULT_SOURCE /* flock */
#include "train_save_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <kiln/kiln.h>

#define LOCK_NAME ".kiln-train.lock"

bool train_path(char *out, const char *dir, const char *name) {
    return (size_t)snprintf(out, TRAIN_PATH_SIZE, "%s/%s", dir, name) < TRAIN_PATH_SIZE;
}

void train_remove_dir(const char *path) {
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
    rmdir(path);
}

/* The pid in a killed run's leftover's name (`.partial-PID`, `NAME.tmp.PID.N`), or 0. */
static long leftover_pid(const char *name, bool *is_dir) {
    long pid = 0;
    unsigned n;
    int end = 0;
    *is_dir = sscanf(name, ".partial-%ld%n", &pid, &end) == 1 && !name[end];
    if (*is_dir) return pid;
    const char *tmp = NULL;
    for (const char *s = name; (s = strstr(s, ".tmp.")); s++) tmp = s;
    end = 0;
    return tmp && tmp != name && sscanf(tmp, ".tmp.%ld.%u%n", &pid, &n, &end) == 2 && !tmp[end] ? pid : 0;
}

static void sweep(const char *dir, bool locked, bool quiet) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[TRAIN_PATH_SIZE];
    while ((e = readdir(d))) {
        bool is_dir;
        long pid = leftover_pid(e->d_name, &is_dir);
        bool stale = pid > 0 && (locked || pid == (long)getpid() || (kill((pid_t)pid, 0) != 0 && errno == ESRCH));
        if (!stale || !train_path(path, dir, e->d_name)) continue;
        if (is_dir) train_remove_dir(path);
        else unlink(path);
        if (!quiet) fprintf(stderr, "kiln train: removed %s, left by a run that was killed\n", path);
    }
    closedir(d);
}

/* mkdir -p: every missing directory of the path, then a check that it is one. */
static kn_status make_dirs(const char *dir) {
    char path[TRAIN_PATH_SIZE];
    if (!*dir) return kn_set_error(KN_ERR_IO, "--save: the directory's name is empty");
    if ((size_t)snprintf(path, sizeof path, "%s", dir) >= sizeof path)
        return kn_set_error(KN_ERR_IO, "%s: the path is too long", dir);
    for (char *p = path + 1;; p++) {
        if (*p && *p != '/') continue;
        char c = *p;
        *p = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            return kn_set_error(KN_ERR_IO, "%s: cannot create the directory %s (%s)", dir, path, strerror(errno));
        *p = c;
        if (!c) break;
    }
    struct stat sb;
    if (stat(dir, &sb) != 0) return kn_set_error(KN_ERR_IO, "%s: %s", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return kn_set_error(KN_ERR_IO, "%s: not a directory", dir);
    return KN_OK;
}

/* The lock file's descriptor, or -1 with errno. */
static int open_lock(const char *dir) {
    char path[TRAIN_PATH_SIZE];
    if (!train_path(path, dir, LOCK_NAME)) return errno = ENAMETOOLONG, -1;
    return open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
}

int train_save_dir_open(const char *dir, bool quiet) {
    if (make_dirs(dir) != KN_OK) return -1;
    int fd = open_lock(dir);
    if (fd < 0) {
        kn_set_error(KN_ERR_IO, "%s: cannot write into the directory (%s)", dir, strerror(errno));
        return -1;
    }
    bool locked = flock(fd, LOCK_EX | LOCK_NB) == 0;
    if (!locked && errno == EWOULDBLOCK) {
        char pid[24] = "";
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        pid[n > 0 ? strcspn(pid, "\n") : 0] = '\0';
        kn_set_error(KN_ERR_IO, "%s: another kiln train%s%s%s is saving checkpoints there; wait for it to end or "
                     "give another --save directory", dir, *pid ? " (pid " : "", pid, *pid ? ")" : "");
        close(fd);
        return -1;
    }
    if (locked) { /* the holder's pid, for the message above only: the lock works without it */
        char text[24];
        int n = snprintf(text, sizeof text, "%ld\n", (long)getpid());
        bool noted = ftruncate(fd, 0) == 0 && pwrite(fd, text, (size_t)n, 0) == n;
        (void)noted;
    }
    sweep(dir, locked, quiet);
    return fd;
}

void train_save_dir_close(int lock) {
    if (lock >= 0) close(lock);
}

void train_save_dir_sweep(const char *dir, bool quiet) {
    int fd = open_lock(dir);
    if (fd < 0) return;
    bool locked = flock(fd, LOCK_EX | LOCK_NB) == 0;
    if (locked || errno != EWOULDBLOCK) sweep(dir, locked, quiet);
    close(fd);
}
