/* Encoding speed of a tokenizer.json on a text file, as one string (median of runs, single
 * thread); bench/tokenizer_compare.py runs it beside the Hugging Face `tokenizers` library.
 * With LINES=1 in the environment each line (its newline kept) is encoded by its own call, the
 * way a serving loop sees short prompts.
 * usage: bench_tokenizer TOKENIZER_JSON_OR_DIR TEXT_FILE [RUNS] [IDS_OUT] */
#include "bench_common.h"

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bench_tokenizer TOKENIZER TEXT_FILE [RUNS] [IDS_OUT]\n");
        return 2;
    }
    int runs = argc > 3 ? atoi(argv[3]) : 5;
    if (runs < 1) runs = 1;
    FILE *f = fopen(argv[2], "rb");
    if (!f) {
        fprintf(stderr, "bench_tokenizer: cannot open %s\n", argv[2]);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    size_t n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc(n + 1);
    if (!text || fread(text, 1, n, f) != n) {
        fprintf(stderr, "bench_tokenizer: cannot read %s\n", argv[2]);
        return 1;
    }
    fclose(f);
    double t0 = bench_now();
    kn_tokenizer *t = kn_tokenizer_load(argv[1]);
    double load_s = bench_now() - t0;
    if (!t) {
        fprintf(stderr, "bench_tokenizer: %s\n", kn_last_error());
        return 1;
    }
    double *secs = malloc((size_t)runs * sizeof *secs);
    int32_t *ids = NULL;
    size_t n_ids = 0;
    bool lines = getenv("LINES") && strcmp(getenv("LINES"), "1") == 0;
    for (int r = 0; r < runs; r++) {
        free(ids);
        ids = NULL;
        n_ids = 0;
        double s = bench_now();
        for (size_t at = 0; at < n || (n == 0 && at == 0);) {
            const char *nl = lines ? memchr(text + at, '\n', n - at) : NULL;
            size_t len = nl ? (size_t)(nl - (text + at)) + 1 : n - at;
            int32_t *part = NULL;
            size_t n_part = 0;
            if (kn_tokenizer_encode(t, text + at, len, false, &part, &n_part) != KN_OK) {
                fprintf(stderr, "bench_tokenizer: %s\n", kn_last_error());
                return 1;
            }
            int32_t *grown = realloc(ids, (n_ids + n_part + 1) * sizeof *grown);
            if (!grown) return 1;
            ids = grown;
            memcpy(ids + n_ids, part, n_part * sizeof *part);
            n_ids += n_part;
            free(part);
            at += len;
            if (len == 0) break;
        }
        secs[r] = bench_now() - s;
    }
    double med = bench_median(secs, runs);
    printf("{\"bytes\": %zu, \"ids\": %zu, \"load_s\": %.4f, \"encode_s\": %.4f, \"mb_per_s\": %.2f}\n", n, n_ids,
           load_s, med, (double)n / med / 1e6);
    if (argc > 4) { /* the ids, one per line, for comparing with the library's */
        FILE *out = fopen(argv[4], "w");
        for (size_t i = 0; out && i < n_ids; i++) fprintf(out, "%d\n", ids[i]);
        if (out) fclose(out);
    }
    free(ids);
    free(secs);
    free(text);
    kn_tokenizer_free(t);
    return 0;
}
