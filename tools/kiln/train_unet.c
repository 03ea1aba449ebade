/* `kiln train unet`: a small DDPM UNet (models/unet) learns to generate synthetic 16x16 RGB
 * images of discs and squares that kiln draws itself (models/unet/shapes.h): every training
 * image is new, drawn from the seed and its position in the run. Writes to the samples
 * directory the training images (data.png), the loss curve (loss.csv) and, at the end, a grid
 * of images made by DDPM ancestral sampling from pure noise (samples.png). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "png/png_image.h"
#include "train_init.h"
#include "train_loop.h"
#include "train_tasks.h"
#include "unet/ddpm.h"
#include "unet/shapes.h"

#define SIZE 16
#define CHANNELS 3
#define DIFFUSION_STEPS 100
#define DATA_GRID 8 /* data.png: DATA_GRID x DATA_GRID training images */

typedef struct unet_task {
    unet *model;
    ddpm_schedule schedule;
    int64_t batch;
    uint64_t seed;
    const char *dir;
    double *losses;
    int64_t steps, n_samples;
} unet_task;

/* Images first .. first + n of the run's stream, as [n, C, SIZE, SIZE] on the host. */
static float *render(uint64_t seed, int64_t first, int64_t n) {
    float *px = malloc(sizeof *px * (size_t)(n * CHANNELS * SIZE * SIZE));
    for (int64_t i = 0; px && i < n; i++) shapes_render(seed, (uint64_t)(first + i), SIZE, CHANNELS, px + i * CHANNELS * SIZE * SIZE);
    return px;
}

static kn_tensor *micro_loss(void *ctx, int64_t g) {
    unet_task *t = ctx;
    int64_t B = t->batch;
    float *px = render(t->seed, g * B, B);
    int *steps = malloc(sizeof *steps * (size_t)B);
    kn_tensor *loss = NULL;
    if (px && steps) {
        for (int64_t b = 0; b < B; b++) steps[b] = (int)(kn_mix64(t->seed ^ kn_mix64((uint64_t)(g * B + b))) % DIFFUSION_STEPS);
        kn_tensor *x0 = kn_from_host(px, KN_F32, KN_SHAPE(B, CHANNELS, SIZE, SIZE), kn_default_device());
        loss = ddpm_loss(t->model, &t->schedule, x0, steps);
    } else {
        kn_set_error(KN_ERR_OOM, "unet: out of host memory");
    }
    free(px);
    free(steps);
    return loss;
}

static kn_status write_path(char *buf, size_t n, const char *dir, const char *name) {
    if ((size_t)snprintf(buf, n, "%s/%s", dir, name) >= n) return kn_set_error(KN_ERR_ARG, "unet: path %s/%s is too long", dir, name);
    return KN_OK;
}

/* The directory exists (made if needed) and takes files: data.png is written into it. */
static kn_status prepare_dir(const unet_task *t) {
    if (mkdir(t->dir, 0777) != 0 && errno != EEXIST)
        return kn_set_error(KN_ERR_IO, "cannot create the samples directory %s: %s", t->dir, strerror(errno));
    char path[4096];
    float *px = render(t->seed, 0, DATA_GRID * DATA_GRID);
    kn_status st = px ? write_path(path, sizeof path, t->dir, "data.png") : kn_set_error(KN_ERR_OOM, "unet: out of host memory");
    if (st == KN_OK) st = png_write_grid(path, px, DATA_GRID * DATA_GRID, CHANNELS, SIZE, SIZE, DATA_GRID, -1, 1);
    free(px);
    return st;
}

static kn_status write_loss_curve(const unet_task *t) {
    char path[4096], *text = malloc((size_t)t->steps * 32 + 16);
    if (!text) return kn_set_error(KN_ERR_OOM, "unet: out of host memory");
    size_t len = (size_t)sprintf(text, "step,loss\n");
    for (int64_t s = 0; s < t->steps; s++)
        if (!isnan(t->losses[s])) len += (size_t)sprintf(text + len, "%lld,%.6f\n", (long long)s + 1, t->losses[s]);
    kn_status st = write_path(path, sizeof path, t->dir, "loss.csv");
    if (st == KN_OK) st = kn_write_file_atomic(path, text, len);
    free(text);
    return st;
}

/* A resumed run lacks the losses of the steps before its checkpoint: those of them that the
 * directory's loss.csv holds (a finished run's, when its end-of-run work is redone) are kept. */
static void recall_losses(const unet_task *t) {
    char path[4096], line[128];
    FILE *f = write_path(path, sizeof path, t->dir, "loss.csv") == KN_OK ? fopen(path, "r") : NULL;
    while (f && fgets(line, sizeof line, f)) {
        long long step;
        double loss;
        if (sscanf(line, "%lld,%lf", &step, &loss) == 2 && step >= 1 && step <= t->steps && isnan(t->losses[step - 1]))
            t->losses[step - 1] = loss;
    }
    if (f) fclose(f);
}

