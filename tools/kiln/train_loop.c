/* The shared training loop (train_loop.h). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "train_loop.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "progress.h"
#include "train_checkpoint.h"
#include "train_trace.h"
#include "train_log.h"
#include "train_save_dir.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int fail(const char *what) {
    fprintf(stderr, "\nkiln train: %s: %s\n", what, kn_last_error());
    return 1;
}

/* AdamW with nanoGPT's grouping: weight decay for tensors of 2 or more dims only. */
static kn_optimizer *make_optimizer(const train_options *o, const train_job *job) {
    kn_tensor **decay = calloc((size_t)job->n_params + 1, sizeof *decay);
    kn_tensor **plain = calloc((size_t)job->n_params + 1, sizeof *plain);
    int n_decay = 0, n_plain = 0;
    for (int i = 0; decay && plain && i < job->n_params; i++) {
        if (kn_ndim(job->params[i]) >= 2) decay[n_decay++] = job->params[i];
        else plain[n_plain++] = job->params[i];
    }
    kn_param_group groups[2];
    int n_groups = 0;
    if (n_decay) groups[n_groups++] = kn_adamw_group(decay, n_decay, o->lr, o->weight_decay);
    if (n_plain) groups[n_groups++] = kn_adamw_group(plain, n_plain, o->lr, 0);
    for (int g = 0; g < n_groups; g++) {
        groups[g].beta1 = o->beta1;
        groups[g].beta2 = o->beta2;
        groups[g].eps = o->eps;
    }
    kn_optimizer *opt = decay && plain ? kn_adamw_new(groups, n_groups) : NULL;
    free(decay);
    free(plain);
    return opt;
}

