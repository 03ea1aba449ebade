/* `kiln generate MODEL_DIR`: text from a Hugging Face checkpoint; a thin layer over
 * lm_generate (models/lm/generate.h) that reads prompts and prints what it makes. */
#define _GNU_SOURCE /* strndup, getline */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commands.h"
#include "lm/generate.h"
#include "mapped_files.h"

#define MAX_LIST 256 /* stop strings, --prompt-ids prompts */

typedef struct generate_args {
    const char *dir, *prompt, *prompt_file, *device, *dtype, *mode;
    const char *prompt_ids[MAX_LIST], *stop[MAX_LIST];
    int n_prompt_ids, n_stop, threads;
    bool print_ids, no_stream, ignore_eos;
    /* sampling flags given on the command line (they override generation_config.json) */
    bool has_max_new, has_temperature, has_top_k, has_top_p, has_penalty, has_seed;
    long long max_new, top_k, seed;
    double temperature, top_p, penalty;
} generate_args;

static void usage(FILE *f) {
    fprintf(f,
            "usage: kiln generate MODEL_DIR (--prompt TEXT | --prompt-file FILE | --prompt-ids 1,2,3 ...) [options]\n\n"
            "  --prompt TEXT             one prompt (streamed to stdout as it is made)\n"
            "  --prompt-file FILE        one prompt per line (empty lines skipped), generated as one batch\n"
            "  --prompt-ids 1,2,3        a prompt as token ids (repeatable: a batch); no tokenizer needed\n"
            "  --max-new-tokens N        tokens to generate per prompt [generation_config.json, else 64]\n"
            "  --temperature T           0: greedy; above 0: sampling [greedy unless do_sample]\n"
            "  --top-k K                 keep the K most likely tokens (0: off) [50]\n"
            "  --top-p P                 keep the smallest set with probability >= P (1: off) [1]\n"
            "  --repetition-penalty R    CTRL's penalty on ids already seen (1: off) [1]\n"
            "  --seed S                  seed of the draws (same seed, same text) [0]\n"
            "  --stop STR                stop a row when its text contains STR (repeatable; not printed)\n"
            "  --ignore-eos              go on past the end-of-sequence ids\n"
            "  --print-ids               print each row's generated ids as a JSON array instead of text\n"
            "  --no-stream               print the text at the end\n"
            "  --device cpu|cuda|meta    where the weights go [cpu]; meta traces shapes only\n"
            "  --dtype f32|bf16|f16      the weights' dtype [as stored]\n"
            "  --threads N               CPU threads\n"
            "  --mode MODE               execution mode: " KILN_MODES " (default: $KILN_MODE, else strict)\n\n"
            "Closes with a line on stderr: prompt tokens and their time and rate (prefill), then the\n"
            "tokens made one step at a time after the first, their time and rate (decode).\n");
}

