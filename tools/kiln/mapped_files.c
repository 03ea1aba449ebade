/* kiln_explain_sigbus: kiln reads weights in place (mmap), so a file truncated while a command
 * runs kills it with SIGBUS at the next read of a lost page; without a word, that looks like a
 * crash. The message is made beforehand, and the handler only writes it (async-signal-safe). */
#define _POSIX_C_SOURCE 200809L
#include "mapped_files.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char message[1024];
static size_t message_len;

static void on_sigbus(int sig) {
    ssize_t written = write(STDERR_FILENO, message, message_len);
    (void)written;
    signal(sig, SIG_DFL);
    raise(sig);
}

void kiln_explain_sigbus(const char *command, const char *what) {
    int n = snprintf(message, sizeof message,
                     "%s: SIGBUS: a file it reads in place (memory-mapped) shrank or was replaced while it ran: %s. "
                     "Keep such files unchanged while kiln uses them (write new ones elsewhere and rename them).\n",
                     command, what);
    message_len = n < 0 ? 0 : (size_t)n < sizeof message ? (size_t)n : sizeof message - 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigbus;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
}
