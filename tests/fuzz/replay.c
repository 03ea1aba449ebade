/* Runs a fuzz target without libFuzzer: every argument is an input file, or a directory whose
 * files (not its subdirectories or dot files) are inputs, replayed in name order. Each input
 * runs in a child process, as libFuzzer would run it alone; one that crashes, breaks the
 * contract (aborts) or runs longer than REPLAY_SECONDS (a hang) is named, and the rest still
 * run. Exit status 0 when every input passed. */
#define _GNU_SOURCE /* scandir, alphasort */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fuzz.h"

#define REPLAY_SECONDS 10

static void run_input(const char *path) {
    FILE *f = fopen(path, "rb");
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0) n = ftell(f);
    /* exactly the input's size, as libFuzzer passes it, so ASan sees a read past its end */
    uint8_t *data = n >= 0 ? malloc(n > 0 ? (size_t)n : 1) : NULL;
    if (!data || fseek(f, 0, SEEK_SET) != 0 || fread(data, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        exit(1);
    }
    fclose(f);
    alarm(REPLAY_SECONDS); /* SIGALRM ends the child */
    LLVMFuzzerTestOneInput(data, (size_t)n);
    free(data);
    exit(0); /* atexit: the target's temporary files; LeakSanitizer */
}

/* Replays one input in a child; false (with the reason printed) if it failed. */
static bool replay(const char *path) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("replay: fork");
        exit(1);
    }
    if (pid == 0) run_input(path);
    int status;
    if (waitpid(pid, &status, 0) != pid) {
        perror("replay: waitpid");
        exit(1);
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return true;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
        fprintf(stderr, "replay: FAILED %s: no result after %d s (a hang?)\n", path, REPLAY_SECONDS);
    else if (WIFSIGNALED(status))
        fprintf(stderr, "replay: FAILED %s: killed by signal %d (%s)\n", path, WTERMSIG(status),
                strsignal(WTERMSIG(status)));
    else
        fprintf(stderr, "replay: FAILED %s: exit status %d\n", path, WEXITSTATUS(status));
    return false;
}

static int skip_dot(const struct dirent *e) { return e->d_name[0] != '.'; }

int main(int argc, char **argv) {
    int count = 0, failed = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            failed += !replay(argv[i]);
            count++;
            continue;
        }
        struct dirent **names;
        int n = scandir(argv[i], &names, skip_dot, alphasort);
        if (n < 0) {
            perror(argv[i]);
            return 1;
        }
        for (int k = 0; k < n; k++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], names[k]->d_name);
            if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
                failed += !replay(path);
                count++;
            }
            free(names[k]);
        }
        free(names);
    }
    fprintf(stderr, "replay: %d inputs, %d failed\n", count, failed);
    return count > 0 && failed == 0 ? 0 : 1; /* no input at all: a wrong corpus path */
}
