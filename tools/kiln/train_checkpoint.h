/* Training checkpoints: weights, optimizer state, step, RNG and data position, written so
 * that a run killed at any moment resumes from the last complete checkpoint. Layout:
 *
 *     DIR/step-00000100/model.safetensors      the parameters, by name
 *     DIR/step-00000100/optimizer.safetensors  AdamW moments ("adamw.exp_avg.3", ...)
 *     DIR/step-00000100/state.json             step, per-param step counts, Philox state
 *     DIR/latest                               the name of the newest complete checkpoint
 *
 * A checkpoint is written into a temporary directory (DIR/.partial-PID) that is renamed into
 * place, and `latest` is replaced atomically after it, so a crash leaves the previous one
 * intact (and the temporary directory, which the next run removes: train_save_dir.h). */
#ifndef KILN_TOOLS_TRAIN_CHECKPOINT_H
#define KILN_TOOLS_TRAIN_CHECKPOINT_H

#include <kiln/kiln.h>

#include "train_loop.h"

/* Saves the state after `steps_done` steps into o->save_dir, then removes the checkpoints
 * older than the newest o->keep_last (0: none), saying so on stderr unless o->quiet. Errors
 * name the file and the cause; `latest` always names a complete checkpoint. */
kn_status train_checkpoint_save(const train_options *o, const train_job *job, kn_optimizer *opt, int64_t steps_done);
/* Restores the newest checkpoint of dir into the job's params and opt (same names, shapes
 * and dtypes, else an error naming the first mismatch) and the Philox state; *steps_done gets
 * its step. A state.json value out of range is an error naming the file and the key. */
kn_status train_checkpoint_load(const char *dir, const train_job *job, kn_optimizer *opt, int64_t *steps_done);

#endif
