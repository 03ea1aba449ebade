/* Op signatures (src/ops/op_table.h, op_attrs.c): each .def entry's inputs and typed
 * attributes become the node's attribute struct, the signature `kiln ops` prints, attribute
 * hashing, equality and printing, and the packed positions of optional inputs. */
#include <math.h>
#include <string.h>

#include "exec/interpose.h"
#include "harness.h"
#include "kiln/kiln.h"
#include "kiln/optable.h"
#include "graph/node.h"
#include "ops/grad.h"
#include "ops/op_rules.h"
#include "ops/op_table.h"

static const char *signature(kn_op_id op) {
    static char buf[512];
    kn_op_signature(op, buf, sizeof buf);
    return buf;
}

static void test_signature_text(void) {
    CHECK_MSG(strcmp(signature(KN_OP_layer_norm), "layer_norm(x, weight?, bias?; inner: i64, eps: f64)") == 0, "%s",
              signature(KN_OP_layer_norm));
    CHECK_MSG(strcmp(signature(KN_OP_add), "add(x, y)") == 0, "%s", signature(KN_OP_add));
    CHECK_MSG(strcmp(signature(KN_OP_clamp), "clamp(x; a: f64, b: f64)") == 0, "%s", signature(KN_OP_clamp));
    CHECK_MSG(strcmp(signature(KN_OP_cat), "cat(xs...; dim: i64)") == 0, "%s", signature(KN_OP_cat));
    CHECK_MSG(strcmp(signature(KN_OP_sum), "sum(x; dims: dims, keepdim: bool)") == 0, "%s", signature(KN_OP_sum));
    CHECK_MSG(strcmp(signature(KN_OP_conv2d),
                     "conv2d(x, weight, bias?; stride: i64[2], padding: i64[2], dilation: i64[2], groups: i64)") == 0,
              "%s", signature(KN_OP_conv2d));
    CHECK_MSG(strcmp(signature(KN_OP_embedding), "embedding(weight, indices)") == 0, "%s", signature(KN_OP_embedding));
    /* creation ops carry their output's shape and dtype (the shape rule reads them) */
    CHECK_MSG(strcmp(signature(KN_OP_eye), "eye(shape: dims, dtype: i64)") == 0, "%s", signature(KN_OP_eye));
    /* truncation reports the length wanted */
    char small[8];
    size_t want = kn_op_signature(KN_OP_layer_norm, small, sizeof small);
    CHECK(want == strlen("layer_norm(x, weight?, bias?; inner: i64, eps: f64)") && strlen(small) == 7);
    CHECK(kn_op_signature(-1, small, sizeof small) == 0 && kn_op_signature(KN_OP_COUNT, small, sizeof small) == 0);
}

static void test_public_params(void) {
    int ln = kn_op_lookup("layer_norm");
    CHECK(kn_op_param_count(ln) == 5);
    kn_op_param_info p;
    CHECK(kn_op_get_param(ln, 1, &p) && strcmp(p.name, "weight") == 0 && p.input && p.optional && !p.variadic &&
          strcmp(p.type, "tensor") == 0);
    CHECK(kn_op_get_param(ln, 4, &p) && strcmp(p.name, "eps") == 0 && !p.input && strcmp(p.type, "f64") == 0);
    CHECK(!kn_op_get_param(ln, 5, &p) && !kn_op_get_param(-1, 0, &p) && kn_op_param_count(KN_OP_COUNT) == 0);
    CHECK(kn_op_get_param(KN_OP_cat, 0, &p) && p.variadic);
}

/* Every entry: named parameters, inputs before attributes, a variadic input last, at most 32
 * input slots (the absent mask), and attributes that lie inside the node's storage. */
static void test_every_entry_is_well_formed(void) {
    for (int op = 0; op < KN_OP_COUNT; op++) {
        bool seen_attr = false, seen_variadic = false;
        int slots = 0;
        for (const kn_param *p = kn_op_params(op); p->name; p++) {
            bool input = p->kind <= KN_PARAM_INS;
            CHECK_MSG(*p->name, "%s: a parameter without a name", kn_op_name(op));
            CHECK_MSG(!(input && seen_attr), "%s: input %s after an attribute", kn_op_name(op), p->name);
            CHECK_MSG(!(input && seen_variadic), "%s: input %s after a variadic one", kn_op_name(op), p->name);
            seen_attr |= !input;
            seen_variadic |= p->kind == KN_PARAM_INS;
            slots += input;
            CHECK_MSG(input || offsetof(kn_attrs, copy) + p->offset < sizeof(kn_attrs), "%s.%s outside the node",
                      kn_op_name(op), p->name);
        }
        CHECK_MSG(slots <= 32 && slots == kn_op_input_slots(op), "%s: %d input slots", kn_op_name(op), slots);
        /* and the gradient half of the table lists it (grad_table.c also checks at build time) */
        CHECK_MSG(kn_grad_table[op].fn || kn_grad_table[op].nondiff, "%s is not in grad.def", kn_op_name(op));
    }
}

