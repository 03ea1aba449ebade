/* Post-processors: the special tokens added around one encoded sequence (TemplateProcessing's
 * single template, RobertaProcessing and BertProcessing's cls/sep); ByteLevel only moves
 * offsets, which kiln does not return, so it adds nothing; Sequence is flattened at load. */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

typedef struct post_item {
    bool is_sequence; /* $A: the encoded text; otherwise the special token ids below */
    int32_t *ids;
    size_t n;
} post_item;

struct kn_post_processor {
    post_item *items; /* after flattening: the text wrapped by every processor in turn */
    size_t n;
};

void kn_post_processor_free(kn_post_processor *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n; i++) free(p->items[i].ids);
    free(p->items);
    free(p);
}

static bool push_item(kn_post_processor *p, post_item it) {
    post_item *q = realloc(p->items, (p->n + 1) * sizeof *q);
    if (!q) {
        free(it.ids);
        kn_set_error(KN_ERR_OOM, "tokenizer: out of memory");
        return false;
    }
    p->items = q;
    p->items[p->n++] = it;
    return true;
}

static bool push_ids(kn_post_processor *p, const int32_t *ids, size_t n) {
    int32_t *copy = malloc((n ? n : 1) * sizeof *copy);
    if (!copy) return kn_set_error(KN_ERR_OOM, "tokenizer: out of memory"), false;
    memcpy(copy, ids, n * sizeof *copy);
    return push_item(p, (post_item){false, copy, n});
}

/* Wraps the current template (p's items, which stand for the text so far) in a new one. */
static kn_status wrap(kn_post_processor *p, kn_post_processor *outer) {
    kn_post_processor merged = {0};
    for (size_t i = 0; i < outer->n; i++) {
        if (!outer->items[i].is_sequence) {
            if (!push_ids(&merged, outer->items[i].ids, outer->items[i].n)) goto oom;
            continue;
        }
        if (p->n == 0 && !push_item(&merged, (post_item){true, NULL, 0})) goto oom;
        for (size_t k = 0; k < p->n; k++)
            if (p->items[k].is_sequence ? !push_item(&merged, (post_item){true, NULL, 0})
                                        : !push_ids(&merged, p->items[k].ids, p->items[k].n))
                goto oom;
    }
    for (size_t i = 0; i < p->n; i++) free(p->items[i].ids);
    free(p->items);
    *p = merged;
    return KN_OK;
oom:
    for (size_t i = 0; i < merged.n; i++) free(merged.items[i].ids);
    free(merged.items);
    return KN_ERR_OOM;
}

/* ["<s>", 0] of Roberta/BertProcessing: the id. */
static bool token_pair_id(const cJSON *pair, int32_t *id) {
    return cJSON_IsArray(pair) && cJSON_GetArraySize(pair) == 2 && kn_tok_json_id(cJSON_GetArrayItem(pair, 1), id);
}

static kn_status load_template(kn_post_processor *outer, const cJSON *j, const char *file) {
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(j, "single"), *it;
    const cJSON *specials = cJSON_GetObjectItemCaseSensitive(j, "special_tokens");
    if (!cJSON_IsArray(single))
        return kn_set_error(KN_ERR_IO, "%s: post_processor TemplateProcessing: \"single\" is not a list", file);
    cJSON_ArrayForEach(it, single) {
        const cJSON *seq = cJSON_GetObjectItemCaseSensitive(it, "Sequence");
        const cJSON *special = cJSON_GetObjectItemCaseSensitive(it, "SpecialToken");
        const char *name = kn_tok_json_str(special, "id", "SpecialToken", false);
        if (seq) {
            if (!push_item(outer, (post_item){true, NULL, 0})) return KN_ERR_OOM;
        } else if (name) {
            const cJSON *ids = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(specials, name), "ids"), *v;
            if (!cJSON_IsArray(ids))
                return kn_set_error(KN_ERR_IO, "%s: post_processor TemplateProcessing: special token \"%s\" has no ids",
                                    file, name);
            int32_t buf[64];
            size_t n = 0;
            cJSON_ArrayForEach(v, ids) {
                if (n == 64 || !kn_tok_json_id(v, &buf[n]))
                    return kn_set_error(KN_ERR_IO, "%s: post_processor TemplateProcessing: special_tokens[\"%s\"].ids[%zu] "
                                        "is not an id (an integer in [0, %d])", file, name, n, INT32_MAX);
                n++;
            }
            if (!push_ids(outer, buf, n)) return KN_ERR_OOM;
        } else {
            return kn_set_error(KN_ERR_IO, "%s: post_processor TemplateProcessing: a \"single\" item is neither "
                                           "Sequence nor SpecialToken", file);
        }
    }
    return KN_OK;
}

