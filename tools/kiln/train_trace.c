/* Tracing training steps on the meta device (train_trace.h). */
#include "train_trace.h"

#include <stdio.h>
#include <stdlib.h>

/* v scaled to three significant digits and a unit ("12.3 G"); base 1000 or 1024. */
static void with_unit(char *buf, size_t n, double v, double base, const char *suffix) {
    static const char *const prefixes[] = {"", "K", "M", "G", "T", "P", "E"};
    int p = 0;
    while (v >= base && p < 6) v /= base, p++;
    snprintf(buf, n, "%.3g %s%s%s", v, prefixes[p], p && base == 1024 ? "i" : "", suffix);
}

/* The most frequent ops of the trace, "matmul 96, add 72, ..." (at most `top` of them). */
static void print_top_ops(int top) {
    int n = kn_op_count(), *order = malloc(sizeof *order * (size_t)n);
    int64_t *count = malloc(sizeof *count * (size_t)n);
    if (!order || !count) goto done;
    for (int i = 0; i < n; i++) {
        kn_op_info info;
        order[i] = i;
        count[i] = kn_op_get_info(i, &info) ? kn_meta_trace_op_count(info.name) : 0;
    }
    printf("  most frequent ops:");
    for (int k = 0; k < top && k < n; k++) {
        int best = k;
        for (int i = k + 1; i < n; i++) best = count[order[i]] > count[order[best]] ? i : best;
        int tmp = order[k];
        order[k] = order[best], order[best] = tmp;
        kn_op_info info;
        if (count[order[k]] == 0 || !kn_op_get_info(order[k], &info)) break;
        printf("%s %s %lld", k ? "," : "", info.name, (long long)count[order[k]]);
    }
    printf("\n");
done:
    free(order);
    free(count);
}

/* One step: every micro-batch's forward and backward (loss / K), then the AdamW update. The
 * loss is never read and clipping is left out, since both need values. */
static kn_status trace_step(const train_options *o, const train_job *job, kn_optimizer *opt, int64_t step) {
    kn_status st = KN_OK;
    for (int j = 0; st == KN_OK && j < o->grad_accum; j++) {
        kn_scope_push();
        kn_tensor *loss = train_micro_loss(o, job, step * o->grad_accum + j);
        st = loss ? kn_backward(kn_div_scalar(loss, o->grad_accum)) : kn_last_status();
        kn_scope_pop();
    }
    kn_scope_push();
    if (st == KN_OK) st = kn_optimizer_step(opt);
    if (st == KN_OK) st = kn_optimizer_zero_grad(opt);
    if (st == KN_OK) st = kn_sync();
    kn_scope_pop();
    return st;
}

int train_trace(const train_options *o, const train_job *job, kn_optimizer *opt) {
    int64_t params = 0;
    for (int i = 0; i < job->n_params; i++) params += kn_numel(job->params[i]);
    kn_meta_trace_reset(); /* the peak starts from what is live now: the model */
    for (int64_t step = 0; step < o->steps; step++)
        if (trace_step(o, job, opt, step) != KN_OK) {
            fprintf(stderr, "kiln train %s: tracing step %lld: %s\n", job->task, (long long)step + 1, kn_last_error());
            return 1;
        }
    kn_meta_trace trace;
    kn_meta_trace_get(&trace);
    char flops[32], per_step[32], peak[32];
    with_unit(flops, sizeof flops, trace.flops, 1000, "FLOP");
    with_unit(per_step, sizeof per_step, trace.flops / (double)o->steps, 1000, "FLOP");
    with_unit(peak, sizeof peak, (double)trace.peak_bytes, 1024, "B");
    /* The summary goes to stdout: it is the result of the run. */
    printf("meta trace of kiln train %s: %lld step%s of %d micro-batch%s of %lld; %lld parameters\n", job->task,
           (long long)o->steps, o->steps == 1 ? "" : "s", o->grad_accum, o->grad_accum == 1 ? "" : "es",
           (long long)o->batch, (long long)params);
    printf("  %lld ops, %s (%s per step), peak %s of tensors (parameters, gradients, AdamW state, activations)\n",
           (long long)trace.ops, flops, per_step, peak);
    printf("  nothing was allocated, read or written%s\n",
           o->grad_clip > 0 ? "; gradient clipping is left out (it reads the norm's value)" : "");
    print_top_ops(8);
    fflush(stdout);
    return 0;
}