static void test_hash_equality_and_printing(void) {
    kn_attrs a = {0}, b = {0};
    a.layer_norm = (kn_attrs_layer_norm){.inner = 768, .eps = 1e-5};
    b.layer_norm = a.layer_norm;
    CHECK(kn_attrs_equal(KN_OP_layer_norm, &a, &b) && kn_attrs_hash(KN_OP_layer_norm, &a) == kn_attrs_hash(KN_OP_layer_norm, &b));
    b.layer_norm.eps = 1e-6;
    CHECK(!kn_attrs_equal(KN_OP_layer_norm, &a, &b) && kn_attrs_hash(KN_OP_layer_norm, &a) != kn_attrs_hash(KN_OP_layer_norm, &b));
    b.layer_norm.eps = 1e-5;
    b.absent = 1u << KN_SLOT(layer_norm, weight); /* the same attributes, another input set */
    CHECK(!kn_attrs_equal(KN_OP_layer_norm, &a, &b) && kn_attrs_hash(KN_OP_layer_norm, &a) != kn_attrs_hash(KN_OP_layer_norm, &b));

    char text[128];
    kn_attrs_format(KN_OP_layer_norm, &a, text, sizeof text);
    CHECK_MSG(strcmp(text, "inner=768, eps=1e-05") == 0, "%s", text);

    /* dims count up to their length: what lies beyond is not the attribute */
    kn_attrs r = {0}, s = {0};
    r.sum = (kn_attrs_sum){.dims = {.n = 2, .v = {0, 2}}, .keepdim = true};
    s.sum = r.sum;
    s.sum.dims.v[5] = 9;
    CHECK(kn_attrs_equal(KN_OP_sum, &r, &s) && kn_attrs_hash(KN_OP_sum, &r) == kn_attrs_hash(KN_OP_sum, &s));
    kn_attrs_format(KN_OP_sum, &r, text, sizeof text);
    CHECK_MSG(strcmp(text, "dims=[0, 2], keepdim=true") == 0, "%s", text);
    kn_attrs_format(KN_OP_add, &r, text, sizeof text);
    CHECK(strcmp(text, "") == 0);

    CHECK(kn_attrs_finite(KN_OP_layer_norm, &a));
    a.layer_norm.eps = NAN;
    CHECK(!kn_attrs_finite(KN_OP_layer_norm, &a));
}

/* The a, b of scalar expressions, as the code generators read them for any elementwise op. */
static void test_scalars(void) {
    kn_attrs at = {0};
    kn_op_set_scalars(KN_OP_clamp, &at, -1, 2);
    CHECK(at.clamp.a == -1 && at.clamp.b == 2);
    double ab[2];
    kn_op_scalars(KN_OP_clamp, &at, ab);
    CHECK(ab[0] == -1 && ab[1] == 2);
    kn_attrs lr = {0};
    kn_op_set_scalars(KN_OP_leaky_relu, &lr, 0.1, 5); /* it has no b */
    kn_op_scalars(KN_OP_leaky_relu, &lr, ab);
    CHECK(lr.leaky_relu.a == 0.1 && ab[0] == 0.1 && ab[1] == 0);
}

/* Optional inputs are named: an absent one packs the rest, and KN_INPUT finds each by name. */
static void test_optional_inputs(void) {
    kn_tensor *t[3] = {(kn_tensor *)1, (kn_tensor *)2, (kn_tensor *)3}; /* never dereferenced */
    kn_node n = {.op = KN_OP_batch_norm, .n_in = 3, .in = t};
    n.attrs.absent = 1u << KN_SLOT(batch_norm, running_mean) | 1u << KN_SLOT(batch_norm, running_var);
    CHECK(KN_INPUT(&n, batch_norm, x) == t[0]);
    CHECK(KN_INPUT(&n, batch_norm, running_mean) == NULL && KN_INPUT(&n, batch_norm, running_var) == NULL);
    CHECK(KN_INPUT(&n, batch_norm, weight) == t[1] && KN_INPUT(&n, batch_norm, bias) == t[2]);
    CHECK(kn_input_pos(&n.attrs, KN_SLOT(batch_norm, bias)) == 2);
}

