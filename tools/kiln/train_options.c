/* Parsing `kiln train` options from a table: each row names an option, its field and kind, the
 * tasks it applies to, its help and its range. An option whose meaning differs between tasks
 * has one row per meaning, so each task's --help says what the option does there. */
#include "train_options.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { OPT_STR, OPT_INT, OPT_I64, OPT_U64, OPT_F64, OPT_FLAG, OPT_BETAS } opt_kind;

#define ALL (TASK_GPT2 | TASK_ADDER | TASK_LM | TASK_MINGPT | TASK_DLRM | TASK_UNET | TASK_RESNET)
#define TOKENS (TASK_GPT2 | TASK_LM)

static const struct option_def {
    const char *name;
    opt_kind kind;
    size_t offset;
    unsigned tasks;
    const char *help;         /* NULL: not listed by --help */
    const char *default_text; /* printed as the default instead of the field's value */
    double min, below;        /* numbers: min <= value (< below, when below > 0) */
} options[] = {
/* One row: name, kind, field, tasks, help (NULL: unlisted), then any of .default_text, .min, .below. */
#define OPT(name_, kind_, field_, tasks_, help_, ...) \
    {.name = name_, .kind = kind_, .offset = offsetof(train_options, field_), .tasks = tasks_, .help = help_, __VA_ARGS__}
    OPT("config", OPT_STR, config_path, TASK_GPT2, "Hugging Face config.json of the model's shape",
        .default_text = "GPT-2 small (124M)"),
    OPT("config", OPT_STR, config_path, TASK_LM, "a config.json to start from seeded random weights instead of --init",
        .default_text = "none"),
    OPT("init", OPT_STR, init_path, TASK_GPT2, "initial weights: .safetensors in Hugging Face GPT-2 names",
        .default_text = "seeded random"),
    OPT("init", OPT_STR, init_path, TASK_LM, "the model directory to fine-tune (config.json, weights, tokenizer)",
        .default_text = "none: --init or --config is required"),
    OPT("init", OPT_STR, init_path, TASK_ADDER | TASK_MINGPT,
        "initial weights: .safetensors in GPT-2 names for the model the flags shape (a checkpoint's model.safetensors)",
        .default_text = "seeded random"),
    OPT("init", OPT_STR, init_path, TASK_DLRM | TASK_UNET,
        "initial weights: .safetensors in the model's state_dict names (a checkpoint's model.safetensors)",
        .default_text = "seeded random"),
    OPT("init", OPT_STR, init_path, TASK_RESNET,
        "initial weights: torchvision's state_dict (num_classes=10) as .safetensors",
        .default_text = "seeded random"),
    OPT("n-layer", OPT_INT, n_layer, TASK_GPT2, "transformer layers", .default_text = "--config's, else 12", .min = 1),
    OPT("n-layer", OPT_INT, n_layer, TASK_ADDER | TASK_MINGPT, "transformer layers", .min = 1),
    OPT("n-head", OPT_INT, n_head, TASK_GPT2, "attention heads", .default_text = "--config's, else 12", .min = 1),
    OPT("n-head", OPT_INT, n_head, TASK_ADDER | TASK_MINGPT, "attention heads", .min = 1),
    OPT("n-embd", OPT_INT, n_embd, TASK_GPT2, "embedding width", .default_text = "--config's, else 768", .min = 1),
    OPT("n-embd", OPT_INT, n_embd, TASK_ADDER | TASK_MINGPT, "embedding width", .min = 1),
    OPT("vocab", OPT_INT, vocab, TASK_GPT2, "vocabulary size", .default_text = "--config's, else 50257", .min = 1),
    OPT("block", OPT_INT, block, TASK_GPT2, "context length (positions)",
        .default_text = "--config's, else 1024", .min = 1),
    OPT("dropout", OPT_F64, dropout, TASK_GPT2, "dropout probability",
        .default_text = "--config's, else 0", .min = 0, .below = 1),
    OPT("dropout", OPT_F64, dropout, TASK_ADDER | TASK_MINGPT, "dropout probability", .min = 0, .below = 1),
    OPT("data", OPT_STR, data_path, TOKENS,
        "token file: uint16 (nanoGPT), uint32 or llm.c; "
        "make one with kiln tokenize MODEL_DIR --input FILE --output tokens.bin",
        .default_text = "none (required; not read on --device meta)"),
    OPT("data", OPT_STR, data_path, TASK_MINGPT, "UTF-8 text file to learn (90% trains, 10% validates)",
        .default_text = "none (required)"),
    OPT("tokens", OPT_STR, token_format, TOKENS,
        "token file format: auto | u16 | u32 | llmc (auto: llm.c by its header, else u32 above 65536 ids, else u16)",
        .default_text = "auto"),
    OPT("shuffle", OPT_FLAG, shuffle, TOKENS, "seeded shuffling of the training windows", .default_text = "off"),
    OPT("batch", OPT_I64, batch, TOKENS, "sequences per micro-batch (B)", .min = 1),
    OPT("batch", OPT_I64, batch, TASK_ADDER, "problems per micro-batch", .min = 1),
    OPT("batch", OPT_I64, batch, TASK_MINGPT, "text windows per micro-batch (at most 4096)", .min = 1),
    OPT("batch", OPT_I64, batch, TASK_DLRM, "click logs per micro-batch (at most 4096)", .min = 1),
    OPT("batch", OPT_I64, batch, TASK_UNET | TASK_RESNET, "images per micro-batch", .min = 1),
    OPT("seq", OPT_I64, seq, TOKENS, "tokens per sequence (T), at most the model's positions", .min = 1),
    OPT("seq", OPT_I64, seq, TASK_MINGPT, "characters per window (T), also the model's context", .min = 1),
    OPT("steps", OPT_I64, steps, ALL, "optimizer steps (--device meta: steps to trace, 1 unless given)", .min = 1),
    OPT("grad-accum", OPT_INT, grad_accum, ALL, "micro-batches per step", .min = 1),
    OPT("lr", OPT_F64, lr, ALL, "peak learning rate"),
    OPT("min-lr", OPT_F64, min_lr, ALL, "learning rate at the end of the decay"),
    OPT("warmup", OPT_I64, warmup, ALL, "linear warmup steps"),
    OPT("schedule", OPT_STR, schedule, ALL, "constant | cosine | linear (decay after warmup)"),
    OPT("weight-decay", OPT_F64, weight_decay, ALL, "AdamW decay of tensors with 2 or more dims"),
    OPT("betas", OPT_BETAS, beta1, ALL, "AdamW betas as b1,b2, each in [0, 1)"),
    OPT("eps", OPT_F64, eps, ALL, "AdamW epsilon"),
    OPT("grad-clip", OPT_F64, grad_clip, ALL,
        "clip the global gradient norm to this; 0: no clipping (the norm is still logged)"),
    OPT("seed", OPT_U64, seed, ALL, "seed of init, data order and dropout"),
    OPT("save", OPT_STR, save_dir, ALL & ~(TASK_LM | TASK_RESNET), "checkpoint directory (DIR/step-N, DIR/latest)",
        .default_text = "none"),
    OPT("save", OPT_STR, save_dir, TASK_LM,
        "checkpoint directory (DIR/step-N, DIR/latest); DIR is also a model directory of the newest weights",
        .default_text = "none"),
    OPT("save", OPT_STR, save_dir, TASK_RESNET,
        "checkpoint directory (DIR/step-N, DIR/latest); the final weights also as DIR/resnetNN.safetensors",
        .default_text = "none"),
    OPT("save-every", OPT_I64, save_every, ALL, "steps between checkpoints (0: only at the end)"),
    OPT("keep-last", OPT_I64, keep_last, ALL, "checkpoints kept in the --save directory, newest first (0: all)"),
    OPT("resume", OPT_STR, resume_dir, ALL,
        "resume from the newest checkpoint in this directory (one at the last step: only redo the end-of-run "
        "export and evaluation)",
        .default_text = "none"),
    OPT("log", OPT_STR, log_path, ALL, "one JSON object per step to this file", .default_text = "none"),
    OPT("device", OPT_STR, device, ALL,
        "cpu | meta (meta: trace the training steps' ops, FLOPs and peak memory; "
        "nothing is allocated, read or written)"),
    OPT("mode", OPT_STR, mode, ALL, "execution mode: " KILN_MODES, .default_text = "$KILN_MODE, else strict"),
    OPT("amp", OPT_STR, amp, ALL,
        "mixed precision: none | bf16 (bf16 autocast: matmul, convolution and attention compute in bf16; "
        "weights, gradients, optimizer state and checkpoints stay f32)",
        .default_text = "none"),
    OPT("dtype", OPT_STR, dtype, ALL, "compute dtype: f32 | bf16 (bf16 is --amp bf16)", .default_text = "f32"),
    OPT("threads", OPT_INT, threads, ALL, "CPU threads", .default_text = "$KILN_THREADS, else one per core", .min = 1),
    OPT("quiet", OPT_FLAG, quiet, ALL, "no progress output", .default_text = "off"),
    OPT("profile", OPT_I64, profile, ALL,
        "time the kernels of the last N steps per op (kiln/profile.h) and print the table on stderr at the end "
        "(0: off)"),
    OPT("eval-every", OPT_I64, eval_every, TASK_ADDER | TASK_RESNET,
        "steps between held-out accuracy checks (0: only at the end)"),
    OPT("eval-every", OPT_I64, eval_every, TASK_DLRM, "steps between held-out AUC checks (0: only at the end)"),
    OPT("eval-every", OPT_I64, eval_every, TASK_MINGPT,
        "steps between train and validation losses (0: only at the end)"),
    OPT("eval-count", OPT_I64, eval_count, TASK_ADDER, "held-out problems (of 10000)", .min = 1),
    OPT("eval-count", OPT_I64, eval_count, TASK_DLRM, "held-out click logs (of 1000000)", .min = 1),
    OPT("eval-count", OPT_I64, eval_count, TASK_RESNET, "held-out images", .min = 1),
    OPT("samples", OPT_STR, samples_dir, TASK_UNET, "directory for data.png, loss.csv and samples.png"),
    OPT("num-samples", OPT_I64, num_samples, TASK_UNET, "images to sample at the end (at most 1024)", .min = 1),
    OPT("num-samples", OPT_I64, num_samples, TASK_MINGPT, "characters to sample at the end"),
    OPT("temperature", OPT_F64, temperature, TASK_MINGPT, "sampling temperature (0: greedy)"),
    OPT("image-size", OPT_INT, image_size, TASK_RESNET, "image height and width", .min = 32),
    OPT("abort-after", OPT_I64, abort_after, ALL, NULL), /* tests: exit abruptly after this many steps */
#undef OPT
};

