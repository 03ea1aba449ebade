/* The batch loader: hands out batches as int64 tensors, with an optional thread that makes
 * the next batch's host arrays while the trainer computes.
 *
 * Prefetch protocol (all under mu): `want` is the batch the thread should make (-1: none),
 * `ready` the batch the arrays hold complete (-1: none, or being overwritten). The thread
 * makes `want` whenever it differs from `ready`; next() waits for ready == position, copies
 * the arrays into tensors and asks for position + 1; seek() only changes `want`, so a batch
 * the thread was making for an old `want` is simply not the one next() waits for. One set of
 * arrays suffices because next() copies them out before it asks for more. A batch the thread
 * could not read (the file shrank) is ready with its error, which next() reports. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/token_batch.h"
#include "kiln/data.h"

struct kn_token_loader {
    kn_token_file *file;
    kn_batch_rule rule;       /* used by the thread alone while prefetching */
    int64_t position;         /* the next batch to hand out; only the caller's thread changes it */
    int64_t *inputs, *targets; /* [B, T] host arrays of one batch */
    bool prefetch;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int64_t want, ready;
    kn_status ready_status; /* the ready batch's: KN_OK, or the error kept in ready_error */
    char ready_error[512];
    bool stop;
};

static void *prefetch_main(void *arg) {
    kn_token_loader *l = arg;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->stop && (l->want < 0 || l->want == l->ready)) pthread_cond_wait(&l->cv, &l->mu);
        if (l->stop) break;
        int64_t i = l->want;
        l->ready = -1;
        pthread_mutex_unlock(&l->mu);
        kn_status st = kn_batch_fill(&l->rule, i, l->inputs, l->targets);
        pthread_mutex_lock(&l->mu);
        l->ready = i;
        l->ready_status = st;
        if (st != KN_OK) snprintf(l->ready_error, sizeof l->ready_error, "%s", kn_last_error());
        pthread_cond_broadcast(&l->cv);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

static kn_status check_options(const char *path, const kn_token_loader_options *o) {
    if (!path || !o) return kn_error(KN_ERR_NULL, "token loader: NULL path or options");
    if (o->B <= 0 || o->T <= 0)
        return kn_error(KN_ERR_ARG, "token loader %s: B = %lld and T = %lld must both be positive", path,
                        (long long)o->B, (long long)o->T);
    /* Two [B, T] int64 arrays must be addressable, and every offset below fits in int64. */
    if (o->B > INT64_MAX / 16 / o->T)
        return kn_error(KN_ERR_ARG, "token loader %s: B * T = %lld * %lld is too large", path, (long long)o->B,
                        (long long)o->T);
    return KN_OK;
}

kn_token_loader *kn_token_loader_open(const char *path, const kn_token_loader_options *opt) {
    if (check_options(path, opt) != KN_OK) return NULL;
    kn_token_loader *l = calloc(1, sizeof *l);
    if (!l) return kn_error_null(KN_ERR_OOM, "token loader %s: out of host memory", path);
    size_t bytes = sizeof(int64_t) * (size_t)(opt->B * opt->T);
    l->file = kn_token_file_open(path, opt->format, opt->vocab_size);
    kn_status s = l->file ? kn_batch_rule_init(&l->rule, l->file, path, opt->B, opt->T, opt->shuffle, opt->seed)
                          : kn_last_status();
    if (s == KN_OK && (!(l->inputs = malloc(bytes)) || !(l->targets = malloc(bytes))))
        s = kn_error(KN_ERR_OOM, "token loader %s: out of host memory for a [%lld, %lld] batch", path,
                     (long long)opt->B, (long long)opt->T);
    if (s == KN_OK && opt->prefetch) {
        pthread_mutex_init(&l->mu, NULL);
        pthread_cond_init(&l->cv, NULL);
        l->ready = -1; /* want = position = 0: the thread starts on the first batch at once */
        int err = pthread_create(&l->thread, NULL, prefetch_main, l);
        if (err) {
            pthread_cond_destroy(&l->cv);
            pthread_mutex_destroy(&l->mu);
            s = kn_error(KN_ERR_OOM, "token loader %s: cannot start the prefetch thread (%s)", path, strerror(err));
        } else {
            l->prefetch = true;
        }
    }
    if (s != KN_OK) {
        kn_token_loader_close(l);
        return NULL;
    }
    return l;
}

