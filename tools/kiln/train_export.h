/* The model directory `kiln train` leaves in --save DIR beside its checkpoints, for `kiln
 * generate DIR` and `--init DIR`: besides the weights and config.json, the tokenizer's files
 * and generation_config.json of the model the run started from. */
#ifndef KILN_TOOLS_TRAIN_EXPORT_H
#define KILN_TOOLS_TRAIN_EXPORT_H

#include <stdbool.h>

#include <kiln/kiln.h>

/* Copies the file `from` to `to`, atomically; errors name the file that failed. */
kn_status train_copy_file(const char *from, const char *to);
/* Copies into dir those of tokenizer.json, tokenizer_config.json, special_tokens_map.json and
 * generation_config.json that source_dir has. */
kn_status train_copy_model_files(const char *source_dir, const char *dir);
/* Whether dir has a tokenizer.json. */
bool train_has_tokenizer(const char *dir);

#endif