/* Mean loss over steps [from, to) that have one (a resumed run may lack the earlier ones). */
static double mean_loss(const unet_task *t, int64_t from, int64_t to) {
    double sum = 0;
    int64_t n = 0;
    for (int64_t s = from; s < to; s++)
        if (!isnan(t->losses[s])) sum += t->losses[s], n++;
    return n ? sum / (double)n : NAN;
}

static kn_status finish(unet_task *t) {
    recall_losses(t);
    int64_t tenth = t->steps >= 10 ? t->steps / 10 : 1;
    printf("loss (mean of each tenth of the run):");
    for (int64_t s = 0; s < t->steps; s += tenth) printf(" %.4f", mean_loss(t, s, s + tenth < t->steps ? s + tenth : t->steps));
    printf("\n");
    kn_status st = write_loss_curve(t);
    int64_t n = t->n_samples, cols = 1;
    while (cols * cols < n) cols++;
    size_t bytes = sizeof(float) * (size_t)(n * CHANNELS * SIZE * SIZE);
    kn_tensor *samples = st == KN_OK ? ddpm_sample(t->model, &t->schedule, KN_SHAPE(n, CHANNELS, SIZE, SIZE)) : NULL;
    float *px = malloc(bytes);
    char path[4096];
    if (st == KN_OK) st = samples ? KN_OK : kn_last_status();
    if (st == KN_OK) st = px ? kn_to_host(samples, px, bytes) : kn_set_error(KN_ERR_OOM, "unet: out of host memory");
    if (st == KN_OK) st = write_path(path, sizeof path, t->dir, "samples.png");
    if (st == KN_OK) st = png_write_grid(path, px, (int)n, CHANNELS, SIZE, SIZE, (int)cols, -1, 1);
    if (st == KN_OK)
        printf("wrote %s/samples.png (%lld images sampled in %d DDPM steps), %s/data.png (training images), %s/loss.csv\n",
               t->dir, (long long)n, DIFFUSION_STEPS, t->dir, t->dir);
    kn_release(samples);
    free(px);
    return st;
}

static kn_status after_step(void *ctx, int64_t steps_done, bool last) {
    return last ? finish(ctx) : KN_OK;
}

void train_unet_defaults(train_options *o) {
    o->batch = 32;
    o->steps = 800;
    o->lr = 2e-3;
    o->min_lr = 1e-4;
    o->warmup = 40;
    o->weight_decay = 0;
    o->grad_clip = 1.0;
    o->beta2 = 0.999;
    o->samples_dir = "unet-samples";
    o->num_samples = 64;
}

int train_unet_run(const train_options *o) {
    if (o->num_samples < 1 || o->num_samples > 1024) {
        fprintf(stderr, "kiln train unet: --num-samples must be in [1, 1024]\n");
        return 2;
    }
    unet_task t = {.batch = o->batch, .seed = o->seed, .dir = o->samples_dir, .steps = o->steps, .n_samples = o->num_samples};
    unet_config cfg = {.in_channels = CHANNELS, .base_channels = 16, .n_levels = 3, .mult = {1, 2, 2}, .groups = 8,
                       .attention = true};
    kn_named_tensors params = {0};
    int rc = 1;
    t.losses = malloc(sizeof *t.losses * (size_t)(o->steps ? o->steps : 1));
    for (int64_t s = 0; t.losses && s < o->steps; s++) t.losses[s] = NAN;
    /* iDDPM's rescaling of DDPM's 1000-step linear schedule (1e-4 .. 0.02) to fewer steps. */
    double scale = 1000.0 / DIFFUSION_STEPS;
    if (!t.losses || ddpm_schedule_linear(&t.schedule, DIFFUSION_STEPS, 1e-4 * scale, 0.02 * scale) != KN_OK ||
        !(t.model = unet_new(&cfg)) || (o->init_path && train_init_module(t.model, o->init_path, "unet") != KN_OK) ||
        (!o->trace && prepare_dir(&t) != KN_OK) || kn_module_named(t.model, KN_PARAMS, &params) != KN_OK) {
        fprintf(stderr, "kiln train unet: %s\n", kn_last_status() ? kn_last_error() : "out of host memory");
        goto done;
    }
    if (!o->quiet)
        fprintf(stderr, "unet: %lld parameters; DDPM (%d steps) on %dx%d RGB discs and squares; samples in %s\n",
                (long long)kn_module_num_params(t.model), DIFFUSION_STEPS, SIZE, SIZE, o->trace ? "none (a trace)" : t.dir);
    train_job job = {.task = "unet", .ctx = &t, .n_params = params.count, .names = params.names, .params = params.tensors,
                     .micro_loss = micro_loss, .tokens_per_micro = o->batch, .after_step = after_step,
                     .losses = t.losses};
    rc = train_run(o, &job, NULL);
done:
    kn_named_tensors_free(&params);
    kn_module_free(t.model);
    ddpm_schedule_free(&t.schedule);
    free(t.losses);
    return rc;
}