static kn_status load_into(kn_post_processor *p, const cJSON *j, const char *file, int depth) {
    const char *type = kn_tok_json_str(j, "type", "post_processor", false);
    if (!type) return kn_tok_unsupported(file, "post_processor", j);
    if (strcmp(type, "Sequence") == 0 && depth < 8) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(j, "processors"), *it;
        if (!cJSON_IsArray(list)) return kn_set_error(KN_ERR_IO, "%s: post_processor.processors: not a list", file);
        cJSON_ArrayForEach(it, list) {
            kn_status st = load_into(p, it, file, depth + 1);
            if (st != KN_OK) return st;
        }
        return KN_OK;
    }
    if (strcmp(type, "ByteLevel") == 0) return KN_OK;
    kn_post_processor outer = {0};
    kn_status st = KN_OK;
    if (strcmp(type, "TemplateProcessing") == 0) {
        st = load_template(&outer, j, file);
    } else if (strcmp(type, "RobertaProcessing") == 0 || strcmp(type, "BertProcessing") == 0) {
        int32_t cls, sep;
        if (!token_pair_id(cJSON_GetObjectItemCaseSensitive(j, "cls"), &cls) ||
            !token_pair_id(cJSON_GetObjectItemCaseSensitive(j, "sep"), &sep))
            st = kn_set_error(KN_ERR_IO, "%s: post_processor %s: cls and sep must be [token, id], the id an integer "
                              "in [0, %d]", file, type, INT32_MAX);
        else if (!push_ids(&outer, &cls, 1) || !push_item(&outer, (post_item){true, NULL, 0}) ||
                 !push_ids(&outer, &sep, 1))
            st = KN_ERR_OOM;
    } else {
        st = kn_tok_unsupported(file, "post_processor", j);
    }
    if (st == KN_OK) st = wrap(p, &outer);
    for (size_t i = 0; i < outer.n; i++) free(outer.items[i].ids);
    free(outer.items);
    return st;
}

kn_post_processor *kn_post_processor_load(const cJSON *j, const kn_tokenizer *t, const char *file) {
    kn_post_processor *p = calloc(1, sizeof *p);
    if (!p) {
        kn_set_error(KN_ERR_OOM, "%s: out of memory", file);
        return NULL;
    }
    kn_status st = load_into(p, j, file, 0);
    for (size_t i = 0; st == KN_OK && i < p->n; i++)
        for (size_t k = 0; k < p->items[i].n; k++)
            if (p->items[i].ids[k] >= t->vocab_size)
                st = kn_set_error(KN_ERR_IO, "%s: post_processor: special token id %d is out of the vocabulary (%lld ids)",
                                  file, p->items[i].ids[k], (long long)t->vocab_size);
    if (st != KN_OK) {
        kn_post_processor_free(p);
        return NULL;
    }
    return p;
}

kn_status kn_post_processor_apply(const kn_post_processor *p, const kn_tok_ids *in, kn_tok_ids *out) {
    if (p->n == 0) {
        for (size_t k = 0; k < in->n; k++)
            if (!kn_tok_ids_push(out, in->v[k])) return KN_ERR_OOM;
        return KN_OK;
    }
    for (size_t i = 0; i < p->n; i++) {
        const int32_t *v = p->items[i].is_sequence ? in->v : p->items[i].ids;
        size_t n = p->items[i].is_sequence ? in->n : p->items[i].n;
        for (size_t k = 0; k < n; k++)
            if (!kn_tok_ids_push(out, v[k])) return KN_ERR_OOM;
    }
    return KN_OK;
}

kn_status kn_post_processor_parts(const kn_post_processor *p, kn_tok_ids *prefix, kn_tok_ids *suffix) {
    size_t sequences = 0;
    for (size_t i = 0; i < p->n; i++) {
        sequences += p->items[i].is_sequence;
        for (size_t k = 0; !p->items[i].is_sequence && k < p->items[i].n; k++)
            if (!kn_tok_ids_push(sequences ? suffix : prefix, p->items[i].ids[k])) return KN_ERR_OOM;
    }
    if (p->n && sequences != 1)
        return kn_set_error(KN_ERR_UNSUPPORTED, "tokenizer: the post-processor's template holds the text %zu times; "
                            "a text encoded in pieces needs it once", sequences);
    return KN_OK;
}