/* Through the API: layer_norm with a bias and no weight reads the bias by name (slot 2 at
 * position 1), matching the composition x_hat + bias. */
static void test_absent_weight_through_the_api(void) {
    kn_scope_push();
    kn_tensor *x = kn_randn(KN_SHAPE(3, 4), KN_F64), *bias = kn_randn(KN_SHAPE(4), KN_F64);
    kn_tensor *got = kn_layer_norm(x, KN_SHAPE(4), NULL, bias, 1e-5);
    kn_tensor *want = kn_add(kn_layer_norm(x, KN_SHAPE(4), NULL, NULL, 1e-5), bias);
    double diff = -1;
    CHECK(got && want && kn_item(kn_amax(kn_abs(kn_sub(got, want)), KN_ALL_DIMS, false), &diff) == KN_OK);
    CHECK_MSG(diff >= 0 && diff < 1e-12, "max difference %g", diff);
    kn_scope_pop();
}

/* The elementwise families' shape and dtype rule is the table entry's, and the API follows it. */
static void test_elementwise_rule_behind_the_entry(void) {
    for (int op = 0; op < KN_OP_COUNT; op++)
        if (kn_op_table[op].kind == KN_KIND_ELEMENTWISE && op != KN_OP_copy)
            CHECK_MSG(kn_op_table[op].infer == kn_infer_elementwise, "%s has no rule", kn_op_name(op));
    kn_scope_push();
    kn_tensor *a = kn_zeros(KN_SHAPE(2, 1), KN_I32), *b = kn_zeros(KN_SHAPE(3), KN_I32);
    kn_op_infer r;
    char why[256];
    CHECK(kn_op_apply_rule(KN_OP_eq, 2, (kn_tensor *[]){a, b}, NULL, &r, why, sizeof why) == KN_OK);
    CHECK(r.out[0] == KN_BOOL && r.compute == KN_I32 && r.shape[0].n == 2 && r.shape[0].v[0] == 2 && r.shape[0].v[1] == 3);
    CHECK(kn_op_apply_rule(KN_OP_exp, 1, &a, NULL, &r, why, sizeof why) == KN_OK);
    CHECK(r.out[0] == KN_F32 && r.compute == KN_F32);
    kn_tensor *c = kn_zeros(KN_SHAPE(4), KN_I32);
    CHECK(kn_op_apply_rule(KN_OP_add, 2, (kn_tensor *[]){b, c}, NULL, &r, why, sizeof why) == KN_ERR_SHAPE);
    CHECK_MSG(strstr(why, "shapes do not broadcast"), "%s", why);
    kn_tensor *e = kn_eq(a, b); /* the API gives what the rule says */
    CHECK(e && kn_dtype_of(e) == KN_BOOL && kn_shape_of(e).n == 2 && kn_shape_of(e).v[1] == 3);
    kn_scope_pop();
}

/* The reductions' rule likewise: shape from the normalized dims and keepdim, dtype by op. */
static void test_reduction_rule_behind_the_entry(void) {
    for (int op = 0; op < KN_OP_COUNT; op++)
        if (kn_op_table[op].kind == KN_KIND_REDUCTION)
            CHECK_MSG(kn_op_table[op].infer == kn_infer_reduce, "%s has no rule", kn_op_name(op));
    kn_scope_push();
    kn_tensor *x = kn_zeros(KN_SHAPE(2, 3, 4), KN_I32);
    kn_attrs at = {.sum = {.dims = {.n = 2, .v = {0, 2}}, .keepdim = true}};
    kn_op_infer r;
    char why[64];
    CHECK(kn_op_apply_rule(KN_OP_sum, 1, &x, &at, &r, why, sizeof why) == KN_OK);
    CHECK(r.out[0] == KN_I64 && r.shape[0].n == 3 && r.shape[0].v[0] == 1 && r.shape[0].v[1] == 3 && r.shape[0].v[2] == 1);
    at.any.keepdim = false;
    CHECK(kn_op_apply_rule(KN_OP_any, 1, &x, &at, &r, why, sizeof why) == KN_OK);
    CHECK(r.out[0] == KN_BOOL && r.shape[0].n == 1 && r.shape[0].v[0] == 3);
    CHECK(kn_op_apply_rule(KN_OP_amax, 1, &x, &at, &r, why, sizeof why) == KN_OK && r.out[0] == KN_I32);
    kn_tensor *s = kn_sum(x, KN_DIMS(0, 2), true); /* the API gives what the rule says */
    CHECK(s && kn_dtype_of(s) == KN_I64 && kn_shape_of(s).n == 3 && kn_shape_of(s).v[1] == 3);
    kn_scope_pop();
}