#define N_OPTIONS (sizeof options / sizeof *options)

/* Whether value lies in the row's range; if not, prints the range. */
static bool in_range(const char *task, const struct option_def *d, const char *text, double value) {
    if (value >= d->min && (d->below <= 0 || value < d->below)) return true;
    fprintf(stderr, "kiln train %s: --%s %s: ", task, d->name, text);
    if (d->below > 0) fprintf(stderr, "must be at least %g and below %g\n", d->min, d->below);
    else if (d->min == 0) fprintf(stderr, "must not be negative\n");
    else fprintf(stderr, "must be at least %g\n", d->min);
    return false;
}

static bool parse_number(const char *task, const struct option_def *d, const char *text, void *field) {
    char *end;
    errno = 0;
    if (d->kind == OPT_F64) {
        double v = strtod(text, &end);
        if (*end || errno || end == text) goto bad;
        if (!isfinite(v)) {
            fprintf(stderr, "kiln train %s: --%s %s: not a finite number\n", task, d->name, text);
            return false;
        }
        if (!in_range(task, d, text, v)) return false;
        *(double *)field = v;
        return true;
    }
    if (d->kind == OPT_U64) {
        if (text[0] == '-') goto bad;
        unsigned long long v = strtoull(text, &end, 10);
        if (*end || errno || end == text) goto bad;
        *(uint64_t *)field = v;
        return true;
    }
    long long v = strtoll(text, &end, 10);
    if (*end || errno || end == text || (d->kind == OPT_INT && (v > 1 << 30 || v < -(1 << 30)))) goto bad;
    if (!in_range(task, d, text, (double)v)) return false;
    if (d->kind == OPT_INT) *(int *)field = (int)v;
    else *(int64_t *)field = v;
    return true;
bad:
    fprintf(stderr, "kiln train %s: --%s %s: not %s\n", task, d->name, text,
            d->kind == OPT_F64 ? "a number" : d->kind == OPT_U64 ? "a non-negative integer" : "an integer");
    return false;
}

