/* The progress bar (progress.h). */
#include "progress.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

bool progress_on_terminal(void) { return isatty(STDERR_FILENO); }

void progress_bar(int64_t done, int64_t total, const char *fmt, ...) {
    enum { WIDTH = 30 };
    int filled = total > 0 ? (int)(done * WIDTH / total) : WIDTH;
    if (filled > WIDTH) filled = WIDTH;
    fprintf(stderr, "\r[%.*s%*s] ", filled, "##############################", WIDTH - filled, "");
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (done >= total) fputc('\n', stderr);
    fflush(stderr);
}
