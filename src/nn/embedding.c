/* Embedding and EmbeddingBag: rows of a [num, dim] table picked by integer indices. */
#include "core/error.h"
#include "nn/nn_internal.h"

static kn_tensor *embedding_forward(void *m, kn_tensor *x) { return kn_nn_embedding_forward(m, x); }

/* A module of `type` with a weight [num, dim] drawn from N(0, 1), as PyTorch. */
static void *table_new(size_t size, const char *type, int64_t num, int64_t dim, kn_dtype dtype,
                       kn_tensor **weight) {
    if (num <= 0 || dim <= 0)
        return kn_error_null(KN_ERR_ARG, "%s: sizes must be positive, not %lld x %lld", type, (long long)num,
                             (long long)dim);
    kn_module *m = kn_module_alloc(size, type);
    if (!m) return NULL;
    *weight = nn_new_param(m, "weight", KN_SHAPE(num, dim), dtype);
    if (*weight && kn_init_normal_(*weight, 0.0, 1.0) != KN_OK) m->failed = true;
    return m;
}

kn_nn_embedding *kn_nn_embedding_new(int64_t num_embeddings, int64_t dim, kn_dtype dtype) {
    kn_tensor *w = NULL;
    kn_nn_embedding *e = table_new(sizeof *e, "Embedding", num_embeddings, dim, dtype, &w);
    if (!e) return NULL;
    e->base.forward = embedding_forward;
    e->num_embeddings = num_embeddings, e->dim = dim, e->weight = w;
    return kn_module_check(e);
}

kn_tensor *kn_nn_embedding_forward(kn_nn_embedding *e, kn_tensor *indices) {
    if (!e) return kn_error_null_input("Embedding", 0), NULL;
    nn_enter(e);
    return nn_leave(kn_embedding(e->weight, indices));
}

kn_nn_embedding_bag *kn_nn_embedding_bag_new(int64_t num_embeddings, int64_t dim, kn_bag_mode mode, kn_dtype dtype) {
    if (mode != KN_BAG_SUM && mode != KN_BAG_MEAN && mode != KN_BAG_MAX)
        return kn_error_null(KN_ERR_ARG, "EmbeddingBag: unknown mode %d", (int)mode);
    kn_tensor *w = NULL;
    kn_nn_embedding_bag *e = table_new(sizeof *e, "EmbeddingBag", num_embeddings, dim, dtype, &w);
    if (!e) return NULL;
    e->num_embeddings = num_embeddings, e->dim = dim, e->mode = mode, e->weight = w;
    return kn_module_check(e);
}

kn_tensor *kn_nn_embedding_bag_forward(kn_nn_embedding_bag *e, kn_tensor *indices, kn_tensor *offsets,
                                       kn_tensor *per_sample_weights) {
    if (!e) return kn_error_null_input("EmbeddingBag", 0), NULL;
    nn_enter(e);
    return nn_leave(kn_embedding_bag(e->weight, indices, offsets, e->mode, per_sample_weights, false));
}
