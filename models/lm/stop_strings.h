/* Stop strings over streamed text: a row stops when its text contains one, which may span
 * tokens; the stop string and what follows are not output, and text that could still be the
 * start of one is held back until it is known not to be. Internal to models/lm. */
#ifndef KILN_MODELS_LM_STOP_STRINGS_H
#define KILN_MODELS_LM_STOP_STRINGS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct lm_stop_matcher lm_stop_matcher;

/* n stop strings (non-empty, copied); none makes a matcher that passes text through. NULL with
 * an error for an empty string or no memory. */
lm_stop_matcher *lm_stop_matcher_new(const char *const *stop, int n);
void lm_stop_matcher_free(lm_stop_matcher *m);

/* Adds text; *out and *out_len get the text that is now safe to output (valid until the next
 * call). Returns true once a stop string has been seen: *out then ends where it began, and
 * later text is ignored. NULL *out with an error when out of memory. */
bool lm_stop_push(lm_stop_matcher *m, const char *text, size_t len, const char **out, size_t *out_len);
/* At the end of generation: the text still held back (none after a stop). */
const char *lm_stop_flush(lm_stop_matcher *m, size_t *len);
bool lm_stop_seen(const lm_stop_matcher *m);

#endif