void kn_token_loader_close(kn_token_loader *l) {
    if (!l) return;
    if (l->prefetch) {
        pthread_mutex_lock(&l->mu);
        l->stop = true;
        pthread_cond_broadcast(&l->cv);
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->thread, NULL);
        pthread_cond_destroy(&l->cv);
        pthread_mutex_destroy(&l->mu);
    }
    kn_batch_rule_free(&l->rule);
    kn_token_file_close(l->file);
    free(l->inputs);
    free(l->targets);
    free(l);
}

/* Copies the arrays into two new tensors (kn_from_host stages the bytes, so the arrays may be
 * overwritten as soon as it returns). */
static kn_status hand_out(kn_token_loader *l, kn_tensor **inputs, kn_tensor **targets) {
    kn_shape shape = KN_SHAPE(l->rule.B, l->rule.T);
    kn_tensor *x = kn_from_host(l->inputs, KN_I64, shape, KN_CPU);
    kn_tensor *y = x ? kn_from_host(l->targets, KN_I64, shape, KN_CPU) : NULL;
    if (!y) {
        kn_release(x);
        return kn_last_status();
    }
    *inputs = x;
    *targets = y;
    return KN_OK;
}

kn_status kn_token_loader_next(kn_token_loader *l, kn_tensor **inputs, kn_tensor **targets) {
    if (!l || !inputs || !targets) return kn_error(KN_ERR_NULL, "token loader next: NULL loader or output");
    *inputs = *targets = NULL;
    int64_t i = l->position;
    if (i > l->rule.last_batch)
        return kn_error(KN_ERR_INDEX, "token loader: batch %lld is past the last one (%lld) whose token offsets fit "
                        "in int64", (long long)i, (long long)l->rule.last_batch);
    if (!l->prefetch) {
        kn_status s = kn_batch_fill(&l->rule, i, l->inputs, l->targets);
        if (s == KN_OK) s = hand_out(l, inputs, targets);
        if (s == KN_OK) l->position++;
        return s;
    }
    pthread_mutex_lock(&l->mu);
    while (l->ready != i) pthread_cond_wait(&l->cv, &l->mu);
    kn_status s = l->ready_status != KN_OK ? kn_error(l->ready_status, "%s", l->ready_error) : hand_out(l, inputs, targets);
    if (s == KN_OK) {
        l->position++;
        l->want = i < l->rule.last_batch ? i + 1 : -1;
        pthread_cond_broadcast(&l->cv);
    }
    pthread_mutex_unlock(&l->mu);
    return s;
}

int64_t kn_token_loader_position(const kn_token_loader *l) { return l ? l->position : 0; }

kn_status kn_token_loader_seek(kn_token_loader *l, int64_t batch_index) {
    if (!l) return kn_error(KN_ERR_NULL, "token loader seek: NULL loader");
    if (batch_index < 0 || batch_index > l->rule.last_batch)
        return kn_error(KN_ERR_INDEX, "token loader seek: batch %lld is outside [0, %lld]", (long long)batch_index,
                        (long long)l->rule.last_batch);
    l->position = batch_index;
    if (l->prefetch) {
        pthread_mutex_lock(&l->mu);
        l->want = batch_index;
        pthread_cond_broadcast(&l->cv);
        pthread_mutex_unlock(&l->mu);
    }
    return KN_OK;
}

int64_t kn_token_loader_num_tokens(const kn_token_loader *l) { return l ? kn_token_file_count(l->file) : 0; }
