/* The --log file of `kiln train`: one JSON object per step ({"step": N, "loss": ...}, N from
 * 0). A resumed run first cuts the file back to the steps before its checkpoint, so that no
 * step appears twice. */
#ifndef KILN_TOOLS_TRAIN_LOG_H
#define KILN_TOOLS_TRAIN_LOG_H

#include <stdint.h>
#include <stdio.h>

#include <kiln/kiln.h>

/* Opens path for a run that starts at step `start`: from 0, a new file; past 0, the file
 * keeps only its complete lines of steps before start (replaced atomically, so a kill leaves
 * the old file or the cut one), and the run appends to it. A pipe or device is appended to
 * as it is. NULL with an error naming the file. */
FILE *train_log_open(const char *path, int64_t start);
/* Appends one step's line (peak_mib: the most memory the step's tensors held at once on the
 * device) and flushes it; a failed write (a full disk) is an error naming
 * the file and its cause. */
kn_status train_log_step(FILE *log, const char *path, int64_t step, double loss, double lr, double grad_norm,
                         double ms, double tokens_per_s, double peak_mib);
/* Closes the file (NULL is ignored); a failure to write its last bytes is an error. */
kn_status train_log_close(FILE *log, const char *path);

#endif
