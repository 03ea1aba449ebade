/* The shared training loop (train_loop.h). */
#include "train_loop.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "progress.h"
#include "train_checkpoint.h"

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

static void show_progress(const train_options *o, int64_t step, double loss, double lr, double tok_s) {
    if (o->quiet) return;
    if (progress_on_terminal()) {
        progress_bar(step + 1, o->steps, "step %lld/%lld  loss %.4f  lr %.2e  %.0f tok/s ", (long long)(step + 1),
                     (long long)o->steps, loss, lr, tok_s);
        return;
    }
    int64_t every = o->steps >= 20 ? o->steps / 20 : 1;
    if ((step + 1) % every == 0 || step == 0 || step + 1 == o->steps)
        fprintf(stderr, "step %lld/%lld loss %.4f lr %.3e %.0f tok/s\n", (long long)(step + 1), (long long)o->steps,
                loss, lr, tok_s);
}

/* One optimizer step: K micro-batches (each loss scaled by 1/K), clipping, the update. */
static kn_status train_step(const train_options *o, const train_job *job, kn_optimizer *opt, int64_t step, double lr,
                            double *loss_out, double *grad_norm) {
    double sum = 0;
    kn_status st = KN_OK;
    for (int j = 0; st == KN_OK && j < o->grad_accum; j++) {
        kn_scope_push();
        kn_tensor *loss = job->micro_loss(job->ctx, step * o->grad_accum + j);
        double v = NAN;
        st = loss ? kn_backward(kn_div_scalar(loss, o->grad_accum)) : kn_last_status();
        if (st == KN_OK) st = kn_item(loss, &v);
        sum += v;
        kn_scope_pop();
    }
    kn_scope_push();
    /* Clipping at infinity measures the norm without changing anything. */
    double clip = o->grad_clip > 0 ? o->grad_clip : INFINITY;
    if (st == KN_OK) st = kn_clip_grad_norm(job->params, job->n_params, clip, grad_norm);
    if (st == KN_OK) st = kn_optimizer_set_lr(opt, lr);
    if (st == KN_OK) st = kn_optimizer_step(opt);
    if (st == KN_OK) st = kn_optimizer_zero_grad(opt);
    if (st == KN_OK) st = kn_sync();
    kn_scope_pop();
    *loss_out = sum / o->grad_accum;
    return st;
}

int train_run(const train_options *o, const train_job *job, double *final_loss) {
    kn_optimizer *opt = make_optimizer(o, job);
    if (!opt) return fail("optimizer");
    kn_lr_schedule sched;
    int rc = 0;
    FILE *log = NULL;
    int64_t start = 0;
    if (kn_lr_schedule_init(&sched, o->schedule, o->lr, o->min_lr, o->warmup, o->steps) != KN_OK) {
        rc = fail("schedule");
        goto done;
    }
    if (o->resume_dir && train_checkpoint_load(o->resume_dir, job, opt, &start) != KN_OK) {
        rc = fail("resume");
        goto done;
    }
    if (start && !o->quiet) fprintf(stderr, "resumed from %s at step %lld\n", o->resume_dir, (long long)start);
    if (o->log_path && !(log = fopen(o->log_path, start ? "a" : "w"))) {
        fprintf(stderr, "kiln train: cannot write the log %s\n", o->log_path);
        rc = 1;
        goto done;
    }
    double loss = NAN;
    for (int64_t step = start; step < o->steps; step++) {
        double t0 = now_ms(), lr = kn_lr_at(&sched, step), grad_norm = NAN;
        if (train_step(o, job, opt, step, lr, &loss, &grad_norm) != KN_OK) {
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
        if (log) {
            fprintf(log,
                    "{\"step\": %lld, \"loss\": %.9g, \"lr\": %.9g, \"grad_norm\": %.9g, \"ms\": %.3f, "
                    "\"tokens_per_s\": %.1f}\n",
                    (long long)step, loss, lr, grad_norm, ms, tok_s);
            fflush(log);
        }
        show_progress(o, step, loss, lr, tok_s);
        int64_t done = step + 1;
        bool last = done == o->steps;
        if (o->save_dir && ((o->save_every && done % o->save_every == 0) || last) &&
            train_checkpoint_save(o->save_dir, job, opt, done) != KN_OK) {
            rc = fail("checkpoint");
            break;
        }
        if (o->abort_after && done == o->abort_after) _exit(137); /* as if killed: nothing flushed or freed */
        if (job->after_step && job->after_step(job->ctx, done, last) != KN_OK) {
            rc = fail("evaluation");
            break;
        }
    }
    if (final_loss) *final_loss = loss;
done:
    if (log) fclose(log);
    kn_optimizer_free(opt);
    return rc;
}
