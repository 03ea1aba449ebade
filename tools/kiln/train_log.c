/* The training log (train_log.h). */
#define _POSIX_C_SOURCE 200809L /* getline */
#include "train_log.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static kn_status log_error(const char *path, const char *what) {
    return kn_set_error(KN_ERR_IO, "%s: %s (%s)", path, what, strerror(errno));
}

/* The step of a complete log line, or -1 for a line cut short by a kill (or of another form). */
static long long line_step(const char *line) {
    cJSON *o = cJSON_Parse(line);
    const cJSON *step = cJSON_GetObjectItemCaseSensitive(o, "step");
    bool ok = cJSON_IsNumber(step) && step->valuedouble >= 0 && step->valuedouble < 0x1p53;
    long long v = ok ? (long long)step->valuedouble : -1;
    cJSON_Delete(o);
    return v;
}

/* Keeps the lines of steps before start, each step once (a log written by an older kiln
 * may repeat steps), in their order. */
static kn_status cut(const char *path, int64_t start) {
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return KN_OK; /* nothing to cut, or not a file */
    FILE *in = fopen(path, "rb");
    if (!in) return log_error(path, "cannot read it");
    kn_atomic_file *out = kn_atomic_file_open(path);
    if (!out) {
        fclose(in);
        return kn_last_status();
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long long step, last = -1;
    while ((len = getline(&line, &cap, in)) > 0)
        if ((step = line_step(line)) > last && step < start) {
            /* a failed write is commit's to report */
            fprintf(kn_atomic_file_stream(out), "%s%s", line, line[len - 1] == '\n' ? "" : "\n");
            last = step;
        }
    bool read_failed = ferror(in);
    free(line);
    fclose(in);
    if (!read_failed) return kn_atomic_file_commit(out);
    kn_atomic_file_abort(out);
    return log_error(path, "cannot read it");
}

FILE *train_log_open(const char *path, int64_t start) {
    if (start > 0 && cut(path, start) != KN_OK) return NULL;
    FILE *f = fopen(path, start > 0 ? "a" : "w");
    if (!f) log_error(path, "cannot write it");
    return f;
}

kn_status train_log_step(FILE *log, const char *path, int64_t step, double loss, double lr, double grad_norm,
                         double ms, double tokens_per_s, double peak_mib) {
    if (fprintf(log,
                "{\"step\": %lld, \"loss\": %.9g, \"lr\": %.9g, \"grad_norm\": %.9g, \"ms\": %.3f, "
                "\"tokens_per_s\": %.1f, \"peak_mib\": %.6g}\n",
                (long long)step, loss, lr, grad_norm, ms, tokens_per_s, peak_mib) < 0 ||
        fflush(log) != 0)
        return log_error(path, "writing failed");
    return KN_OK;
}

kn_status train_log_close(FILE *log, const char *path) {
    if (log && fclose(log) != 0) return log_error(path, "writing failed");
    return KN_OK;
}
