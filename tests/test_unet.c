/* The DDPM UNet (models/unet): module names and output shapes, bad inputs, the forward pass,
 * loss and every gradient against PyTorch's (tests/fixtures/unet, make_unet_fixture.py), the sinusoidal
 * timestep embedding and the linear noise schedule against their formulas, the noising step,
 * the PNG writer (read back with libpng, pixel for pixel; errors leave no file), ancestral
 * sampling, and a short training run whose loss falls. */
#define _GNU_SOURCE
#include <dirent.h>
#include <png.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "png/png_image.h"
#include "unet/ddpm.h"
#include "unet/shapes.h"

static unet_config tiny_config(void) {
    return (unet_config){.in_channels = 3, .base_channels = 8, .n_levels = 2, .mult = {1, 2}, .groups = 4, .attention = true};
}

static void test_names_and_shapes(void) {
    kn_manual_seed(test_seed());
    kn_scope_push();
    unet_config c = tiny_config();
    unet *m = unet_new(&c);
    CHECK(m != NULL);
    if (!m) return kn_scope_pop();
    const char *names[] = {"time_embed.0.weight", "time_embed.2.bias", "conv_in.weight", "down.0.res.conv1.weight",
                           "down.0.downsample.weight", "down.1.res.conv_shortcut.weight", "mid.res_1.time_emb_proj.weight",
                           "mid.attn.qkv.weight", "mid.attn.proj_out.bias", "up.1.res.norm2.weight", "up.1.upsample.weight",
                           "up.0.res.conv_shortcut.weight", "norm_out.weight", "conv_out.weight"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) CHECK_MSG(kn_module_get(m, names[i]) != NULL, "no %s", names[i]);
    CHECK_SHAPE(kn_module_get(m, "up.0.res.conv1.weight"), KN_SHAPE(8, 16 + 8, 3, 3)); /* [h from below, skip] */
    CHECK_SHAPE(kn_module_get(m, "time_embed.2.weight"), KN_SHAPE(32, 32));
    kn_tensor *x = kn_randn(KN_SHAPE(2, 3, 8, 8), KN_F32);
    float steps[2] = {3, 250};
    kn_tensor *t = kn_from_host(steps, KN_F32, KN_SHAPE(2), KN_CPU);
    /* conv_out starts at zero (DDPM's init): the untrained model predicts no noise. */
    double *y = read_f64(unet_forward(m, x, t));
    bool zero = y != NULL;
    for (int i = 0; y && i < 2 * 3 * 8 * 8; i++) zero &= y[i] == 0;
    CHECK(zero);
    free(y);
    CHECK(kn_init_normal_(m->conv_out->weight, 0, 0.1) == KN_OK);
    kn_tensor *out = unet_forward(m, x, t);
    CHECK_SHAPE(out, KN_SHAPE(2, 3, 8, 8));
    double *v = read_f64(out), norm = 0;
    for (int i = 0; v && i < 2 * 3 * 8 * 8; i++) norm += v[i] * v[i];
    CHECK(v && all_finite(v, 2 * 3 * 8 * 8) && norm > 0);
    free(v);
    CHECK_ERROR(unet_forward(m, kn_randn(KN_SHAPE(2, 3, 7, 8), KN_F32), t) != NULL, KN_ERR_SHAPE, "multiples of 2");
    CHECK_ERROR(unet_forward(m, kn_randn(KN_SHAPE(2, 1, 8, 8), KN_F32), t) != NULL, KN_ERR_SHAPE, "[B, 3, H, W]");
    kn_module_free(m);
    c.groups = 3;
    CHECK_ERROR(unet_new(&c) != NULL, KN_ERR_ARG, "groups");
    kn_scope_pop();
}

#define FIXTURE KILN_SOURCE_DIR "/tests/fixtures/unet/unet.safetensors"