static bool parse_betas(const char *task, const char *text, double *betas) {
    char *end;
    betas[0] = strtod(text, &end);
    if (*end != ',') goto bad;
    betas[1] = strtod(end + 1, &end);
    if (*end) goto bad;
    for (int i = 0; i < 2; i++)
        if (!(betas[i] >= 0 && betas[i] < 1)) {
            fprintf(stderr, "kiln train %s: --betas %s: each beta must be at least 0 and below 1\n", task, text);
            return false;
        }
    return true;
bad:
    fprintf(stderr, "kiln train %s: --betas %s: expected two numbers as b1,b2\n", task, text);
    return false;
}

/* The row of option `name` for the task; NULL with *exists telling whether another task has it. */
static const struct option_def *find(const char *name, unsigned task_bit, bool *exists) {
    *exists = false;
    for (size_t k = 0; k < N_OPTIONS; k++) {
        if (strcmp(name, options[k].name) != 0) continue;
        *exists = true;
        if (options[k].tasks & task_bit) return &options[k];
    }
    return NULL;
}

bool train_options_parse(train_options *o, const char *task, unsigned task_bit, int argc, char **argv) {
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        bool exists = false;
        const struct option_def *def = strncmp(arg, "--", 2) == 0 ? find(arg + 2, task_bit, &exists) : NULL;
        if (!def) {
            if (exists)
                fprintf(stderr, "kiln train %s: %s does not apply to this task (kiln train %s --help lists its options)\n",
                        task, arg, task);
            else
                fprintf(stderr, "kiln train %s: unknown option '%s' (kiln train %s --help lists the options)\n", task, arg,
                        task);
            return false;
        }
        void *field = (char *)o + def->offset;
        if (def->kind == OPT_FLAG) {
            *(bool *)field = true;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "kiln train %s: --%s needs a value\n", task, def->name);
            return false;
        }
        const char *value = argv[++i];
        if (def->kind == OPT_STR) *(const char **)field = value;
        else if (def->kind == OPT_BETAS) {
            if (!parse_betas(task, value, &o->beta1)) return false;
        } else if (!parse_number(task, def, value, field)) {
            return false;
        }
    }
    return true;
}

