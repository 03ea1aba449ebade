/* Parsing `kiln train` options from a table: each option names its field and its kind. */
#include "train_options.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { OPT_STR, OPT_INT, OPT_I64, OPT_U64, OPT_F64, OPT_FLAG, OPT_BETAS } opt_kind;

static const struct option_def {
    const char *name;
    opt_kind kind;
    size_t offset;
    const char *help;
} options[] = {
#define F(field) offsetof(train_options, field)
    {"config", OPT_STR, F(config_path), "Hugging Face config.json of the model"},
    {"init", OPT_STR, F(init_path), "initial weights (.safetensors; llama|qwen2|qwen3|lm: a model directory)"},
    {"n-layer", OPT_INT, F(n_layer), "layers (without --config)"},
    {"n-head", OPT_INT, F(n_head), "attention heads"},
    {"n-embd", OPT_INT, F(n_embd), "embedding width"},
    {"vocab", OPT_INT, F(vocab), "vocabulary size"},
    {"block", OPT_INT, F(block), "context length (positions)"},
    {"dropout", OPT_F64, F(dropout), "dropout probability"},
    {"data", OPT_STR, F(data_path), "token file (nanoGPT uint16, or llm.c format)"},
    {"tokens", OPT_STR, F(token_format), "token file format: auto | u16 | u32 | llmc (auto: u32 above 65536 ids)"},
    {"shuffle", OPT_FLAG, F(shuffle), "seeded shuffling of the training windows"},
    {"batch", OPT_I64, F(batch), "sequences per micro-batch (B)"},
    {"seq", OPT_I64, F(seq), "tokens per sequence (T)"},
    {"steps", OPT_I64, F(steps), "optimizer steps"},
    {"grad-accum", OPT_INT, F(grad_accum), "micro-batches per step"},
    {"lr", OPT_F64, F(lr), "peak learning rate"},
    {"min-lr", OPT_F64, F(min_lr), "learning rate at the end of the decay"},
    {"warmup", OPT_I64, F(warmup), "linear warmup steps"},
    {"schedule", OPT_STR, F(schedule), "constant | cosine | linear (decay after warmup)"},
    {"weight-decay", OPT_F64, F(weight_decay), "AdamW decay of tensors with 2 or more dims"},
    {"betas", OPT_BETAS, F(beta1), "AdamW betas as b1,b2"},
    {"eps", OPT_F64, F(eps), "AdamW epsilon"},
    {"grad-clip", OPT_F64, F(grad_clip), "clip the global gradient norm to this (0: off)"},
    {"seed", OPT_U64, F(seed), "seed of init, data order and dropout"},
    {"save", OPT_STR, F(save_dir), "checkpoint directory"},
    {"save-every", OPT_I64, F(save_every), "steps between checkpoints (0: only at the end)"},
    {"keep-last", OPT_I64, F(keep_last), "checkpoints kept in the --save directory, newest first (0: all)"},
    {"resume", OPT_STR, F(resume_dir), "resume from the last checkpoint in this directory (one at the last step: "
                                       "only redo the end-of-run export and evaluation)"},
    {"log", OPT_STR, F(log_path), "one JSON object per step to this file"},
    {"device", OPT_STR, F(device), "cpu | meta"},
    {"mode", OPT_STR, F(mode), "strict | debug | fused"},
    {"threads", OPT_INT, F(threads), "CPU threads"},
    {"quiet", OPT_FLAG, F(quiet), "no progress output"},
    {"eval-every", OPT_I64, F(eval_every), "steps between held-out evaluations (adder)"},
    {"eval-count", OPT_I64, F(eval_count), "held-out problems (adder)"},
    {"samples", OPT_STR, F(samples_dir), "directory for the sampled images (unet)"},
    {"num-samples", OPT_I64, F(num_samples), "images (unet) or characters (mingpt) to sample at the end"},
    {"temperature", OPT_F64, F(temperature), "sampling temperature (mingpt)"},
    {"image-size", OPT_INT, F(image_size), "image height and width (resnet)"},
    {"abort-after", OPT_I64, F(abort_after), "tests: exit abruptly after this many steps"},
#undef F
};

static bool parse_number(const char *name, const char *text, opt_kind kind, void *field) {
    char *end;
    errno = 0;
    if (kind == OPT_F64) {
        double v = strtod(text, &end);
        if (*end || errno || end == text) goto bad;
        *(double *)field = v;
        return true;
    }
    if (kind == OPT_U64) {
        if (text[0] == '-') goto bad;
        unsigned long long v = strtoull(text, &end, 10);
        if (*end || errno || end == text) goto bad;
        *(uint64_t *)field = v;
        return true;
    }
    long long v = strtoll(text, &end, 10);
    if (*end || errno || end == text || v < 0 || (kind == OPT_INT && v > 1 << 30)) goto bad;
    if (kind == OPT_INT) *(int *)field = (int)v;
    else *(int64_t *)field = v;
    return true;
bad:
    fprintf(stderr, "kiln train: --%s %s: not a valid %s\n", name, text,
            kind == OPT_F64 ? "number" : "non-negative integer");
    return false;
}

static bool parse_betas(const char *text, double *betas) {
    char *end;
    betas[0] = strtod(text, &end);
    if (*end != ',') goto bad;
    betas[1] = strtod(end + 1, &end);
    if (*end) goto bad;
    return true;
bad:
    fprintf(stderr, "kiln train: --betas %s: expected two numbers as b1,b2\n", text);
    return false;
}

bool train_options_parse(train_options *o, int argc, char **argv) {
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        const struct option_def *def = NULL;
        if (strncmp(arg, "--", 2) == 0)
            for (size_t k = 0; k < sizeof options / sizeof *options; k++)
                if (strcmp(arg + 2, options[k].name) == 0) def = &options[k];
        if (!def) {
            fprintf(stderr, "kiln train: unknown option '%s' (kiln train TASK --help lists them)\n", arg);
            return false;
        }
        void *field = (char *)o + def->offset;
        if (def->kind == OPT_FLAG) {
            *(bool *)field = true;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "kiln train: --%s needs a value\n", def->name);
            return false;
        }
        const char *value = argv[++i];
        if (def->kind == OPT_STR) *(const char **)field = value;
        else if (def->kind == OPT_BETAS) {
            if (!parse_betas(value, &o->beta1)) return false;
        } else if (!parse_number(def->name, value, def->kind, field)) {
            return false;
        }
    }
    return true;
}

void train_options_usage(const char *task, const train_options *d) {
    printf("usage: kiln train %s [options]\n\noptions:\n", task);
    for (size_t k = 0; k < sizeof options / sizeof *options; k++) {
        const struct option_def *o = &options[k];
        if (strcmp(o->name, "abort-after") == 0) continue;
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
        printf("  --%-13s %s%s%s%s\n", o->name, o->help, value[0] ? " [" : "", value, value[0] ? "]" : "");
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
