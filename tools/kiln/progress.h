/* The progress bar of long commands (kiln train, kiln tokenize --input), drawn in place on
 * stderr when it is a terminal. */
#ifndef KILN_TOOLS_PROGRESS_H
#define KILN_TOOLS_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

/* Whether stderr is a terminal: the bar is drawn only there; elsewhere callers print lines. */
bool progress_on_terminal(void);
/* Redraws "[####      ] " and then the printf-formatted text for done of total; the line ends
 * once done reaches total. */
void progress_bar(int64_t done, int64_t total, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
