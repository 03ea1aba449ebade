/* Options of `kiln train`: one struct for every task, parsed from the command line. Each
 * option names the tasks it applies to (train_options.c), so a task refuses the others and
 * its --help lists only its own. */
#ifndef KILN_TOOLS_TRAIN_OPTIONS_H
#define KILN_TOOLS_TRAIN_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include <kiln/kiln.h>

#include "commands.h" /* KILN_MODES */

/* The tasks as bits (a family of tasks that share their options is one bit). */
enum {
    TASK_GPT2 = 1 << 0,
    TASK_ADDER = 1 << 1,
    TASK_LM = 1 << 2, /* llama, qwen2, qwen3, lm */
    TASK_MINGPT = 1 << 3,
    TASK_DLRM = 1 << 4,
    TASK_UNET = 1 << 5,
    TASK_RESNET = 1 << 6, /* resnet18, resnet50 */
};

typedef struct train_options {
    /* model */
    const char *config_path, *init_path;
    int n_layer, n_head, n_embd, vocab, block; /* gpt2: 0 takes --config's (or GPT-2 small's) */
    double dropout;                            /* gpt2: NaN takes --config's */
    /* data */
    const char *data_path;
    const char *token_format; /* auto | u16 | u32 | llmc */
    bool shuffle;
    int64_t batch, seq, steps;
    int grad_accum;
    /* optimization */
    double lr, min_lr, weight_decay, beta1, beta2, eps, grad_clip;
    int64_t warmup;
    const char *schedule;
    uint64_t seed;
    /* checkpoints and logs */
    const char *save_dir, *resume_dir, *log_path;
    int64_t save_every, keep_last;
    int64_t abort_after; /* tests: exit abruptly after this many steps (after its checkpoint, before the
                          * export and the evaluation), as if killed */
    /* runtime */
    const char *device, *mode;
    const char *amp, *dtype; /* --amp none | bf16, --dtype f32 | bf16: one setting, two spellings */
    kn_dtype amp_dtype;      /* from them: KN_BF16 for bf16 autocast (kiln/autocast.h), else KN_F32 */
    int threads;
    bool quiet;
    int64_t profile; /* the last this many steps' kernels are timed per op and printed at the end */
    bool trace; /* set from --device: the device holds no values, so the run is a trace */
    /* evaluation (adder, dlrm, mingpt, resnet) */
    int64_t eval_every, eval_count;
    /* examples (unet, mingpt) */
    const char *samples_dir;
    int64_t num_samples;
    double temperature;
    /* images (resnet) */
    int image_size;
} train_options;

/* Sets o's fields from "--name value" pairs that apply to the task (one of the TASK_ bits);
 * prints what was wrong (an unknown option, one the task does not take, a value out of its
 * range) and returns false. */
bool train_options_parse(train_options *o, const char *task, unsigned task_bit, int argc, char **argv);
/* Prints the task's options with their defaults (those of `defaults`). */
void train_options_usage(const char *task, unsigned task_bit, const train_options *defaults);
/* The token file format from --tokens; auto reads u16 or llm.c, or u32 when a vocabulary of
 * vocab ids does not fit in 16 bits. Prints what was wrong and returns false. */
bool train_token_format(const train_options *o, int64_t vocab, kn_token_format *out);

#endif
