/* `kiln train resnet18` and `kiln train resnet50`: torchvision's ResNet learns the synthetic
 * shapes of synthetic_images.h. Images 0 .. --eval-count-1 of the seed are held out; each
 * training image is drawn from the rest by a hash of (seed, micro-batch, row), so a resumed
 * run reads the same data. Accuracy is top-1 on the held-out images in eval mode (running
 * statistics). With --save, the final weights are also written as DIR/resnetNN.safetensors,
 * a full torchvision state_dict (buffers included) that torchvision's resnetNN(num_classes=10)
 * loads. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "resnet/resnet.h"
#include "synthetic_images.h"
#include "train_loop.h"
#include "train_tasks.h"

#define EVAL_BATCH 100

typedef struct resnet_task {
    resnet *model;
    int depth, size;
    int64_t batch, n_eval, eval_every;
    uint64_t seed;
    const char *save_dir;
    bool quiet;
    struct timespec start;
} resnet_task;

/* Images index[0..n) as a [n, 3, size, size] batch and their labels [n]. */
static kn_status make_batch(const resnet_task *t, const uint64_t *index, int64_t n, kn_tensor **x, kn_tensor **y) {
    int64_t plane = 3 * (int64_t)t->size * t->size;
    float *pixels = malloc(sizeof *pixels * (size_t)(n * plane));
    int64_t *labels = malloc(sizeof *labels * (size_t)n);
    if (pixels && labels)
        for (int64_t i = 0; i < n; i++) labels[i] = synthetic_image(t->seed, index[i], t->size, pixels + i * plane);
    *x = pixels && labels ? kn_from_host(pixels, KN_F32, KN_SHAPE(n, 3, t->size, t->size), kn_default_device()) : NULL;
    *y = *x ? kn_from_host(labels, KN_I64, KN_SHAPE(n), kn_default_device()) : NULL;
    free(pixels);
    free(labels);
    if (!pixels || !labels) return kn_set_error(KN_ERR_OOM, "resnet: out of host memory for a batch");
    return *y ? KN_OK : kn_last_status();
}

static kn_tensor *micro_loss(void *ctx, int64_t g) {
    resnet_task *t = ctx;
    uint64_t *index = malloc(sizeof *index * (size_t)t->batch);
    if (!index) return kn_set_error(KN_ERR_OOM, "resnet: out of host memory"), NULL;
    for (int64_t r = 0; r < t->batch; r++) /* any image past the held-out ones */
        index[r] = (uint64_t)t->n_eval + (kn_mix64(t->seed ^ kn_mix64((uint64_t)g * 1000003u + (uint64_t)r)) >> 1);
    kn_tensor *x, *y;
    kn_status st = make_batch(t, index, t->batch, &x, &y);
    free(index);
    return st == KN_OK ? resnet_loss(t->model, x, y) : NULL;
}

/* Top-1 accuracy on the held-out images, in eval mode. */
static kn_status evaluate(resnet_task *t, double *accuracy) {
    int64_t right = 0;
    kn_status st = KN_OK;
    kn_module_train(t->model, false);
    kn_no_grad_push();
    for (int64_t first = 0; st == KN_OK && first < t->n_eval; first += EVAL_BATCH) {
        int64_t n = t->n_eval - first < EVAL_BATCH ? t->n_eval - first : EVAL_BATCH;
        uint64_t index[EVAL_BATCH];
        int64_t want[EVAL_BATCH], got[EVAL_BATCH];
        for (int64_t i = 0; i < n; i++) index[i] = (uint64_t)(first + i);
        kn_scope_push();
        kn_tensor *x, *y;
        st = make_batch(t, index, n, &x, &y);
        if (st == KN_OK) st = kn_to_host(y, want, sizeof *want * (size_t)n);
        kn_tensor *pred = st == KN_OK ? kn_argmax(resnet_forward(t->model, x), 1, false) : NULL;
        if (st == KN_OK) st = pred ? kn_to_host(pred, got, sizeof *got * (size_t)n) : kn_last_status();
        for (int64_t i = 0; st == KN_OK && i < n; i++) right += got[i] == want[i];
        kn_scope_pop();
    }
    kn_no_grad_pop();
    kn_module_train(t->model, true);
    *accuracy = t->n_eval ? (double)right / (double)t->n_eval : 0;
    return st;
}

