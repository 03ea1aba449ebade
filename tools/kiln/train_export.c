/* Files of the exported model directory (train_export.h). */
#include "train_export.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "train_save_dir.h"

kn_status train_copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb");
    if (!in) return kn_set_error(KN_ERR_IO, "%s: cannot open (%s)", from, strerror(errno));
    kn_atomic_file *out = kn_atomic_file_open(to);
    if (!out) {
        fclose(in);
        return kn_last_status();
    }
    char buf[1 << 16];
    size_t n;
    /* A failed write stops the copy; commit reports it with its cause. */
    while ((n = fread(buf, 1, sizeof buf, in)) > 0 && fwrite(buf, 1, n, kn_atomic_file_stream(out)) == n) {
    }
    int read_error = ferror(in) ? errno : 0;
    fclose(in);
    if (!read_error) return kn_atomic_file_commit(out);
    kn_atomic_file_abort(out);
    return kn_set_error(KN_ERR_IO, "%s: cannot read (%s)", from, strerror(read_error));
}

kn_status train_copy_model_files(const char *source_dir, const char *dir) {
    static const char *const files[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                        "generation_config.json"};
    char from[TRAIN_PATH_SIZE], to[TRAIN_PATH_SIZE];
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        if (!train_path(from, source_dir, files[i]) || !train_path(to, dir, files[i]))
            return kn_set_error(KN_ERR_IO, "%s: the path is too long", dir);
        if (access(from, F_OK) != 0) continue;
        kn_status st = train_copy_file(from, to);
        if (st != KN_OK) return st;
    }
    return KN_OK;
}

bool train_has_tokenizer(const char *dir) {
    char path[TRAIN_PATH_SIZE];
    return train_path(path, dir, "tokenizer.json") && access(path, F_OK) == 0;
}