/* Every entry has a shape rule but the value-dependent ones (KN_OPF_SYNC: the kernel allocates)
 * and fused (made by the scheduler from ruled nodes). */
static void test_every_entry_has_a_rule(void) {
    for (int op = 0; op < KN_OP_COUNT; op++) {
        bool exempt = (kn_op_table[op].flags & KN_OPF_SYNC) || op == KN_OP_fused;
        CHECK_MSG(kn_op_table[op].infer || exempt, "%s has no shape rule", kn_op_name(op));
    }
    char why[128];
    kn_op_infer r;
    CHECK(kn_op_apply_rule(KN_OP_nonzero, 0, NULL, NULL, &r, why, sizeof why) == KN_ERR_INTERNAL && r.n_out == 0);
}

/* An interposer that runs each recorded node's rule on the node's inputs and attributes and
 * compares it with the outputs the API function gave the node. */
static int rule_checked[KN_OP_COUNT], rule_mismatches;
static kn_status check_rule(const kn_node *n, const kn_backend *b, void **state) {
    (void)b;
    if (!kn_op_table[n->op].infer || n->op == KN_OP_fused) return KN_OK;
    kn_op_infer r;
    char why[600];
    kn_status st = kn_op_apply_rule(n->op, n->n_in, n->in, &n->attrs, &r, why, sizeof why);
    bool same = st == KN_OK && r.n_out == n->n_out;
    for (int i = 0; same && i < n->n_out; i++) {
        const kn_tensor *o = n->out[i];
        same = r.out[i] == o->dtype && r.shape[i].n == o->ndim;
        for (int d = 0; same && d < o->ndim; d++) same = r.shape[i].v[d] == o->shape[d];
    }
    if (!same) {
        rule_mismatches++;
        fprintf(stderr, "rule of %s disagrees with its API function (%s)\n", kn_op_name(n->op), st == KN_OK ? "" : why);
    }
    rule_checked[n->op]++;
    return KN_OK;
}
static const kn_interposer rule_checker = {.name = "rule_checker", .order = 350, .modes = KN_ALL_MODES, .record = check_rule};

