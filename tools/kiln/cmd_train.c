/* `kiln train TASK`: the tasks share the options and the loop; each builds its model and
 * its micro-batches. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "gpt2/gpt2.h"
#include "train_loop.h"
#include "train_tasks.h"

static const struct {
    const char *name;
    unsigned bit; /* which options it takes (train_options.c) */
    void (*defaults)(train_options *o);
    int (*run)(const train_options *o);
    const char *help;
} tasks[] = {
    {"gpt2", TASK_GPT2, train_gpt2_defaults, train_gpt2_run, "GPT-2 (Hugging Face layout) on a token file"},
    {"adder", TASK_ADDER, train_adder_defaults, train_adder_run, "a small GPT that learns to add two 2-digit numbers"},
    {"llama", TASK_LM, train_lm_defaults, train_llama_run, "fine-tune a Llama model directory (--init DIR) on a token file"},
    {"mistral", TASK_LM, train_lm_defaults, train_mistral_run, "fine-tune a Mistral model directory (--init DIR) on a token file"},
    {"qwen2", TASK_LM, train_lm_defaults, train_qwen2_run, "fine-tune a Qwen2 model directory (--init DIR) on a token file"},
    {"qwen3", TASK_LM, train_lm_defaults, train_qwen3_run, "fine-tune a Qwen3 model directory (--init DIR) on a token file"},
    {"lm", TASK_LM, train_lm_defaults, train_lm_run, "fine-tune any causal LM directory kiln loads (gpt2, llama, mistral, qwen2, qwen3)"},
    {"dlrm", TASK_DLRM, train_dlrm_defaults, train_dlrm_run, "DLRM on synthetic click logs (held-out AUC)"},
    {"unet", TASK_UNET, train_unet_defaults, train_unet_run, "a DDPM UNet on synthetic images; samples written as PNG"},
    {"mingpt", TASK_MINGPT, train_mingpt_defaults, train_mingpt_run, "a character-level GPT on a text file, with samples"},
    {"resnet18", TASK_RESNET, train_resnet18_defaults, train_resnet18_run, "torchvision's ResNet-18 on synthetic shapes (accuracy)"},
    {"resnet50", TASK_RESNET, train_resnet50_defaults, train_resnet50_run, "torchvision's ResNet-50 on synthetic shapes (accuracy)"},
};

/* Options every task starts from (AdamW as nanoGPT sets it). */
static void common_defaults(train_options *o) {
    *o = (train_options){.batch = 4, .seq = 64, .steps = 20, .grad_accum = 1, .lr = 6e-4, .beta1 = 0.9, .beta2 = 0.95,
                         .eps = 1e-8, .weight_decay = 0.1, .grad_clip = 1.0, .schedule = "cosine", .seed = 1337,
                         .device = "cpu", .keep_last = 2};
}

/* --NAME VALUE of the mixed-precision setting: `off` or bf16 (*dtype set to KN_BF16). Prints
 * what was wrong and returns false for anything else. */
static bool parse_amp(const char *task, const char *name, const char *value, const char *off, kn_dtype *dtype) {
    if (!value || strcmp(value, off) == 0) return true;
    if (strcmp(value, "bf16") == 0) {
        *dtype = KN_BF16;
        return true;
    }
    fprintf(stderr, "kiln train %s: --%s %s: not %s or bf16\n", task, name, value, off);
    return false;
}

/* Threads, device and mode, from the options; a device without values makes the run a trace. */
static bool apply_runtime(const char *task, train_options *o) {
    kn_device device;
    kn_mode mode;
    if (o->threads) kn_set_num_threads(o->threads);
    if (!kn_device_parse(o->device, &device) || kn_set_default_device(device) != KN_OK) {
        fprintf(stderr, "kiln train %s: --device %s: %s\n", task, o->device,
                kn_last_status() ? kn_last_error() : "not a device (cpu, meta)");
        return false;
    }
    if (o->mode && (!kn_mode_parse(o->mode, &mode) || kn_set_mode(mode) != KN_OK)) {
        fprintf(stderr, "kiln train %s: --mode %s: %s\n", task, o->mode,
                kn_last_status() ? kn_last_error() : "not a mode (" KILN_MODES ")");
        return false;
    }
    if (!parse_amp(task, "amp", o->amp, "none", &o->amp_dtype) || !parse_amp(task, "dtype", o->dtype, "f32", &o->amp_dtype))
        return false;
    if (o->amp && o->dtype && (strcmp(o->amp, "bf16") == 0) != (strcmp(o->dtype, "bf16") == 0)) {
        fprintf(stderr, "kiln train %s: --amp %s and --dtype %s disagree (they are one setting)\n", task, o->amp, o->dtype);
        return false;
    }
    o->trace = device.type == KN_DEVICE_META;
    /* A trace reads no values, so it writes nothing and resumes nothing. */
    const char *writes = !o->trace ? NULL : o->save_dir ? "--save" : o->resume_dir ? "--resume" : o->log_path ? "--log" : NULL;
    if (writes) {
        fprintf(stderr, "kiln train %s: %s does not apply to --device %s, which traces shapes and holds no values\n", task,
                writes, o->device);
        return false;
    }
    kn_manual_seed(o->seed);
    return true;
}

static void usage(void) {
    printf("usage: kiln train TASK [options]   (kiln train TASK --help lists the options)\n\ntasks:\n");
    for (size_t i = 0; i < sizeof tasks / sizeof *tasks; i++) printf("  %-8s %s\n", tasks[i].name, tasks[i].help);
}

int kiln_cmd_train(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage();
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof tasks / sizeof *tasks; i++) {
        if (strcmp(argv[1], tasks[i].name) != 0) continue;
        train_options o;
        common_defaults(&o);
        tasks[i].defaults(&o);
        for (int a = 2; a < argc; a++)
            if (strcmp(argv[a], "--help") == 0 || strcmp(argv[a], "-h") == 0) {
                train_options_usage(tasks[i].name, tasks[i].bit, &o);
                return 0;
            }
        int64_t task_steps = o.steps;
        o.steps = -1; /* not given: the task's, or one step to trace */
        if (!train_options_parse(&o, tasks[i].name, tasks[i].bit, argc - 2, argv + 2) || !apply_runtime(tasks[i].name, &o))
            return 2;
        if (o.steps < 0) o.steps = o.trace ? 1 : task_steps;
        return tasks[i].run(&o);
    }
    fprintf(stderr, "kiln train: unknown task '%s'\n", argv[1]);
    usage();
    return 2;
}
