/* Op signatures (src/ops/op_table.h, op_attrs.c): each .def entry's inputs and typed
 * attributes become the node's attribute struct, the signature `kiln ops` prints, attribute
 * hashing, equality and printing, and the packed positions of optional inputs. */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "kiln/kiln.h"
#include "kiln/optable.h"
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

int main(void) {
    RUN(test_signature_text);
    RUN(test_public_params);
    RUN(test_every_entry_is_well_formed);
    RUN(test_hash_equality_and_printing);
    RUN(test_scalars);
    RUN(test_optional_inputs);
    RUN(test_absent_weight_through_the_api);
    RUN(test_elementwise_rule_behind_the_entry);
    RUN(test_reduction_rule_behind_the_entry);
    return test_summary();
}
