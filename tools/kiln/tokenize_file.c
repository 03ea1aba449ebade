/* `kiln tokenize MODEL_DIR --input FILE --output TOKENS.bin` (tokenize_file.h). The file is read
 * in blocks and goes through kn_encoder, which holds one segment of text at a time; tokens go
 * to the output as they come, through an atomic token writer (the file appears at the end,
 * whole, or not at all). Documents, as nanoGPT's and llm.c's data preparation makes them: each
 * is tokenized on its own (tokenizer(doc)), with the EOS token between them. */
#define _GNU_SOURCE /* memmem */
#include "tokenize_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "progress.h"

enum { BLOCK = 1 << 20 };

typedef struct job {
    const tokenize_file_options *o;
    kn_encoder *enc;
    kn_token_writer *out;
    int32_t eos;         /* -1: no documents */
    char *sep;           /* the document separator's bytes (with eos) */
    size_t sep_len;
    int64_t docs;        /* documents finished */
    bool in_doc;         /* text of the current document has been pushed */
    long long doc_start; /* the current document's offset in the input */
} job;

static int fail(const job *j, const char *what) {
    fprintf(stderr, "kiln tokenize: %s: ", j->o->input);
    if (j->eos >= 0) fprintf(stderr, "document %lld (from byte %lld): ", (long long)j->docs + 1, j->doc_start);
    fprintf(stderr, "%s\n", what ? what : kn_last_error());
    return 1;
}

static int put(job *j, const int32_t *ids, size_t n) {
    /* Ids are never negative, so their bits are the uint32 the writer takes. */
    return kn_token_writer_put(j->out, (const uint32_t *)ids, n) == KN_OK ? 0 : fail(j, NULL);
}

/* Text of the current document; the EOS of the one before goes first. */
static int push(job *j, const char *text, size_t len) {
    if (!len) return 0;
    if (!j->in_doc && j->docs > 0 && put(j, &j->eos, 1)) return 1;
    j->in_doc = true;
    const int32_t *ids;
    size_t n;
    if (kn_encoder_push(j->enc, text, len, &ids, &n) != KN_OK) return fail(j, NULL);
    return put(j, ids, n);
}

/* Ends the current document; one with no text is left out. */
static int end_doc(job *j, long long next_start) {
    int rc = 0;
    if (j->in_doc) {
        const int32_t *ids;
        size_t n;
        rc = kn_encoder_finish(j->enc, &ids, &n) == KN_OK ? put(j, ids, n) : fail(j, NULL);
        j->docs++;
    }
    j->in_doc = false;
    j->doc_start = next_start;
    return rc;
}

/* The separator as typed, with \n, \t and \\ made into their bytes (in place); its length. */
static size_t unescape(char *s) {
    size_t n = 0;
    for (const char *p = s; *p; p++) {
        if (p[0] == '\\' && (p[1] == 'n' || p[1] == 't' || p[1] == '\\')) {
            p++;
            s[n++] = *p == 'n' ? '\n' : *p == 't' ? '\t' : '\\';
        } else {
            s[n++] = *p;
        }
    }
    return n;
}

/* A JSON file of the model directory, or NULL: absent (*bad false) or unreadable (*bad, said). */
static cJSON *model_json(const char *dir, const char *name, char *path, size_t cap, bool *bad) {
    struct stat sb;
    snprintf(path, cap, "%s/%s", dir, name);
    if (stat(path, &sb) != 0) return NULL;
    cJSON *j = kn_hf_read_json(path, KN_HF_CONFIG_MAX_BYTES);
    if (!j) fprintf(stderr, "kiln tokenize: %s\n", kn_last_error());
    *bad = !j;
    return j;
}

static int32_t eos_of_token(const kn_tokenizer *t, const char *name, const char *where) {
    int32_t id = kn_tokenizer_token_to_id(t, name);
    if (id < 0) fprintf(stderr, "kiln tokenize: the EOS token \"%s\" (%s) is not a token of the tokenizer\n", name, where);
    return id;
}

/* The id of the EOS token: --eos-token, else the model directory's tokenizer_config.json
 * "eos_token" (what transformers' tokenizer.eos_token is), else config.json "eos_token_id"
 * (its first, for a list); -1, said, if none. */
static int32_t find_eos(const kn_tokenizer *t, const tokenize_file_options *o) {
    if (o->eos_token) return eos_of_token(t, o->eos_token, "--eos-token");
    char dir[4096], path[4200];
    struct stat sb;
    snprintf(dir, sizeof dir, "%s", o->model_dir);
    if (stat(dir, &sb) == 0 && !S_ISDIR(sb.st_mode)) { /* tokenizer.json itself: its directory */
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = '\0';
        else
            strcpy(dir, ".");
    }
    bool bad = false;
    int32_t id = -1;
    cJSON *j = model_json(dir, "tokenizer_config.json", path, sizeof path, &bad);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "eos_token");
    if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "content");
    if (cJSON_IsString(v)) id = eos_of_token(t, v->valuestring, path);
    bool found = cJSON_IsString(v);
    cJSON_Delete(j);
    if (found || bad) return id;
    j = model_json(dir, "config.json", path, sizeof path, &bad);
    v = cJSON_GetObjectItemCaseSensitive(j, "eos_token_id");
    if (cJSON_IsArray(v)) v = cJSON_GetArrayItem(v, 0);
    if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < (double)kn_tokenizer_vocab_size(t) &&
        v->valuedouble == (double)(int32_t)v->valuedouble)
        id = (int32_t)v->valuedouble;
    else if (j)
        fprintf(stderr, "kiln tokenize: %s: \"eos_token_id\" is missing or not an id of the tokenizer; name the EOS "
                        "token with --eos-token\n", path);
    else if (!bad)
        fprintf(stderr, "kiln tokenize: --eos-between-docs needs the EOS token, and %s has neither a "
                        "tokenizer_config.json with eos_token nor a config.json; name it with --eos-token\n", dir);
    cJSON_Delete(j);
    return id;
}