void train_options_usage(const char *task, unsigned task_bit, const train_options *d) {
    printf("usage: kiln train %s [options]\n\noptions:\n", task);
    for (size_t k = 0; k < N_OPTIONS; k++) {
        const struct option_def *o = &options[k];
        if (!o->help || !(o->tasks & task_bit)) continue;
        const void *field = (const char *)d + o->offset;
        char value[64] = "";
        switch (o->kind) {
        case OPT_INT: snprintf(value, sizeof value, "%d", *(const int *)field); break;
        case OPT_I64: snprintf(value, sizeof value, "%lld", (long long)*(const int64_t *)field); break;
        case OPT_U64: snprintf(value, sizeof value, "%llu", (unsigned long long)*(const uint64_t *)field); break;
        case OPT_F64: snprintf(value, sizeof value, "%g", *(const double *)field); break;
        case OPT_BETAS: snprintf(value, sizeof value, "%g,%g", d->beta1, d->beta2); break;
        case OPT_STR: snprintf(value, sizeof value, "%s", *(const char *const *)field ? *(const char *const *)field : ""); break;
        case OPT_FLAG: break;
        }
        printf("  --%-13s %s [default: %s]\n", o->name, o->help, o->default_text ? o->default_text : value);
    }
}

bool train_token_format(const train_options *o, int64_t vocab, kn_token_format *out) {
    static const struct {
        const char *name;
        kn_token_format format;
    } formats[] = {{"u16", KN_TOKENS_U16}, {"u32", KN_TOKENS_U32}, {"llmc", KN_TOKENS_LLMC}};
    const char *name = o->token_format ? o->token_format : "auto";
    if (strcmp(name, "auto") == 0) {
        *out = vocab > 65536 ? KN_TOKENS_U32 : KN_TOKENS_AUTO;
        return true;
    }
    for (size_t i = 0; i < sizeof formats / sizeof *formats; i++)
        if (strcmp(name, formats[i].name) == 0) {
            *out = formats[i].format;
            return true;
        }
    fprintf(stderr, "kiln train: --tokens %s: not a token file format (auto, u16, u32, llmc)\n", name);
    return false;
}