static void test_matches_pytorch_forward_and_gradients(void) {
    kn_scope_push();
    unet_config c = tiny_config();
    unet *m = unet_new(&c);
    kn_named_tensors p = {0};
    kn_safetensors *f = kn_safetensors_open(FIXTURE);
    CHECK(m && f && kn_module_named(m, KN_PARAMS, &p) == KN_OK);
    if (!m || !f) goto done;
    CHECK(p.count == kn_safetensors_count(f) - 5 - p.count); /* weights, 5 inputs/expectations, grads */
    kn_no_grad_push(); /* every parameter under its own name, and nothing left over */
    CHECK(kn_safetensors_load_into(FIXTURE, p.count, (const char *const *)p.names, p.tensors, 0) == KN_OK);
    kn_no_grad_pop();
    kn_tensor *out = unet_forward(m, kn_safetensors_get(f, "input.x", KN_CPU), kn_safetensors_get(f, "input.t", KN_CPU));
    double *want = read_f64(kn_safetensors_get(f, "expected.out", KN_CPU));
    if (want) CHECK_CLOSE(out, want, ((tolerance){1e-4, 1e-5}), "predicted noise");
    free(want);
    kn_tensor *loss = kn_mse_loss(out, kn_safetensors_get(f, "input.target", KN_CPU), KN_REDUCTION_MEAN);
    want = read_f64(kn_safetensors_get(f, "expected.loss", KN_CPU));
    if (want) CHECK_CLOSE(loss, want, ((tolerance){1e-5, 1e-6}), "loss");
    free(want);
    CHECK(kn_backward(loss) == KN_OK);
    check_fixture_grads(f, &p, (tolerance){1e-3, 1e-5});
done:
    kn_safetensors_close(f);
    kn_named_tensors_free(&p);
    kn_module_free(m);
    kn_scope_pop();
}

static void test_timestep_embedding_matches_formula(void) {
    kn_scope_push();
    float steps[4] = {0, 1, 17, 999};
    enum { DIM = 16, HALF = DIM / 2 };
    kn_tensor *e = unet_timestep_embedding(kn_from_host(steps, KN_F32, KN_SHAPE(4), KN_CPU), DIM);
    CHECK_SHAPE(e, KN_SHAPE(4, DIM));
    double want[4 * DIM];
    for (int b = 0; b < 4; b++)
        for (int i = 0; i < HALF; i++) {
            double f = exp(-log(10000.0) * i / (HALF - 1));
            want[b * DIM + i] = sin(steps[b] * f);
            want[b * DIM + HALF + i] = cos(steps[b] * f);
        }
    /* f32 arguments up to 999 rad carry an absolute error of about 999 * 2^-24. */
    CHECK_CLOSE(e, want, ((tolerance){0, 2e-4}), "timestep embedding");
    CHECK_ERROR(unet_timestep_embedding(kn_from_host(steps, KN_F32, KN_SHAPE(4), KN_CPU), 7) != NULL, KN_ERR_ARG, "even");
    kn_scope_pop();
}

static void test_linear_schedule_and_noising(void) {
    ddpm_schedule s;
    CHECK(ddpm_schedule_linear(&s, 1000, 1e-4, 0.02) == KN_OK);
    CHECK(s.beta[0] == 1e-4 && fabs(s.beta[999] - 0.02) < 1e-15);
    CHECK(fabs(s.beta[500] - (1e-4 + 0.0199 * 500 / 999)) < 1e-15);
    double log_prod = 0;
    for (int t = 0; t < 1000; t++) log_prod += log1p(-(1e-4 + 0.0199 * t / 999));
    CHECK(fabs(s.alpha_bar[999] - exp(log_prod)) < 1e-12 * exp(log_prod) + 1e-15);
    CHECK(fabs(s.alpha_bar[999] - 4.036e-5) < 1e-7); /* DDPM's schedule leaves almost no signal at T */
    CHECK(fabs(s.alpha_bar[0] - (1 - 1e-4)) < 1e-15);
    kn_scope_push();
    double x0v[2] = {0.5, -1}, nv[2] = {1, 2};
    kn_tensor *x0 = tensor_from(x0v, KN_SHAPE(2, 1, 1, 1), KN_F32), *noise = tensor_from(nv, KN_SHAPE(2, 1, 1, 1), KN_F32);
    int t[2] = {0, 999};
    double want[2];
    for (int b = 0; b < 2; b++) want[b] = sqrt(s.alpha_bar[t[b]]) * x0v[b] + sqrt(1 - s.alpha_bar[t[b]]) * nv[b];
    CHECK_CLOSE(ddpm_add_noise(&s, x0, noise, t), want, tol_for(KN_F32), "x_t");
    int bad[2] = {0, 1000};
    CHECK_ERROR(ddpm_add_noise(&s, x0, noise, bad) != NULL, KN_ERR_INDEX, "step 1000");
    kn_scope_pop();
    ddpm_schedule_free(&s);
    CHECK_ERROR(ddpm_schedule_linear(&s, 1, 1e-4, 0.02) == KN_OK, KN_ERR_ARG, "at least 2");
    CHECK_ERROR(ddpm_schedule_linear(&s, 10, 1e-4, 1.5) == KN_OK, KN_ERR_ARG, "(0, 1)");
}