static bool number(const char *flag, const char *text, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (!*text || *end || errno || !(v >= lo && v <= hi)) {
        fprintf(stderr, "kiln generate: %s %s: expected a number in [%g, %g]\n", flag, text, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

static bool integer(const char *flag, const char *text, long long *out) {
    double v;
    if (!number(flag, text, 0, 9.007199254740992e15, &v)) return false;
    if (v != (long long)v) {
        fprintf(stderr, "kiln generate: %s %s: expected a whole number\n", flag, text);
        return false;
    }
    *out = (long long)v;
    return true;
}

static bool append(const char **list, int *n, const char *flag, const char *value) {
    if (*n == MAX_LIST) {
        fprintf(stderr, "kiln generate: %s: at most %d\n", flag, MAX_LIST);
        return false;
    }
    list[(*n)++] = value;
    return true;
}

/* 1 parsed, 0 --help, -1 an error (printed). */
static int parse(int argc, char **argv, generate_args *a) {
    *a = (generate_args){.device = "cpu"};
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (strcmp(f, "--help") == 0 || strcmp(f, "-h") == 0) return 0;
        bool flag = true;
        if (strcmp(f, "--ignore-eos") == 0) a->ignore_eos = true;
        else if (strcmp(f, "--print-ids") == 0) a->print_ids = true;
        else if (strcmp(f, "--no-stream") == 0) a->no_stream = true;
        else flag = false;
        if (flag) continue;
        if (strncmp(f, "--", 2) != 0) {
            if (a->dir) {
                fprintf(stderr, "kiln generate: one model directory only ('%s' and '%s')\n", a->dir, f);
                return -1;
            }
            a->dir = f;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "kiln generate: %s needs a value (kiln generate --help lists the options)\n", f);
            return -1;
        }
        const char *v = argv[++i];
        long long n = 0;
        bool ok = true;
        if (strcmp(f, "--prompt") == 0) a->prompt = v;
        else if (strcmp(f, "--prompt-file") == 0) a->prompt_file = v;
        else if (strcmp(f, "--prompt-ids") == 0) ok = append(a->prompt_ids, &a->n_prompt_ids, f, v);
        else if (strcmp(f, "--stop") == 0) ok = append(a->stop, &a->n_stop, f, v);
        else if (strcmp(f, "--device") == 0) a->device = v;
        else if (strcmp(f, "--dtype") == 0) a->dtype = v;
        else if (strcmp(f, "--mode") == 0) a->mode = v;
        else if (strcmp(f, "--threads") == 0) ok = integer(f, v, &n) && n >= 1 && n <= 4096, a->threads = (int)n;
        else if (strcmp(f, "--max-new-tokens") == 0) ok = a->has_max_new = integer(f, v, &a->max_new) && a->max_new <= 1 << 30;
        else if (strcmp(f, "--top-k") == 0) ok = a->has_top_k = integer(f, v, &a->top_k) && a->top_k <= 1 << 30;
        else if (strcmp(f, "--seed") == 0) ok = a->has_seed = integer(f, v, &a->seed);
        else if (strcmp(f, "--temperature") == 0) ok = a->has_temperature = number(f, v, 0, 1e6, &a->temperature);
        else if (strcmp(f, "--top-p") == 0) ok = a->has_top_p = number(f, v, 1e-9, 1, &a->top_p);
        else if (strcmp(f, "--repetition-penalty") == 0) ok = a->has_penalty = number(f, v, 1e-6, 1e6, &a->penalty);
        else {
            fprintf(stderr, "kiln generate: unknown option '%s' (kiln generate --help lists them)\n", f);
            return -1;
        }
        if (!ok) return -1;
    }
    int sources = (a->prompt != NULL) + (a->prompt_file != NULL) + (a->n_prompt_ids > 0);
    const char *bad = !a->dir ? "a model directory is required"
                      : sources != 1 ? "give one of --prompt, --prompt-file or --prompt-ids"
                      : NULL;
    if (bad) {
        fprintf(stderr, "kiln generate: %s\n\n", bad);
        usage(stderr);
        return -1;
    }
    return 1;
}

/* ---- runtime and model ---------------------------------------------------------------------- */

static bool apply_runtime(const generate_args *a, kn_device *device) {
    kn_mode mode;
    if (a->threads) kn_set_num_threads(a->threads);
    if (!kn_device_parse(a->device, device)) {
        fprintf(stderr, "kiln generate: --device %s: not a device (cpu, cuda, meta)\n", a->device);
        return false;
    }
    if (!kn_device_available(*device)) {
        fprintf(stderr, "kiln generate: --device %s: %s (kiln info lists the devices)\n", a->device,
                device->type == KN_DEVICE_CUDA ? "this build of kiln has no CUDA backend" : "not available");
        return false;
    }
    if (kn_set_default_device(*device) != KN_OK) {
        fprintf(stderr, "kiln generate: --device %s: %s\n", a->device, kn_last_error());
        return false;
    }
    if (a->mode && (!kn_mode_parse(a->mode, &mode) || kn_set_mode(mode) != KN_OK)) {
        fprintf(stderr, "kiln generate: --mode %s: %s\n", a->mode,
                kn_last_status() ? kn_last_error() : "not a mode (" KILN_MODES ")");
        return false;
    }
    return true;
}

/* The tokenizer of dir: NULL without an error when the directory has none and prompts come
 * as ids; a tokenizer.json that fails to load is an error. */
static bool load_tokenizer(const generate_args *a, kn_tokenizer **out) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.json", a->dir);
    *out = NULL;
    bool needed = a->prompt || a->prompt_file || a->n_stop;
    if (access(path, F_OK) != 0 && !needed) return true;
    if (!(*out = kn_tokenizer_load(path))) {
        fprintf(stderr, "kiln generate: %s\n", kn_last_error());
        return false;
    }
    return true;
}

