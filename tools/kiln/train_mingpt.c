/* `kiln train mingpt`: minGPT's character-level language model. The vocabulary is the set of
 * characters (Unicode code points, read as UTF-8) of the text file; the first 90% of the text
 * trains a GPT (models/gpt2), the rest measures the validation loss. Prints the train and
 * validation losses, then text sampled from the model with temperature. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2/gpt2.h"
#include "train_loop.h"
#include "train_tasks.h"

#define MAX_CODE_POINT 0x10FFFF
#define EVAL_BATCHES 8

typedef struct mingpt_task {
    gpt2 *model;
    int32_t *ids;       /* the text as vocabulary indices */
    int64_t n, n_train; /* characters in all; the first n_train train */
    uint32_t *vocab;    /* index -> code point, ascending */
    int vocab_size;
    int64_t batch, seq, eval_every, sample_chars;
    uint64_t seed;
    double temperature;
    bool quiet;
} mingpt_task;

/* Decodes UTF-8 into code points; false with an error naming the byte offset. */
static bool decode_utf8(const char *path, const unsigned char *s, size_t n, uint32_t *out, int64_t *count) {
    int64_t k = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        int len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1Fu : len == 3 ? c & 0x0Fu : c & 0x07u;
        bool ok = len > 0 && i + (size_t)len <= n;
        for (int j = 1; ok && j < len; j++) {
            ok = (s[i + j] & 0xC0) == 0x80;
            cp = cp << 6 | (s[i + j] & 0x3Fu);
        }
        static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (!ok || cp < min_cp[len] || cp > MAX_CODE_POINT || (cp >= 0xD800 && cp <= 0xDFFF)) {
            kn_set_error(KN_ERR_IO, "%s: not UTF-8 text (bad byte 0x%02x at offset %zu)", path, c, i);
            return false;
        }
        out[k++] = cp;
        i += (size_t)len;
    }
    *count = k;
    return true;
}

/* Reads the text, builds the vocabulary and the ids; errors name the file. */
static kn_status load_text(mingpt_task *t, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        kn_set_error(KN_ERR_IO, "cannot read the text file %s: %s", path, strerror(errno));
        return KN_ERR_IO;
    }
    unsigned char *bytes = NULL;
    size_t n = 0, cap = 0;
    bool oom = false;
    for (size_t got = 1; got > 0 && !oom;) {
        if (n == cap) {
            unsigned char *grown = realloc(bytes, cap = cap ? 2 * cap : 1 << 20);
            if (!grown) oom = true;
            else bytes = grown;
        }
        if (!oom) n += got = fread(bytes + n, 1, cap - n, f);
    }
    bool read_error = ferror(f);
    fclose(f);
    uint32_t *cps = bytes && !oom ? malloc(sizeof *cps * (n + 1)) : NULL;
    int32_t *index = cps ? malloc(sizeof *index * (MAX_CODE_POINT + 1)) : NULL;
    kn_status st = index ? KN_OK : kn_set_error(KN_ERR_OOM, "%s: out of host memory", path);
    if (st == KN_OK && read_error) st = kn_set_error(KN_ERR_IO, "%s: read error", path);
    if (st == KN_OK && !decode_utf8(path, bytes, n, cps, &t->n)) st = kn_last_status();
    if (st == KN_OK && t->n < 10 * (t->seq + 2))
        st = kn_set_error(KN_ERR_IO, "%s: %lld characters is too short for sequences of %lld (need at least %lld)", path,
                          (long long)t->n, (long long)t->seq, (long long)(10 * (t->seq + 2)));
    if (st == KN_OK) {
        memset(index, 0xff, sizeof *index * (MAX_CODE_POINT + 1));
        for (int64_t i = 0; i < t->n; i++) index[cps[i]] = 0;
        t->vocab = malloc(sizeof *t->vocab * 0x10000u);
        t->ids = malloc(sizeof *t->ids * (size_t)t->n);
        st = t->vocab && t->ids ? KN_OK : kn_set_error(KN_ERR_OOM, "%s: out of host memory", path);
        for (uint32_t cp = 0; st == KN_OK && cp <= MAX_CODE_POINT; cp++) {
            if (index[cp] < 0) continue;
            if (t->vocab_size == 0x10000) st = kn_set_error(KN_ERR_ARG, "%s: more than 65536 distinct characters", path);
            else t->vocab[index[cp] = t->vocab_size++] = cp;
        }
        for (int64_t i = 0; st == KN_OK && i < t->n; i++) t->ids[i] = index[cps[i]];
        t->n_train = t->n * 9 / 10;
    }
    free(bytes);
    free(cps);
    free(index);
    return st;
}