/* A sample of every family through the API: each node's rule gives what the API gave. */
static void test_rules_agree_with_the_api(void) {
    kn_scope_push();
    int before = rule_mismatches;
    kn_tensor *x = kn_randn(KN_SHAPE(2, 3, 4), KN_F32), *m = kn_randn(KN_SHAPE(4, 5), KN_F64);
    kn_tensor *idx = kn_arange(0, 2, 1, KN_I64), *img = kn_randn(KN_SHAPE(2, 4, 6, 6), KN_F32);
    /* linalg, layout, casts */
    CHECK(kn_matmul(x, m) && kn_cat((kn_tensor *[]){x, x}, 2, 1) && kn_pad(x, (int64_t[]){1, 2}, 2, KN_PAD_CONSTANT, 0));
    CHECK(kn_roll(x, (int64_t[]){1}, KN_DIMS(2)) && kn_repeat(x, KN_SHAPE(1, 2, 1, 1)) && kn_tril(x, 0));
    CHECK(kn_cast(x, KN_I32) && kn_eye(3, 2, KN_F64) && kn_linspace(0, 1, 5, KN_F32) && kn_bernoulli(kn_rand_like(x)));
    /* index */
    CHECK(kn_index_select(x, 1, idx) && kn_embedding(m, kn_reshape(idx, KN_SHAPE(1, 2))) &&
          kn_gather(x, 2, kn_zeros(KN_SHAPE(2, 3, 1), KN_I64)));
    CHECK(kn_scatter_add(x, 2, kn_zeros(KN_SHAPE(2, 3, 1), KN_I64), kn_ones(KN_SHAPE(2, 3, 1), KN_F32)) &&
          kn_index_add(x, 0, idx, x, 1) && kn_masked_fill(x, kn_gt(x, kn_scalar(0, KN_F32)), 0));
    CHECK(kn_index_put(x, (kn_tensor *[]){idx}, 1, kn_scalar(1, KN_F32), true) &&
          kn_multinomial(kn_rand(KN_SHAPE(4), KN_F32), 2, true) &&
          kn_embedding_bag(m, kn_zeros(KN_SHAPE(2, 3), KN_I64), NULL, KN_BAG_MEAN, NULL, false));
    kn_tensor *v = NULL, *i = NULL;
    CHECK(kn_topk(x, 2, -1, true, true, &v, &i) == KN_OK && kn_max_dim(x, 1, true, &v, &i) == KN_OK);
    /* reductions and scans */
    CHECK(kn_sum(x, KN_DIMS(0, 2), false) && kn_norm(x, INFINITY, KN_ALL_DIMS, false) && kn_cumsum(kn_cast(x, KN_I32), 1));
    /* nn */
    kn_tensor *w = kn_requires_grad(kn_randn(KN_SHAPE(3, 4, 3, 3), KN_F32), true);
    kn_tensor *ln_w = kn_requires_grad(kn_ones(KN_SHAPE(4), KN_F32), true);
    kn_tensor *conv = kn_conv2d(img, w, NULL, (kn_conv_opts){.padding = {1, 1}});
    CHECK(conv && kn_conv_transpose2d(img, kn_randn(KN_SHAPE(4, 2, 3, 3), KN_F32), NULL,
                                      (kn_conv_opts){.stride = {2, 2}, .output_padding = {1, 1}}));
    CHECK(kn_max_pool2d(img, (kn_pool_opts){.kernel = {3, 3}, .stride = {2, 2}, .ceil_mode = true}) &&
          kn_adaptive_avg_pool2d(img, 2, 3) && kn_upsample_bilinear2d(img, 7, 9, true));
    kn_tensor *rm = kn_zeros(KN_SHAPE(4), KN_F32), *rv = kn_ones(KN_SHAPE(4), KN_F32);
    kn_tensor *bn = kn_batch_norm(img, rm, rv, ln_w, NULL, true, 0.1, 1e-5);
    CHECK(bn && kn_group_norm(img, 2, NULL, NULL, 1e-5));
    /* losses, attention, and their backward ops through autograd */
    kn_tensor *q = kn_requires_grad(kn_randn(KN_SHAPE(2, 5, 4), KN_F32), true);
    kn_tensor *att = kn_scaled_dot_product_attention(q, q, q, NULL, (kn_sdpa_opts){.causal = true});
    kn_tensor *h = kn_layer_norm(kn_add(kn_add(att, kn_sum(conv, KN_ALL_DIMS, false)), kn_sum(bn, KN_ALL_DIMS, false)),
                                 KN_SHAPE(4), ln_w, NULL, 1e-5);
    kn_tensor *logits = kn_reshape(kn_softmax(h, -1), KN_SHAPE(10, 4));
    kn_tensor *ce = kn_cross_entropy(logits, kn_zeros(KN_SHAPE(10), KN_I64), KN_CE_OPTS_DEFAULT);
    kn_tensor *loss = kn_add(ce, kn_mse_loss(kn_dropout(h, 0.5, true), kn_zeros_like(h), KN_REDUCTION_MEAN));
    CHECK(loss && kn_backward(loss) == KN_OK);
    CHECK(kn_bce_with_logits(x, kn_rand_like(x), NULL, kn_ones(KN_SHAPE(4), KN_F32), KN_REDUCTION_NONE));
    /* optimizer updates: outputs are their operands */
    kn_tensor *p = kn_randn(KN_SHAPE(3), KN_F32);
    CHECK(kn_adamw_update(p, kn_ones_like(p), kn_zeros_like(p), kn_zeros_like(p), 1e-3, 0.9, 0.999, 1e-8, 0, 1) == KN_OK);
    CHECK(kn_sgd_update(p, kn_ones_like(p), kn_zeros_like(p), 0.1, 0.9, 0, 0, false, true) == KN_OK);
    kn_scope_pop();
    CHECK_MSG(rule_mismatches == before, "%d nodes disagree with their rule", rule_mismatches - before);
    static const kn_op_id sample[] = {
        KN_OP_matmul, KN_OP_cat, KN_OP_pad, KN_OP_roll, KN_OP_repeat, KN_OP_tril, KN_OP_copy, KN_OP_eye,
        KN_OP_linspace, KN_OP_bernoulli, KN_OP_index_select, KN_OP_embedding, KN_OP_gather, KN_OP_scatter_add,
        KN_OP_index_add, KN_OP_masked_fill, KN_OP_index_put, KN_OP_multinomial, KN_OP_embedding_bag, KN_OP_sort,
        KN_OP_max_dim, KN_OP_norm, KN_OP_cumsum, KN_OP_conv2d, KN_OP_conv_transpose2d, KN_OP_max_pool2d,
        KN_OP_adaptive_avg_pool2d, KN_OP_upsample_bilinear2d, KN_OP_batch_norm, KN_OP_group_norm,
        KN_OP_scaled_dot_product_attention, KN_OP_layer_norm, KN_OP_softmax, KN_OP_cross_entropy, KN_OP_mse_loss,
        KN_OP_dropout, KN_OP_bce_with_logits, KN_OP_adamw_update, KN_OP_sgd_update,
        /* backward ops, recorded by kn_backward */
        KN_OP_scaled_dot_product_attention_backward, KN_OP_layer_norm_backward, KN_OP_softmax_backward,
        KN_OP_cross_entropy_backward, KN_OP_conv2d_backward_weight, KN_OP_batch_norm_backward,
    };
    for (size_t k = 0; k < sizeof sample / sizeof *sample; k++)
        CHECK_MSG(rule_checked[sample[k]] > 0, "%s was not recorded", kn_op_name(sample[k]));
}

