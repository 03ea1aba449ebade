/* Loading a tokenizer.json: the file, its JSON, and each pipeline stage in turn. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/hf_internal.h"
#include "tok_internal.h"

/* A component that may be null in the file: NULL j (or null) gives *out NULL and KN_OK. */
#define LOAD_OPTIONAL(out, j, loader, ...)                                  \
    do {                                                                    \
        if ((j) && !cJSON_IsNull(j) && !((out) = loader((j), __VA_ARGS__))) \
            goto fail;                                                      \
    } while (0)

kn_tokenizer *kn_tokenizer_load(const char *path) {
    if (!path) {
        kn_set_error(KN_ERR_NULL, "kn_tokenizer_load: path is NULL");
        return NULL;
    }
    char file[4096];
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        snprintf(file, sizeof file, "%s/tokenizer.json", path);
    else
        snprintf(file, sizeof file, "%s", path);
    cJSON *root = kn_hf_read_json(file, KN_HF_JSON_MAX_BYTES);
    if (!root) return NULL;
    kn_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        kn_set_error(KN_ERR_OOM, "%s: out of memory", file);
        cJSON_Delete(root);
        return NULL;
    }
    if (kn_tok_json_check_utf8(root, file) != KN_OK) goto fail;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *trunc = cJSON_GetObjectItemCaseSensitive(root, "truncation");
    if (trunc && !cJSON_IsNull(trunc)) {
        kn_set_error(KN_ERR_IO, "%s: truncation is set; kiln's tokenizer does not truncate", file);
        goto fail;
    }
    if (!cJSON_IsObject(model)) {
        kn_set_error(KN_ERR_IO, "%s: no \"model\" object", file);
        goto fail;
    }
    LOAD_OPTIONAL(t->normalizer, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), kn_normalizer_load, file);
    LOAD_OPTIONAL(t->pre_tokenizer, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), kn_pre_tokenizer_load, file);
    if (!(t->model = kn_bpe_load(model, file))) goto fail;
    if (kn_added_vocab_load(&t->added, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), t->normalizer, file) != KN_OK)
        goto fail;
    t->vocab_size = kn_bpe_vocab_size(t->model);
    for (size_t i = 0; i < t->added.n; i++)
        if (t->added.tokens[i].id >= t->vocab_size) t->vocab_size = (int64_t)t->added.tokens[i].id + 1;
    LOAD_OPTIONAL(t->post, cJSON_GetObjectItemCaseSensitive(root, "post_processor"), kn_post_processor_load, t, file);
    LOAD_OPTIONAL(t->decoder, cJSON_GetObjectItemCaseSensitive(root, "decoder"), kn_decoder_load, file);
    cJSON_Delete(root);
    return t;
fail:
    cJSON_Delete(root);
    kn_tokenizer_free(t);
    return NULL;
}

void kn_tokenizer_free(kn_tokenizer *t) {
    if (!t) return;
    kn_normalizer_free(t->normalizer);
    kn_pre_tokenizer_free(t->pre_tokenizer);
    kn_bpe_free(t->model);
    kn_added_vocab_free(&t->added);
    kn_post_processor_free(t->post);
    kn_decoder_free(t->decoder);
    free(t);
}

int64_t kn_tokenizer_vocab_size(const kn_tokenizer *t) { return t ? t->vocab_size : 0; }

int32_t kn_tokenizer_token_to_id(const kn_tokenizer *t, const char *token) {
    if (!t || !token) return -1;
    size_t n = strlen(token);
    int32_t k = kn_strmap_get(&t->added.by_content, token, n);
    return k >= 0 ? t->added.tokens[k].id : kn_bpe_token_to_id(t->model, token, n);
}

const char *kn_tokenizer_id_to_token(const kn_tokenizer *t, int32_t id) {
    if (!t) return NULL;
    int32_t k = kn_tok_idmap_get(&t->added.by_id, id);
    return k >= 0 ? t->added.tokens[k].content : kn_bpe_id_to_token(t->model, id);
}

bool kn_tokenizer_is_special(const kn_tokenizer *t, int32_t id) {
    int32_t k = t ? kn_tok_idmap_get(&t->added.by_id, id) : -1;
    return k >= 0 && t->added.tokens[k].special;
}