static double seconds_since(const struct timespec *start) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - start->tv_sec) + (double)(now.tv_nsec - start->tv_nsec) / 1e9;
}

static kn_status after_step(void *ctx, int64_t steps_done, bool last) {
    resnet_task *t = ctx;
    if (!last && (!t->eval_every || steps_done % t->eval_every)) return KN_OK;
    double accuracy;
    kn_status st = evaluate(t, &accuracy);
    if (st != KN_OK) return st;
    if (last) {
        printf("held-out accuracy %.4f (%lld images, %d classes) after %lld steps in %.1f s\n", accuracy,
               (long long)t->n_eval, SYNTHETIC_CLASSES, (long long)steps_done, seconds_since(&t->start));
        fflush(stdout);
    } else if (!t->quiet) {
        fprintf(stderr, "\n  held-out accuracy after %lld steps: %.4f\n", (long long)steps_done, accuracy);
    }
    if (last && t->save_dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/resnet%d.safetensors", t->save_dir, t->depth);
        st = resnet_save(t->model, path);
        if (st == KN_OK && !t->quiet) fprintf(stderr, "wrote %s (torchvision state_dict)\n", path);
    }
    return st;
}

static void defaults(train_options *o, double lr, int64_t steps) {
    o->batch = 32;
    o->steps = steps;
    o->lr = lr;
    o->min_lr = 1e-4;
    o->warmup = 10;
    o->beta2 = 0.999;
    o->weight_decay = 5e-4;
    o->grad_clip = 0;
    o->eval_count = 500;
    o->image_size = 32;
}

void train_resnet18_defaults(train_options *o) { defaults(o, 2e-3, 200); }
void train_resnet50_defaults(train_options *o) { defaults(o, 1e-3, 150); }

static int run(const train_options *o, int depth) {
    const char *bad = o->image_size < 32 ? "--image-size must be at least 32"
                      : o->eval_count < 1 ? "--eval-count must be at least 1"
                      : NULL;
    if (bad) {
        fprintf(stderr, "kiln train resnet%d: %s\n", depth, bad);
        return 2;
    }
    resnet_task t = {.depth = depth, .size = o->image_size, .batch = o->batch, .n_eval = o->eval_count,
                     .eval_every = o->eval_every, .seed = o->seed, .save_dir = o->save_dir, .quiet = o->quiet};
    clock_gettime(CLOCK_MONOTONIC, &t.start);
    t.model = resnet_new(depth, SYNTHETIC_CLASSES, KN_F32);
    kn_named_tensors params = {0};
    int rc = 1;
    if (!t.model || (o->init_path && resnet_load(t.model, o->init_path) != KN_OK) ||
        kn_module_named(t.model, KN_PARAMS, &params) != KN_OK) {
        fprintf(stderr, "kiln train resnet%d: %s\n", depth, kn_last_error());
    } else {
        if (!o->quiet)
            fprintf(stderr,
                    "resnet%d: %.2fM parameters; learns %d synthetic shapes from %dx%d RGB images; %lld held out\n",
                    depth, (double)kn_module_num_params(t.model) / 1e6, SYNTHETIC_CLASSES, t.size, t.size,
                    (long long)t.n_eval);
        char name[16];
        snprintf(name, sizeof name, "resnet%d", depth);
        train_job job = {.task = name, .ctx = &t, .n_params = params.count, .names = params.names,
                         .params = params.tensors, .micro_loss = micro_loss, .tokens_per_micro = o->batch,
                         .after_step = after_step};
        rc = train_run(o, &job, NULL);
    }
    kn_named_tensors_free(&params);
    resnet_free(t.model);
    return rc;
}

int train_resnet18_run(const train_options *o) { return run(o, 18); }
int train_resnet50_run(const train_options *o) { return run(o, 50); }