/* Seconds as m:ss, or h:mm:ss from an hour. */
static void format_duration(char *buf, size_t n, double seconds) {
    long s = seconds > 0 && seconds < 1e9 ? (long)(seconds + 0.5) : 0;
    if (s >= 3600) snprintf(buf, n, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    else snprintf(buf, n, "%ld:%02ld", s / 60, s % 60);
}

/* After step `step` (0-based); the run started at step `first`, `elapsed` seconds ago. The
 * time left assumes the remaining steps take what this run's steps took on average. */
static void show_progress(const train_options *o, int64_t step, int64_t first, double loss, double lr, double tok_s,
                          double elapsed) {
    if (o->quiet) return;
    char spent[32], left[32];
    format_duration(spent, sizeof spent, elapsed);
    format_duration(left, sizeof left, elapsed / (double)(step + 1 - first) * (double)(o->steps - step - 1));
    if (progress_on_terminal()) {
        progress_bar(step + 1, o->steps, "step %lld/%lld  loss %.4f  lr %.2e  %.0f tok/s  %s elapsed, eta %s ",
                     (long long)(step + 1), (long long)o->steps, loss, lr, tok_s, spent, left);
        return;
    }
    int64_t every = o->steps >= 20 ? o->steps / 20 : 1;
    if ((step + 1) % every == 0 || step == 0 || step + 1 == o->steps)
        fprintf(stderr, "step %lld/%lld loss %.4f lr %.3e %.0f tok/s elapsed %s eta %s\n", (long long)(step + 1),
                (long long)o->steps, loss, lr, tok_s, spent, left);
}

kn_tensor *train_micro_loss(const train_options *o, const train_job *job, int64_t g) {
    if (kn_autocast_push(o->amp_dtype) != KN_OK) return NULL;
    kn_tensor *loss = job->micro_loss(job->ctx, g);
    kn_autocast_pop();
    return loss;
}

/* One optimizer step: K micro-batches (each loss scaled by 1/K), clipping, the update. Its
 * arguments and results travel through ctx, since it runs as a compiled step (kiln/compile.h):
 * in compiled mode its work between two reads (each loss, the gradient norm) is one program,
 * guarded against recompiles; in other modes it runs as it is. */
typedef struct step_call {
    const train_options *o;
    const train_job *job;
    kn_optimizer *opt;
    int64_t step;
    double lr;
    double loss, grad_norm; /* out */
} step_call;

static kn_status train_step(void *ctx, kn_tensor *const *in, int n_in, kn_tensor **out, int n_out) {
    step_call *c = ctx;
    const train_options *o = c->o;
    (void)in, (void)n_in, (void)out, (void)n_out;
    double sum = 0;
    kn_status st = KN_OK;
    for (int j = 0; st == KN_OK && j < o->grad_accum; j++) {
        kn_scope_push();
        kn_tensor *loss = train_micro_loss(o, c->job, c->step * o->grad_accum + j);
        double v = NAN;
        st = loss ? kn_backward(kn_div_scalar(loss, o->grad_accum)) : kn_last_status();
        if (st == KN_OK) st = kn_item(loss, &v);
        sum += v;
        kn_scope_pop();
    }
    /* Clipping at infinity measures the norm without changing anything. The factor is applied
     * inside the update (the gradients are dropped after it, so none is written clipped). */
    double clip = o->grad_clip > 0 ? o->grad_clip : INFINITY, coef = 1;
    if (st == KN_OK) st = kn_clip_grad_norm_coef(c->job->params, c->job->n_params, clip, &c->grad_norm, &coef);
    if (st == KN_OK) st = kn_optimizer_set_lr(c->opt, c->lr);
    if (st == KN_OK) st = kn_optimizer_step_scaled(c->opt, coef);
    if (st == KN_OK) st = kn_optimizer_zero_grad(c->opt);
    if (st == KN_OK) st = kn_sync();
    c->loss = sum / o->grad_accum;
    return st;
}

/* Restores the checkpoint of o->resume_dir (first removing what killed runs left there, when
 * it is not the save directory, which is swept when locked). *start gets its step. */
static kn_status resume(const train_options *o, const train_job *job, kn_optimizer *opt, int64_t *start) {
    if (!o->save_dir || strcmp(o->save_dir, o->resume_dir) != 0) train_save_dir_sweep(o->resume_dir, o->quiet);
    kn_status st = train_checkpoint_load(o->resume_dir, job, opt, start);
    if (st == KN_OK && *start > o->steps)
        st = kn_set_error(KN_ERR_ARG, "%s: its checkpoint is at step %lld, past --steps %lld (give --steps %lld to "
                          "finish that run or to redo its evaluation)", o->resume_dir, (long long)*start,
                          (long long)o->steps, (long long)*start);
    if (st == KN_OK && !o->quiet) fprintf(stderr, "resumed from %s at step %lld\n", o->resume_dir, (long long)*start);
    return st;
}

/* Instead of training, for a run resumed from a checkpoint at its last step: what follows the
 * last step (a kill may have come between the checkpoint and it): the model exported, then
 * the task's evaluation and samples. */
static int end_of_run(const train_options *o, const train_job *job) {
    if (!o->quiet) fprintf(stderr, "the checkpoint is at the last step: nothing to train; redoing the end-of-run work\n");
    if (o->save_dir && job->export_model && job->export_model(job->ctx, o->save_dir) != KN_OK) return fail("export");
    if (job->after_step && job->after_step(job->ctx, o->steps, true) != KN_OK) return fail("evaluation");
    return 0;
}

/* The most the device's tensors held at once since the last call (the step's peak); the
 * peak then restarts from what is held now. */
static double step_peak_mib(void) {
    kn_memory_stats ms;
    if (kn_memory_stats_get(kn_default_device(), &ms) != KN_OK) return 0; /* not reached: the device ran the step */
    kn_memory_reset_peak(kn_default_device());
    return (double)ms.peak_allocated_bytes / (1 << 20);
}

int train_run(const train_options *o, const train_job *job, double *final_loss) {
    kn_optimizer *opt = make_optimizer(o, job);
    if (!opt) return fail("optimizer");
    if (o->trace) { /* a device without values: record the steps instead (train_trace.h) */
        int traced = train_trace(o, job, opt);
        kn_optimizer_free(opt);
        return traced;
    }
    kn_lr_schedule sched;
    kn_compiled *program = NULL;
    int rc = 0, lock = -1;
    FILE *log = NULL;
    int64_t start = 0;
    double loss = NAN;
    if (kn_lr_schedule_init(&sched, o->schedule, o->lr, o->min_lr, o->warmup, o->steps) != KN_OK) {
        rc = fail("schedule");
        goto done;
    }
    /* Before any training: a save directory that cannot be used fails now, not at the first
     * checkpoint, and no second trainer writes into it. */
    if (o->save_dir && (lock = train_save_dir_open(o->save_dir, o->quiet)) < 0) {
        rc = fail("--save");
        goto done;
    }
    if (o->resume_dir && resume(o, job, opt, &start) != KN_OK) {
        rc = fail("resume");
        goto done;
    }
    if (o->log_path && !(log = train_log_open(o->log_path, start))) {
        rc = fail("--log");
        goto done;
    }
    if (o->resume_dir && start == o->steps) {
        rc = end_of_run(o, job);
        goto done;
    }
    step_call call = {.o = o, .job = job, .opt = opt};
    if (!(program = kn_compile(train_step, &call, &(kn_compile_options){.name = "train step"}))) {
        rc = fail("compile");
        goto done;
    }
    kn_memory_reset_peak(kn_default_device()); /* the first step's peak leaves set-up out */
    double t_run = now_ms();
    for (int64_t step = start; step < o->steps; step++) {
        if (o->profile && step == (o->steps - o->profile > start ? o->steps - o->profile : start)) kn_profile_start();
        double t0 = now_ms(), lr = kn_lr_at(&sched, step);
        call.step = step, call.lr = lr, call.loss = call.grad_norm = NAN;
        kn_status st = kn_compiled_run(program, NULL, 0, NULL, 0);
        double grad_norm = call.grad_norm;
        loss = call.loss;
        if (st != KN_OK) {
            rc = fail("training step");
            break;
        }
        if (!isfinite(loss)) {
            fprintf(stderr, "\nkiln train: the loss is %g at step %lld; stopping\n", loss, (long long)step);
            rc = 1;
            break;
        }
        if (job->losses) job->losses[step] = loss;
        double ms = now_ms() - t0, tok_s = job->tokens_per_micro * o->grad_accum / (ms / 1e3);
        if (log && train_log_step(log, o->log_path, step, loss, lr, grad_norm, ms, tok_s, step_peak_mib()) != KN_OK) {
            rc = fail("--log");
            break;
        }
        show_progress(o, step, start, loss, lr, tok_s, (now_ms() - t_run) / 1e3);
        int64_t done = step + 1;
        bool last = done == o->steps, save = o->save_dir && ((o->save_every && done % o->save_every == 0) || last);
        if (save && train_checkpoint_save(o, job, opt, done) != KN_OK) {
            rc = fail("checkpoint");
            break;
        }
        /* As if killed right after the checkpoint: nothing flushed or freed, nothing exported. */
        if (o->abort_after && done == o->abort_after) _exit(137);
        if (save && job->export_model && job->export_model(job->ctx, o->save_dir) != KN_OK) {
            rc = fail("export");
            break;
        }
        if (job->after_step && job->after_step(job->ctx, done, last) != KN_OK) {
            rc = fail("evaluation");
            break;
        }
    }
    if (o->profile) {
        kn_profile_stop();
        fprintf(stderr, "kiln train: kernel time per op over the profiled steps\n");
        kn_profile_print(stderr, "");
    }
done:
    if (final_loss) *final_loss = loss;
    if (train_log_close(log, o->log_path) != KN_OK && rc == 0) rc = fail("--log");
    train_save_dir_close(lock);
    kn_compiled_free(program);
    kn_optimizer_free(opt);
    return rc;
}