/* A rule alone refuses what the API function would, with the reason. */
static void test_rules_refuse_bad_shapes(void) {
    kn_scope_push();
    char why[600];
    kn_op_infer r;
    kn_tensor *a = kn_zeros(KN_SHAPE(2, 3), KN_F32), *b = kn_zeros(KN_SHAPE(4, 5), KN_F32);
    kn_attrs none = {0};
    CHECK(kn_op_apply_rule(KN_OP_matmul, 2, (kn_tensor *[]){a, b}, &none, &r, why, sizeof why) == KN_ERR_SHAPE);
    CHECK_MSG(strstr(why, "inner sizes differ (3 vs 4)"), "%s", why);
    kn_attrs cat = {.cat = {.dim = 0}};
    CHECK(kn_op_apply_rule(KN_OP_cat, 2, (kn_tensor *[]){a, b}, &cat, &r, why, sizeof why) == KN_ERR_SHAPE);
    CHECK_MSG(strstr(why, "size 5 in dim 1"), "%s", why);
    kn_tensor *x = kn_zeros(KN_SHAPE(1, 4, 8, 8), KN_F32), *w = kn_zeros(KN_SHAPE(2, 3, 3, 3), KN_F32);
    kn_attrs conv = {.conv2d = {.stride = {1, 1}, .dilation = {1, 1}, .groups = 1}};
    conv.absent = 1u << KN_SLOT(conv2d, bias);
    CHECK(kn_op_apply_rule(KN_OP_conv2d, 2, (kn_tensor *[]){x, w}, &conv, &r, why, sizeof why) == KN_ERR_SHAPE);
    CHECK_MSG(strstr(why, "weight expects 3 input channels, x has 4"), "%s", why);
    kn_attrs gather = {.gather = {.dim = 0}};
    CHECK(kn_op_apply_rule(KN_OP_gather, 2, (kn_tensor *[]){a, kn_zeros(KN_SHAPE(2), KN_I64)}, &gather, &r, why,
                           sizeof why) == KN_ERR_SHAPE);
    CHECK_MSG(strstr(why, "index must have x's 2 dims"), "%s", why);
    /* and the API function fails with that reason, naming the op and inputs */
    CHECK_ERROR(kn_matmul(a, b) != NULL, KN_ERR_SHAPE, "matmul(f32[2, 3], f32[4, 5]): inner sizes differ");
    kn_scope_pop();
}

int main(void) {
    CHECK(kn_interposer_register(&rule_checker) == KN_OK); /* before the first op */
    RUN(test_signature_text);
    RUN(test_public_params);
    RUN(test_every_entry_is_well_formed);
    RUN(test_hash_equality_and_printing);
    RUN(test_scalars);
    RUN(test_optional_inputs);
    RUN(test_absent_weight_through_the_api);
    RUN(test_elementwise_rule_behind_the_entry);
    RUN(test_reduction_rule_behind_the_entry);
    RUN(test_every_entry_has_a_rule);
    RUN(test_rules_agree_with_the_api);
    RUN(test_rules_refuse_bad_shapes);
    return test_summary();
}