/* Rows of T+1 characters starting at the given offsets: inputs and next-character targets. */
static kn_tensor *window_loss(mingpt_task *t, const int64_t *starts, int64_t B) {
    int64_t T = t->seq;
    int64_t *x = malloc(sizeof *x * (size_t)(B * T)), *y = malloc(sizeof *y * (size_t)(B * T));
    kn_tensor *loss = NULL;
    if (x && y) {
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < T; i++) {
                x[b * T + i] = t->ids[starts[b] + i];
                y[b * T + i] = t->ids[starts[b] + i + 1];
            }
        kn_device dev = kn_default_device();
        loss = gpt2_loss(t->model, kn_from_host(x, KN_I64, KN_SHAPE(B, T), dev), kn_from_host(y, KN_I64, KN_SHAPE(B, T), dev));
    } else {
        kn_set_error(KN_ERR_OOM, "mingpt: out of host memory");
    }
    free(x);
    free(y);
    return loss;
}

/* Micro-batch g: windows of the training text at offsets hashed from (seed, g, row). */
static kn_tensor *micro_loss(void *ctx, int64_t g) {
    mingpt_task *t = ctx;
    int64_t starts[4096];
    for (int64_t b = 0; b < t->batch; b++)
        starts[b] = (int64_t)(kn_mix64(t->seed ^ kn_mix64((uint64_t)(g * t->batch + b))) % (uint64_t)(t->n_train - t->seq - 1));
    return window_loss(t, starts, t->batch);
}

/* Mean loss over EVAL_BATCHES fixed batches of the training or the validation text. */
static kn_status eval_loss(mingpt_task *t, bool validation, double *out) {
    int64_t first = validation ? t->n_train : 0, span = (validation ? t->n - t->n_train : t->n_train) - t->seq - 1;
    kn_status st = KN_OK;
    double sum = 0;
    for (int k = 0; st == KN_OK && k < EVAL_BATCHES; k++) {
        int64_t starts[4096];
        for (int64_t b = 0; b < t->batch; b++)
            starts[b] = first + (int64_t)(kn_mix64(0xe7a1u + (uint64_t)(k * t->batch + b)) % (uint64_t)span);
        kn_scope_push();
        double v = NAN;
        kn_tensor *loss = window_loss(t, starts, t->batch);
        st = loss ? kn_item(loss, &v) : kn_last_status();
        sum += v;
        kn_scope_pop();
    }
    *out = sum / EVAL_BATCHES;
    return st;
}

/* The next character's index: softmax(logits / temperature) drawn with u in [0, 1), or the
 * argmax at temperature 0. */
static int pick(const float *logits, int V, double temperature, double u) {
    int best = 0;
    for (int v = 1; v < V; v++) best = logits[v] > logits[best] ? v : best;
    if (temperature <= 0) return best;
    double total = 0;
    for (int v = 0; v < V; v++) total += exp((logits[v] - logits[best]) / temperature);
    double target = u * total, acc = 0;
    for (int v = 0; v < V; v++) {
        acc += exp((logits[v] - logits[best]) / temperature);
        if (acc > target) return v;
    }
    return best;
}

static void put_utf8(uint32_t cp) {
    if (cp < 0x80) putchar((int)cp);
    else if (cp < 0x800) printf("%c%c", 0xC0 | cp >> 6, 0x80 | (cp & 0x3F));
    else if (cp < 0x10000) printf("%c%c%c", 0xE0 | cp >> 12, 0x80 | (cp >> 6 & 0x3F), 0x80 | (cp & 0x3F));
    else printf("%c%c%c%c", 0xF0 | cp >> 18, 0x80 | (cp >> 12 & 0x3F), 0x80 | (cp >> 6 & 0x3F), 0x80 | (cp & 0x3F));
}