static bool options_from(const generate_args *a, lm_generate_options *o) {
    *o = lm_generate_defaults();
    if (lm_generation_config_load(a->dir, o) != KN_OK) {
        fprintf(stderr, "kiln generate: %s\n", kn_last_error());
        return false;
    }
    if (a->has_max_new) o->max_new_tokens = (int)a->max_new;
    if (a->has_temperature) o->sampling.temperature = a->temperature;
    if (a->has_top_k) o->sampling.top_k = (int)a->top_k;
    if (a->has_top_p) o->sampling.top_p = a->top_p;
    if (a->has_penalty) o->sampling.repetition_penalty = a->penalty;
    if (a->has_seed) o->sampling.seed = (uint64_t)a->seed;
    o->stop = a->stop;
    o->n_stop = a->n_stop;
    o->ignore_eos = a->ignore_eos;
    return true;
}

/* ---- prompts -------------------------------------------------------------------------------- */

typedef struct prompts {
    int n;
    char **text;          /* NULL entries for --prompt-ids */
    int32_t **ids;
    size_t *lens;
} prompts;

static void prompts_free(prompts *p) {
    for (int i = 0; i < p->n; i++) {
        free(p->text[i]);
        free(p->ids[i]);
    }
    free(p->text);
    free(p->ids);
    free(p->lens);
}

static bool prompts_add(prompts *p, char *text, int32_t *ids, size_t len) {
    char **t = realloc(p->text, (size_t)(p->n + 1) * sizeof *t);
    if (t) p->text = t;
    int32_t **i = t ? realloc(p->ids, (size_t)(p->n + 1) * sizeof *i) : NULL;
    if (i) p->ids = i;
    size_t *l = i ? realloc(p->lens, (size_t)(p->n + 1) * sizeof *l) : NULL;
    if (l) p->lens = l;
    if (!l) {
        free(text);
        free(ids);
        fprintf(stderr, "kiln generate: out of host memory\n");
        return false;
    }
    p->text[p->n] = text;
    p->ids[p->n] = ids;
    p->lens[p->n++] = len;
    return true;
}

static bool add_text(prompts *p, const kn_tokenizer *tok, const char *text, size_t len) {
    int32_t *ids;
    size_t n;
    char *copy = strndup(text, len);
    if (!copy || kn_tokenizer_encode(tok, text, len, true, &ids, &n) != KN_OK) {
        fprintf(stderr, "kiln generate: prompt %d: %s\n", p->n + 1, copy ? kn_last_error() : "out of host memory");
        free(copy);
        return false;
    }
    return prompts_add(p, copy, ids, n);
}

static bool add_ids(prompts *p, const char *list) {
    size_t cap = strlen(list) / 2 + 1, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    const char *s = list;
    while (ids && *s) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || errno || v < 0 || v > INT32_MAX || (*end && *end != ',')) {
            fprintf(stderr, "kiln generate: --prompt-ids %s: expected token ids as 1,2,3\n", list);
            free(ids);
            return false;
        }
        ids[n++] = (int32_t)v;
        s = *end ? end + 1 : end;
    }
    return prompts_add(p, NULL, ids, n);
}

static bool read_prompt_file(prompts *p, const kn_tokenizer *tok, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "kiln generate: %s: cannot open (%s)\n", path, strerror(errno));
        return false;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    bool ok = true;
    while (ok && (len = getline(&line, &cap, f)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
        if (len > 0) ok = add_text(p, tok, line, (size_t)len);
    }
    free(line);
    fclose(f);
    if (ok && p->n == 0) {
        fprintf(stderr, "kiln generate: %s: no prompts (one per line)\n", path);
        ok = false;
    }
    return ok;
}

static bool read_prompts(const generate_args *a, const kn_tokenizer *tok, prompts *p) {
    if (a->prompt) return add_text(p, tok, a->prompt, strlen(a->prompt));
    if (a->prompt_file) return read_prompt_file(p, tok, a->prompt_file);
    for (int i = 0; i < a->n_prompt_ids; i++)
        if (!add_ids(p, a->prompt_ids[i])) return false;
    return true;
}

/* ---- output --------------------------------------------------------------------------------- */

static bool stream_text(void *ctx, int row, const char *text, size_t len) {
    (void)ctx;
    (void)row;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return !ferror(stdout);
}

static void print_result(const generate_args *a, const prompts *p, const lm_generation *g, bool streamed) {
    for (int b = 0; b < g->n_rows; b++) {
        if (a->print_ids || !g->text) {
            putchar('[');
            for (size_t i = 0; i < g->n_ids[b]; i++) printf(i ? ", %d" : "%d", g->ids[b][i]);
            printf("]\n");
        } else if (streamed) {
            putchar('\n');
        } else if (g->n_rows == 1) {
            printf("%s\n", g->text[b]);
        } else {
            printf("--- %d: %s ---\n%s\n", b + 1, p->text[b] ? p->text[b] : "(ids)", g->text[b]);
        }
    }
    fflush(stdout);
}

