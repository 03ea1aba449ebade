/* The training loop every `kiln train` task shares: micro-batches with gradient
 * accumulation, clipping, the LR schedule, AdamW, logs, progress, checkpoints and resume.
 *
 * After the last step comes the end-of-run work: the model exported into --save DIR and the
 * task's after_step(last) (evaluation, samples). A run resumed from a checkpoint at its last
 * step (killed right after that checkpoint, or finished) does that work again without
 * training: re-running a finished run's command with --resume DIR re-evaluates it. */
#ifndef KILN_TOOLS_TRAIN_LOOP_H
#define KILN_TOOLS_TRAIN_LOOP_H

#include <kiln/kiln.h>

#include "train_options.h"

typedef struct train_job {
    const char *task;
    void *ctx;
    /* The trained parameters and their names (saved and restored by checkpoints). */
    int n_params;
    char *const *names;
    kn_tensor *const *params;
    /* The loss of micro-batch g (its global index, step * grad_accum + j): a function of g
     * alone, so that a resumed run reads the same data. */
    kn_tensor *(*micro_loss)(void *ctx, int64_t g);
    int64_t tokens_per_micro;
    /* Optional: called after a step with the 1-based count of steps done (evaluation). */
    kn_status (*after_step)(void *ctx, int64_t steps_done, bool last);
    /* Optional: writes the model into the save directory as a model directory that `kiln
     * generate` and --init load; called after each checkpoint. */
    kn_status (*export_model)(void *ctx, const char *dir);
    /* Optional: receives each step's loss at its step's index (o->steps entries). */
    double *losses;
} train_job;

/* The loss of micro-batch g (job->micro_loss), its forward under --amp's autocast. */
kn_tensor *train_micro_loss(const train_options *o, const train_job *job, int64_t g);

/* Runs o->steps steps (from the checkpoint in o->resume_dir, if given). 0 on success; on
 * failure prints the error and returns 1. *final_loss gets the last step's loss (NaN when
 * no step ran). */
int train_run(const train_options *o, const train_job *job, double *final_loss);

#endif