/* Prints sample_chars characters generated after the first character of the validation text. */
static kn_status sample(mingpt_task *t) {
    int64_t T = t->seq, *ctx = malloc(sizeof *ctx * (size_t)(t->sample_chars + 1));
    float *logits = malloc(sizeof *logits * (size_t)t->vocab_size);
    kn_status st = ctx && logits ? KN_OK : kn_set_error(KN_ERR_OOM, "mingpt: out of host memory");
    if (st == KN_OK) {
        ctx[0] = t->ids[t->n_train];
        printf("sample (temperature %g):\n", t->temperature);
        put_utf8(t->vocab[ctx[0]]);
    }
    for (int64_t len = 1; st == KN_OK && len <= t->sample_chars; len++) {
        int64_t from = len > T ? len - T : 0;
        kn_scope_push();
        kn_tensor *x = kn_from_host(ctx + from, KN_I64, KN_SHAPE(1, len - from), kn_default_device());
        kn_tensor *last = kn_select(kn_select(gpt2_forward(t->model, x), 0, 0), 0, len - from - 1);
        st = last ? kn_to_host(last, logits, sizeof *logits * (size_t)t->vocab_size) : kn_last_status();
        kn_scope_pop();
        if (st != KN_OK) break;
        double u = (double)(kn_mix64(t->seed ^ 0x5a3b1e5ull ^ kn_mix64((uint64_t)len)) >> 11) * 0x1.0p-53;
        ctx[len] = pick(logits, t->vocab_size, t->temperature, u);
        put_utf8(t->vocab[ctx[len]]);
    }
    printf("\n");
    fflush(stdout);
    free(ctx);
    free(logits);
    return st;
}

static kn_status after_step(void *ctx, int64_t steps_done, bool last) {
    mingpt_task *t = ctx;
    if (!last && (!t->eval_every || steps_done % t->eval_every)) return KN_OK;
    double train = NAN, val = NAN;
    kn_module_train(t->model, false);
    kn_no_grad_push();
    kn_status st = eval_loss(t, false, &train);
    if (st == KN_OK) st = eval_loss(t, true, &val);
    if (st == KN_OK) {
        if (last) printf("step %lld: train loss %.4f  val loss %.4f\n", (long long)steps_done, train, val);
        else if (!t->quiet) fprintf(stderr, "  step %lld: train loss %.4f  val loss %.4f\n", (long long)steps_done, train, val);
    }
    if (st == KN_OK && last) st = sample(t);
    kn_no_grad_pop();
    kn_module_train(t->model, true);
    return st;
}

void train_mingpt_defaults(train_options *o) {
    o->n_layer = 3;
    o->n_head = 3;
    o->n_embd = 96;
    o->batch = 32;
    o->seq = 64;
    o->steps = 300;
    o->lr = 3e-3;
    o->min_lr = 3e-4;
    o->warmup = 30;
    o->eval_every = 100;
    o->temperature = 0.8;
    o->num_samples = 300;
}

int train_mingpt_run(const train_options *o) {
    if (!o->data_path) {
        fprintf(stderr, "kiln train mingpt: --data FILE.txt is required: a UTF-8 text to learn, for example Tiny "
                        "Shakespeare (data/tinyshakespeare/input.txt of the char-rnn repository, 1.1 MB)\n");
        return 2;
    }
    if (o->batch > 4096 || !(o->temperature >= 0)) {
        fprintf(stderr, "kiln train mingpt: --batch must be at most 4096 and --temperature not negative\n");
        return 2;
    }
    mingpt_task *t = calloc(1, sizeof *t);
    if (!t) return 1;
    *t = (mingpt_task){.batch = o->batch, .seq = o->seq, .eval_every = o->eval_every, .sample_chars = o->num_samples, .seed = o->seed,
                       .temperature = o->temperature, .quiet = o->quiet};
    int rc = 1;
    if (load_text(t, o->data_path) != KN_OK) {
        fprintf(stderr, "kiln train mingpt: %s\n", kn_last_error());
        goto done;
    }
    gpt2_config cfg = {.n_layer = o->n_layer, .n_head = o->n_head, .n_embd = o->n_embd, .vocab_size = t->vocab_size,
                       .n_positions = (int)o->seq, .layer_norm_epsilon = 1e-5, .dropout = o->dropout,
                       .tie_word_embeddings = true};
    if (!(t->model = gpt2_new(&cfg)) || (o->init_path && gpt2_load_weights(t->model, o->init_path) != KN_OK)) {
        fprintf(stderr, "kiln train mingpt: %s\n", kn_last_error());
        goto done;
    }
    if (!o->quiet)
        fprintf(stderr, "mingpt: %s: %lld characters, %d distinct; a %d-layer GPT (%.0fk parameters), context %lld\n",
                o->data_path, (long long)t->n, t->vocab_size, cfg.n_layer, gpt2_num_params(t->model) / 1e3, (long long)o->seq);
    train_job job = {.task = "mingpt", .ctx = t, .n_params = t->model->n_params, .names = t->model->names,
                     .params = t->model->params, .micro_loss = micro_loss, .tokens_per_micro = o->batch * o->seq,
                     .after_step = after_step};
    rc = train_run(o, &job, NULL);
done:
    gpt2_free(t->model);
    free(t->ids);
    free(t->vocab);
    free(t);
    return rc;
}
