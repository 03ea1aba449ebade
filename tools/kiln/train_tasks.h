/* The tasks of `kiln train`: each fills its defaults and runs. */
#ifndef KILN_TOOLS_TRAIN_TASKS_H
#define KILN_TOOLS_TRAIN_TASKS_H

#include "train_options.h"

void train_gpt2_defaults(train_options *o);
int train_gpt2_run(const train_options *o);
void train_adder_defaults(train_options *o);
int train_adder_run(const train_options *o);
/* Hugging Face causal LMs (models/lm), one implementation: the task names the family that
 * config.json must have; lm takes any. */
void train_lm_defaults(train_options *o);
int train_llama_run(const train_options *o);
int train_mistral_run(const train_options *o);
int train_qwen2_run(const train_options *o);
int train_qwen3_run(const train_options *o);
int train_lm_run(const train_options *o);
void train_dlrm_defaults(train_options *o);
int train_dlrm_run(const train_options *o);
void train_unet_defaults(train_options *o);
int train_unet_run(const train_options *o);
void train_mingpt_defaults(train_options *o);
int train_mingpt_run(const train_options *o);
void train_resnet18_defaults(train_options *o);
int train_resnet18_run(const train_options *o);
void train_resnet50_defaults(train_options *o);
int train_resnet50_run(const train_options *o);

/* The GPT-2 shape from --config, else the size flags over GPT-2 small's. */
struct gpt2_config;
bool train_gpt2_config(const train_options *o, struct gpt2_config *out);

#endif
