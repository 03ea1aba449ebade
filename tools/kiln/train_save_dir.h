/* The --save directory of `kiln train`: made and checked before training starts, locked so that
 * one trainer at a time writes into it, and swept of what killed runs left behind there: a
 * checkpoint's temporary directory (`.partial-PID`, a whole checkpoint) and the temporary files
 * of atomic writes (`NAME.tmp.PID.N`, an exported model.safetensors among them). */
#ifndef KILN_TOOLS_TRAIN_SAVE_DIR_H
#define KILN_TOOLS_TRAIN_SAVE_DIR_H

#include <stdbool.h>

#define TRAIN_PATH_SIZE 4096

/* dir/name into out (TRAIN_PATH_SIZE bytes); false if it does not fit. */
bool train_path(char *out, const char *dir, const char *name);

/* Makes dir (and its parents) if needed, checks that it is a directory that takes files, and
 * locks it (DIR/.kiln-train.lock, held until train_save_dir_close or the process's end); a
 * directory that another process holds is an error naming that process. Then removes what
 * killed runs left there, saying so on stderr unless quiet. The lock's descriptor, or -1 with
 * an error (kn_last_error) naming the directory. */
int train_save_dir_open(const char *dir, bool quiet);
void train_save_dir_close(int lock);

/* The same sweep for a directory this process only reads a checkpoint from, if no other
 * process holds it; nothing is removed when one does or when the directory is read-only. */
void train_save_dir_sweep(const char *dir, bool quiet);

/* Removes a directory of plain files (a checkpoint) with its files. */
void train_remove_dir(const char *path);

#endif