static void print_timing(const lm_generation *g) {
    double pre = g->prefill_seconds, dec = g->decode_seconds;
    fprintf(stderr, "prefill: %lld tokens in %.3f s (%.0f tok/s); decode: %lld tokens in %.3f s (%.0f tok/s)\n",
            (long long)g->prefill_tokens, pre, pre > 0 ? g->prefill_tokens / pre : 0, (long long)g->decode_tokens, dec,
            dec > 0 ? g->decode_tokens / dec : 0);
}

/* The meta device holds shapes, not values: what the prefill of the batch would run. */
static bool trace_on_meta(lm *m, const prompts *p) {
    int64_t T = 0;
    for (int i = 0; i < p->n; i++) T = (int64_t)p->lens[i] > T ? (int64_t)p->lens[i] : T;
    const lm_config *c = lm_config_of(m);
    kn_meta_trace_reset();
    kn_no_grad_push();
    kn_scope_push();
    kn_tensor *ids = kn_zeros(KN_SHAPE(p->n, T), KN_I64);
    bool ok = ids && lm_forward_last(m, ids, NULL);
    kn_scope_pop();
    kn_no_grad_pop();
    if (!ok) {
        fprintf(stderr, "kiln generate: --device meta: %s\n", kn_last_error());
        return false;
    }
    kn_meta_trace t;
    kn_meta_trace_get(&t);
    printf("%s, %d layers, %d wide, vocab %d, %.1fM parameters (meta: shapes only, nothing generated)\n"
           "prefill of %d x %lld tokens: %lld ops, %.4g GFLOP, %.1f MB of outputs at the peak\n",
           lm_family_name(c->family), c->n_layers, c->hidden_size, c->vocab_size,
           kn_module_num_params(lm_module(m)) / 1e6, p->n, (long long)T, (long long)t.ops, t.flops / 1e9,
           t.peak_bytes / 1e6);
    return true;
}

int kiln_cmd_generate(int argc, char **argv) {
    generate_args a;
    int parsed = parse(argc, argv, &a);
    if (parsed <= 0) {
        if (parsed == 0) usage(stdout);
        return parsed == 0 ? 0 : 2;
    }
    struct stat st;
    if (stat(a.dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "kiln generate: %s: %s (a model directory with config.json, weights and tokenizer.json)\n",
                a.dir, stat(a.dir, &st) != 0 ? strerror(errno) : "not a directory");
        return 1;
    }
    char weights[4200];
    snprintf(weights, sizeof weights, "the weights in %s", a.dir);
    kiln_explain_sigbus("kiln generate", weights);
    kn_device device;
    lm_load_options lo = {.dtype = KN_DTYPE_COUNT};
    if (a.dtype && (!kn_dtype_parse(a.dtype, &lo.dtype) || !kn_dtype_is_float(lo.dtype))) {
        fprintf(stderr, "kiln generate: --dtype %s: not a float dtype (f32, bf16, f16)\n", a.dtype);
        return 2;
    }
    lm_generate_options o;
    if (!apply_runtime(&a, &device) || !options_from(&a, &o)) return 2;
    lo.device = device;
    kn_tokenizer *tok = NULL;
    prompts p = {0};
    lm *m = NULL;
    lm_generation g = {0};
    int rc = 1;
    if (!load_tokenizer(&a, &tok) || !read_prompts(&a, tok, &p)) goto done;
    if (!(m = lm_load(a.dir, &lo))) {
        fprintf(stderr, "kiln generate: %s\n", kn_last_error());
        goto done;
    }
    if (device.type == KN_DEVICE_META) {
        rc = trace_on_meta(m, &p) ? 0 : 1;
        goto done;
    }
    bool streamed = tok && p.n == 1 && !a.no_stream && !a.print_ids;
    if (streamed) o.on_text = stream_text;
    if (lm_generate(m, tok, p.n, (const int32_t *const *)p.ids, p.lens, &o, &g) != KN_OK) {
        if (streamed) putchar('\n');
        fprintf(stderr, "kiln generate: %s\n", kn_last_error());
        goto done;
    }
    print_result(&a, &p, &g, streamed);
    print_timing(&g);
    rc = 0;
done:
    lm_generation_free(&g);
    lm_free(m);
    prompts_free(&p);
    kn_tokenizer_free(tok);
    return rc;
}