/* Reads a PNG with libpng's simplified API as 8-bit pixels of `format`; NULL on failure. */
static uint8_t *read_png(const char *path, png_uint_32 format, int *w, int *h) {
    png_image img = {.version = PNG_IMAGE_VERSION};
    if (!png_image_begin_read_from_file(&img, path)) return NULL;
    img.format = format;
    uint8_t *px = malloc(PNG_IMAGE_SIZE(img));
    if (px && !png_image_finish_read(&img, NULL, px, 0, NULL)) {
        free(px);
        px = NULL;
    }
    *w = (int)img.width, *h = (int)img.height;
    png_image_free(&img);
    return px;
}

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

static void test_png_written_and_read_back(void) {
    char dir[] = "/tmp/kiln_test_png_XXXXXX", path[256];
    CHECK(mkdtemp(dir) != NULL);
    /* Two RGB images 2x3 (planar, in [-1, 1]) in a grid of 2 columns. */
    float images[2 * 3 * 2 * 3];
    for (int i = 0; i < 36; i++) images[i] = -1 + 2.0f * (float)((i * 7) % 18) / 17;
    images[0] = -5, images[1] = 5; /* clamped */
    snprintf(path, sizeof path, "%s/grid.png", dir);
    CHECK(png_write_grid(path, images, 2, 3, 2, 3, 2, -1, 1) == KN_OK);
    int w = 0, h = 0;
    uint8_t *px = read_png(path, PNG_FORMAT_RGB, &w, &h);
    CHECK(px && w == 2 * 4 + 1 && h == 2 + 2);
    bool same = px != NULL;
    for (int y = 0; px && y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++) {
                int want = 128, img = x >= 5 ? 1 : 0, ix = x - 1 - 4 * img, iy = y - 1;
                if (ix >= 0 && ix < 3 && iy >= 0 && iy < 2) {
                    float v = images[((img * 3 + c) * 2 + iy) * 3 + ix], u = (v + 1) / 2;
                    want = (int)lrintf((u < 0 ? 0 : u > 1 ? 1 : u) * 255);
                }
                same &= px[(y * w + x) * 3 + c] == want;
            }
    CHECK(same);
    free(px);
    uint8_t gray[6] = {0, 50, 100, 150, 200, 255};
    snprintf(path, sizeof path, "%s/gray.png", dir);
    CHECK(png_write(path, gray, 3, 2, 1) == KN_OK);
    px = read_png(path, PNG_FORMAT_GRAY, &w, &h);
    CHECK(px && w == 3 && h == 2 && memcmp(px, gray, 6) == 0);
    free(px);
    /* Errors name the file and leave nothing behind. */
    snprintf(path, sizeof path, "%s/missing/x.png", dir);
    CHECK_ERROR(png_write(path, gray, 3, 2, 1) == KN_OK, KN_ERR_IO, "missing/x.png");
    CHECK_ERROR(png_write(path, gray, 3, 2, 2) == KN_OK, KN_ERR_ARG, "2 channels");
    CHECK(count_entries(dir) == 2);
    snprintf(path, sizeof path, "%s/grid.png", dir), unlink(path);
    snprintf(path, sizeof path, "%s/gray.png", dir), unlink(path);
    rmdir(dir);
}