/* Reads the input in blocks, cutting documents at the separator (which may straddle blocks). */
static int read_all(job *j, FILE *in, long long size) {
    const char *sep = j->sep;
    size_t sep_len = j->sep_len;
    char *buf = malloc(BLOCK + sep_len);
    if (!buf) return fail(j, "out of memory");
    long long at = 0; /* the input offset of buf[0] */
    size_t carry = 0; /* bytes kept from the last block: a separator may start there */
    int rc = 0;
    bool terminal = progress_on_terminal() && size > BLOCK;
    for (bool eof = false; !eof && rc == 0;) {
        size_t got = fread(buf + carry, 1, BLOCK, in), n = carry + got, done = 0;
        if (ferror(in)) {
            rc = fail(j, "cannot read it");
            break;
        }
        eof = got < BLOCK;
        char *hit;
        while (rc == 0 && sep_len && (hit = memmem(buf + done, n - done, sep, sep_len))) {
            size_t end = (size_t)(hit - buf);
            rc = push(j, buf + done, end - done);
            done = end + sep_len;
            if (rc == 0) rc = end_doc(j, at + (long long)done);
        }
        carry = eof || !sep_len ? 0 : n - done < sep_len - 1 ? n - done : sep_len - 1;
        if (rc == 0) rc = push(j, buf + done, n - done - carry);
        memmove(buf, buf + n - carry, carry);
        at += (long long)(n - carry);
        if (terminal)
            progress_bar(eof ? size : at, size, "%.1f/%.1f MB  %lld tokens ", at / 1e6, size / 1e6,
                         (long long)kn_token_writer_count(j->out));
    }
    if (rc == 0) rc = end_doc(j, at);
    free(buf);
    return rc;
}

static int open_input(const tokenize_file_options *o, FILE **in, long long *size) {
    struct stat sb;
    if (!(*in = fopen(o->input, "rb")) || fstat(fileno(*in), &sb) != 0 || S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "kiln tokenize: --input %s: cannot read it\n", o->input);
        if (*in) fclose(*in);
        *in = NULL;
        return 1;
    }
    *size = S_ISREG(sb.st_mode) ? (long long)sb.st_size : 0;
    return 0;
}

/* The output format of --format for t; 0, or 2 with a message. */
static int pick_format(const kn_tokenizer *t, const char *name, kn_token_format *format) {
    int64_t vocab = kn_tokenizer_vocab_size(t);
    bool automatic = strcmp(name, "auto") == 0;
    if (!automatic && strcmp(name, "u16") != 0 && strcmp(name, "u32") != 0) {
        fprintf(stderr, "kiln tokenize: --format %s: not a token file format (auto, u16, u32)\n", name);
        return 2;
    }
    if (strcmp(name, "u16") == 0 && vocab > 65536) {
        fprintf(stderr, "kiln tokenize: --format u16: the tokenizer has %lld ids, more than uint16 holds; use --format "
                        "u32\n", (long long)vocab);
        return 2;
    }
    *format = strcmp(name, "u32") == 0 || (automatic && vocab > 65536) ? KN_TOKENS_U32 : KN_TOKENS_U16;
    return 0;
}

/* --eos-between-docs: the separator's bytes and the EOS id into j; 0, or the exit code. */
static int prepare_docs(job *j, const kn_tokenizer *t) {
    if (!(j->sep = strdup(j->o->doc_separator)) || (j->sep_len = unescape(j->sep)) == 0) {
        fprintf(stderr, "kiln tokenize: --doc-separator is empty\n");
        return 2;
    }
    return (j->eos = find_eos(t, j->o)) < 0;
}

int tokenize_file(const kn_tokenizer *t, const tokenize_file_options *o) {
    kn_token_format format;
    job j = {.o = o, .eos = -1};
    FILE *in = NULL;
    long long size = 0;
    int rc = pick_format(t, o->format, &format);
    if (rc == 0 && o->eos_between_docs) rc = prepare_docs(&j, t);
    if (rc == 0) rc = open_input(o, &in, &size);
    if (rc == 0) {
        j.enc = kn_encoder_new(t, o->add_special);
        j.out = j.enc ? kn_token_writer_open(o->output, format) : NULL;
        rc = j.out ? read_all(&j, in, size) : fail(&j, NULL);
    }
    long long count = (long long)kn_token_writer_count(j.out);
    if (rc == 0 && count == 0) {
        fprintf(stderr, "kiln tokenize: --input %s holds no text to tokenize\n", o->input);
        rc = 1;
    }
    if (rc == 0 && kn_token_writer_commit(j.out) != KN_OK) {
        fprintf(stderr, "kiln tokenize: --output %s: %s\n", o->output, kn_last_error());
        rc = 1;
    } else if (rc != 0) {
        kn_token_writer_abort(j.out);
    } else {
        fprintf(stderr, "kiln tokenize: %lld tokens", count);
        if (j.eos >= 0) fprintf(stderr, " in %lld documents", (long long)j.docs);
        fprintf(stderr, " -> %s (%s)\n", o->output, format == KN_TOKENS_U16 ? "u16" : "u32");
    }
    if (in) fclose(in);
    kn_encoder_free(j.enc);
    free(j.sep);
    return rc;
}