static void test_shapes_are_deterministic_and_in_range(void) {
    float a[3 * 16 * 16], b[3 * 16 * 16], c[3 * 16 * 16];
    shapes_render(5, 42, 16, 3, a);
    shapes_render(5, 42, 16, 3, b);
    shapes_render(5, 43, 16, 3, c);
    CHECK(memcmp(a, b, sizeof a) == 0 && memcmp(a, c, sizeof a) != 0);
    int lit = 0;
    bool in_range = true;
    for (int i = 0; i < 3 * 16 * 16; i++) {
        in_range &= a[i] >= -1 && a[i] <= 1;
        lit += a[i] > -1;
    }
    CHECK(in_range && lit > 10 && lit < 3 * 16 * 16 / 2);
}

static void test_short_training_lowers_the_loss_and_samples(void) {
    kn_manual_seed(test_seed());
    unet_config c = tiny_config();
    unet *m = unet_new(&c);
    kn_named_tensors p = {0};
    ddpm_schedule s;
    CHECK(m && kn_module_named(m, KN_PARAMS, &p) == KN_OK && ddpm_schedule_linear(&s, 50, 2e-3, 0.4) == KN_OK);
    if (!m) return;
    kn_param_group g = kn_adamw_group(p.tensors, p.count, 3e-3, 0);
    kn_optimizer *opt = kn_adamw_new(&g, 1);
    enum { B = 16, STEPS = 60, WINDOW = 10 };
    double first = 0, last = 0;
    static float px[B * 3 * 8 * 8];
    for (int step = 0; step < STEPS; step++) {
        kn_scope_push();
        int t[B];
        for (int i = 0; i < B; i++) {
            shapes_render(1, (uint64_t)(step * B + i), 8, 3, px + i * 3 * 64);
            t[i] = (step * B + i) * 7 % 50;
        }
        kn_tensor *loss = ddpm_loss(m, &s, kn_from_host(px, KN_F32, KN_SHAPE(B, 3, 8, 8), KN_CPU), t);
        double v = NAN;
        CHECK(kn_backward(loss) == KN_OK && kn_item(loss, &v) == KN_OK);
        CHECK(kn_optimizer_step(opt) == KN_OK && kn_optimizer_zero_grad(opt) == KN_OK);
        if (step < WINDOW) first += v / WINDOW;
        if (step >= STEPS - WINDOW) last += v / WINDOW;
        kn_scope_pop();
    }
    CHECK_MSG(first > 0.8 && last < 0.6 * first, "mean loss %.4f over the first %d steps, %.4f over the last", first, WINDOW, last);
    kn_scope_push();
    kn_tensor *x = ddpm_sample(m, &s, KN_SHAPE(2, 3, 8, 8));
    CHECK_SHAPE(x, KN_SHAPE(2, 3, 8, 8));
    double *v = read_f64(x);
    CHECK(v && all_finite(v, 2 * 3 * 64));
    free(v);
    kn_release(x);
    kn_scope_pop();
    kn_optimizer_free(opt);
    kn_named_tensors_free(&p);
    ddpm_schedule_free(&s);
    kn_module_free(m);
}

int main(void) {
    kn_set_num_threads(1); /* tiny models: on a busy 2-core host, worker threads only spin */
    RUN(test_names_and_shapes);
    RUN(test_matches_pytorch_forward_and_gradients);
    RUN(test_timestep_embedding_matches_formula);
    RUN(test_linear_schedule_and_noising);
    RUN(test_png_written_and_read_back);
    RUN(test_shapes_are_deterministic_and_in_range);
    RUN(test_short_training_lowers_the_loss_and_samples);
    return test_summary();
}
