/* Differential test against PyTorch: replays the edge cases that
 * tests/fixtures/make_semantics_fixture.py recorded from torch (NaN, ±inf, -0.0, integer
 * extremes, bool operands, ties, empty dims, fully masked attention rows) through kiln's C API
 * and wants torch's dtype, shape and values: bit for bit where both compute an exact or
 * correctly rounded result, else within the dtype's tolerance with NaN, the infinities and
 * the sign of zero exact. Where torch refuses an input, kiln must refuse it too, unless the case
 * is one of the documented extensions below (docs/semantics.md). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kiln/hf.h"

#define FIXTURE KILN_SOURCE_DIR "/tests/fixtures/semantics/torch_cases.json"
#define MAX_OUT 3

/* Inputs kiln computes where torch refuses them, on purpose (docs/semantics.md, "Inputs kiln
 * accepts"): the case ids' prefixes. */
static const char *const extensions[] = {
    "where/int_condition", /* a nonzero integer condition is true */
    "lerp/i32",            /* integer inputs computed in f32, as every FLOAT-class op does */
    "addcdiv/i32",
    "gelu/",
    "gelu_tanh/",
    "silu/",
    "bitwise_left_shift/bool", /* bool as 0/1 */
    "bitwise_right_shift/bool",
    "argmax/bool", /* false < true */
};

/* ---- reading the fixture ----------------------------------------------------------------- */

static const char *attr_text(const cJSON *attr, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(attr, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}
static double attr_f64(const cJSON *attr, const char *key) { return strtod(attr_text(attr, key), NULL); }
static int64_t attr_i64(const cJSON *attr, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(attr, key);
    return cJSON_IsString(v) ? strtoll(v->valuestring, NULL, 10) : (int64_t)cJSON_GetNumberValue(v);
}
static bool attr_bool(const cJSON *attr, const char *key) {
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(attr, key));
}
static kn_shape attr_dims(const cJSON *attr) {
    kn_shape s = {0};
    const cJSON *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(attr, "dims")) s.v[s.n++] = (int64_t)d->valuedouble;
    return s;
}

typedef struct recorded {
    kn_dtype dtype;
    kn_shape shape;
    int64_t n;
    const cJSON *values; /* strings */
} recorded;

static bool read_recorded(const cJSON *j, recorded *r) {
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(j, "dtype"), *d;
    if (!cJSON_IsString(dtype) || !kn_dtype_parse(dtype->valuestring, &r->dtype)) return false;
    r->shape = (kn_shape){0};
    r->n = 1;
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(j, "shape")) {
        r->shape.v[r->shape.n++] = (int64_t)d->valuedouble;
        r->n *= (int64_t)d->valuedouble;
    }
    r->values = cJSON_GetObjectItemCaseSensitive(j, "v");
    return cJSON_GetArraySize(r->values) == r->n;
}

static double float_of(const char *s) { return strtod(s, NULL); } /* "nan", "-inf", "-0.0" included */

static kn_tensor *make_tensor(const recorded *r) {
    size_t size = kn_dtype_size(r->dtype);
    unsigned char *host = calloc((size_t)(r->n ? r->n : 1), size);
    int64_t i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, r->values) {
        const char *s = v->valuestring;
        void *at = host + (size_t)i++ * size;
        switch (r->dtype) {
        case KN_F32: *(float *)at = (float)float_of(s); break;
        case KN_F64: *(double *)at = float_of(s); break;
        case KN_F16: *(uint16_t *)at = kn_f64_to_f16(float_of(s)); break;
        case KN_BF16: *(uint16_t *)at = kn_f64_to_bf16(float_of(s)); break;
        case KN_I32: *(int32_t *)at = (int32_t)strtoll(s, NULL, 10); break;
        case KN_I64: *(int64_t *)at = strtoll(s, NULL, 10); break;
        default: *(uint8_t *)at = s[0] == '1'; break;
        }
    }
    kn_tensor *t = kn_from_host(host, r->dtype, r->shape, KN_CPU);
    free(host);
    return t;
}

/* ---- calling kiln by the case's op name ------------------------------------------------------ */

typedef kn_tensor *(*unary_fn)(kn_tensor *);
typedef kn_tensor *(*binary_fn)(kn_tensor *, kn_tensor *);
static const struct {
    const char *name;
    unary_fn fn;
} unary_ops[] = {
    {"neg", kn_neg},         {"abs", kn_abs},       {"sign", kn_sign},
    {"relu", kn_relu},       {"exp", kn_exp},       {"expm1", kn_expm1},
    {"log", kn_log},         {"log1p", kn_log1p},   {"log2", kn_log2},
    {"sqrt", kn_sqrt},       {"rsqrt", kn_rsqrt},   {"reciprocal", kn_reciprocal},
    {"sin", kn_sin},         {"cos", kn_cos},       {"tanh", kn_tanh},
    {"sigmoid", kn_sigmoid}, {"gelu", kn_gelu},     {"gelu_tanh", kn_gelu_tanh},
    {"silu", kn_silu},       {"erf", kn_erf},       {"floor", kn_floor},
    {"ceil", kn_ceil},       {"round", kn_round},   {"trunc", kn_trunc},
    {"bitwise_not", kn_bitwise_not}, {"logical_not", kn_logical_not}, {"isnan", kn_isnan},
    {"isinf", kn_isinf},     {"isfinite", kn_isfinite}, {"max", kn_max},
    {"min", kn_min},         {"argmax_all", kn_argmax_all},
};
static const struct {
    const char *name;
    binary_fn fn;
} binary_ops[] = {
    {"add", kn_add},
    {"sub", kn_sub},
    {"mul", kn_mul},
    {"div", kn_div},
    {"floor_divide", kn_floor_divide},
    {"remainder", kn_remainder},
    {"pow", kn_pow},
    {"maximum", kn_maximum},
    {"minimum", kn_minimum},
    {"eq", kn_eq},
    {"ne", kn_ne},
    {"lt", kn_lt},
    {"le", kn_le},
    {"gt", kn_gt},
    {"ge", kn_ge},
    {"logical_and", kn_logical_and},
    {"logical_or", kn_logical_or},
    {"logical_xor", kn_logical_xor},
    {"bitwise_and", kn_bitwise_and},
    {"bitwise_or", kn_bitwise_or},
    {"bitwise_xor", kn_bitwise_xor},
    {"bitwise_left_shift", kn_bitwise_left_shift},
    {"bitwise_right_shift", kn_bitwise_right_shift},
};
static const struct {
    const char *name;
    kn_tensor *(*fn)(kn_tensor *, double);
} scalar_ops[] = {
    {"add_scalar", kn_add_scalar}, {"sub_scalar", kn_sub_scalar}, {"mul_scalar", kn_mul_scalar},
    {"div_scalar", kn_div_scalar}, {"pow_scalar", kn_pow_scalar},
};
static const struct {
    const char *name;
    kn_tensor *(*fn)(kn_tensor *, int64_t);
} scalar_int_ops[] = {
    {"add_scalar_int", kn_add_scalar_int},
    {"sub_scalar_int", kn_sub_scalar_int},
    {"mul_scalar_int", kn_mul_scalar_int},
    {"pow_scalar_int", kn_pow_scalar_int},
};
static const struct {
    const char *name;
    kn_tensor *(*fn)(kn_tensor *, kn_shape, bool);
} dims_ops[] = {
    {"sum", kn_sum},   {"mean", kn_mean}, {"prod", kn_prod},
    {"amax", kn_amax}, {"amin", kn_amin}, {"logsumexp", kn_logsumexp},
    {"all", kn_all},   {"any", kn_any},
};
static const struct {
    const char *name;
    kn_tensor *(*fn)(kn_tensor *, int64_t);
} dim_ops[] = {
    {"cumsum", kn_cumsum},
    {"cumprod", kn_cumprod},
    {"softmax", kn_softmax},
    {"log_softmax", kn_log_softmax},
};

static kn_tensor *sdpa(kn_tensor **in, int n_in, const cJSON *attr) {
    kn_sdpa_opts opts = {.causal = attr_bool(attr, "causal")};
    const char *align = attr_text(attr, "align");
    opts.causal_align = align && strcmp(align, "top_left") == 0 ? KN_CAUSAL_TOP_LEFT : KN_CAUSAL_BOTTOM_RIGHT;
    return kn_scaled_dot_product_attention(in[0], in[1], in[2], n_in > 3 ? in[3] : NULL, opts);
}

static kn_status max_pool(kn_tensor *x, const cJSON *attr, kn_tensor **out) {
    int64_t k = attr_i64(attr, "kernel"), s = attr_i64(attr, "stride"), p = attr_i64(attr, "padding");
    kn_pool_opts opts = {.kernel = {k, k}, .stride = {s, s}, .padding = {p, p}, .dilation = {1, 1}};
    return kn_max_pool2d_with_indices(x, opts, &out[0], &out[1]);
}

/* Runs the case's op; the outputs go to out[] (NULL where the call failed). */
static int run_op(const char *op, kn_tensor **in, int n_in, const cJSON *attr, kn_tensor **out) {
    for (size_t i = 0; i < sizeof unary_ops / sizeof *unary_ops; i++)
        if (!strcmp(op, unary_ops[i].name)) return out[0] = unary_ops[i].fn(in[0]), 1;
    for (size_t i = 0; i < sizeof binary_ops / sizeof *binary_ops; i++)
        if (!strcmp(op, binary_ops[i].name)) return out[0] = binary_ops[i].fn(in[0], in[1]), 1;
    for (size_t i = 0; i < sizeof scalar_ops / sizeof *scalar_ops; i++)
        if (!strcmp(op, scalar_ops[i].name)) return out[0] = scalar_ops[i].fn(in[0], attr_f64(attr, "scalar")), 1;
    for (size_t i = 0; i < sizeof scalar_int_ops / sizeof *scalar_int_ops; i++)
        if (!strcmp(op, scalar_int_ops[i].name))
            return out[0] = scalar_int_ops[i].fn(in[0], attr_i64(attr, "scalar")), 1;
    for (size_t i = 0; i < sizeof dims_ops / sizeof *dims_ops; i++)
        if (!strcmp(op, dims_ops[i].name))
            return out[0] = dims_ops[i].fn(in[0], attr_dims(attr), attr_bool(attr, "keepdim")), 1;
    for (size_t i = 0; i < sizeof dim_ops / sizeof *dim_ops; i++)
        if (!strcmp(op, dim_ops[i].name)) return out[0] = dim_ops[i].fn(in[0], attr_i64(attr, "dim")), 1;
    if (!strcmp(op, "leaky_relu")) return out[0] = kn_leaky_relu(in[0], attr_f64(attr, "negative_slope")), 1;
    if (!strcmp(op, "softplus"))
        return out[0] = kn_softplus(in[0], attr_f64(attr, "beta"), attr_f64(attr, "threshold")), 1;
    if (!strcmp(op, "clamp")) return out[0] = kn_clamp(in[0], attr_f64(attr, "min"), attr_f64(attr, "max")), 1;
    if (!strcmp(op, "clamp_int")) return out[0] = kn_clamp_int(in[0], attr_i64(attr, "min"), attr_i64(attr, "max")), 1;
    if (!strcmp(op, "where")) return out[0] = kn_where(in[0], in[1], in[2]), 1;
    if (!strcmp(op, "lerp")) return out[0] = kn_lerp(in[0], in[1], in[2]), 1;
    if (!strcmp(op, "lerp_scalar")) return out[0] = kn_lerp_scalar(in[0], in[1], attr_f64(attr, "weight")), 1;
    if (!strcmp(op, "addcmul")) return out[0] = kn_addcmul(in[0], in[1], in[2], attr_f64(attr, "value")), 1;
    if (!strcmp(op, "addcdiv")) return out[0] = kn_addcdiv(in[0], in[1], in[2], attr_f64(attr, "value")), 1;
    if (!strcmp(op, "cast")) {
        kn_dtype to = KN_F32;
        kn_dtype_parse(attr_text(attr, "dtype"), &to);
        return out[0] = kn_cast(in[0], to), 1;
    }
    if (!strcmp(op, "argmax")) return out[0] = kn_argmax(in[0], attr_i64(attr, "dim"), attr_bool(attr, "keepdim")), 1;
    if (!strcmp(op, "argmin")) return out[0] = kn_argmin(in[0], attr_i64(attr, "dim"), attr_bool(attr, "keepdim")), 1;
    if (!strcmp(op, "var"))
        return out[0] = kn_var(in[0], attr_dims(attr), attr_f64(attr, "correction"), attr_bool(attr, "keepdim")), 1;
    if (!strcmp(op, "max_dim") || !strcmp(op, "min_dim")) {
        kn_status (*fn)(kn_tensor *, int64_t, bool, kn_tensor **, kn_tensor **) = op[1] == 'a' ? kn_max_dim : kn_min_dim;
        return fn(in[0], attr_i64(attr, "dim"), attr_bool(attr, "keepdim"), &out[0], &out[1]), 2;
    }
    if (!strcmp(op, "sort"))
        return kn_sort(in[0], attr_i64(attr, "dim"), attr_bool(attr, "descending"), &out[0], &out[1]), 2;
    if (!strcmp(op, "argsort"))
        return out[0] = kn_argsort(in[0], attr_i64(attr, "dim"), attr_bool(attr, "descending")), 1;
    if (!strcmp(op, "topk_values")) {
        kn_tensor *indices = NULL;
        kn_topk(in[0], attr_i64(attr, "k"), attr_i64(attr, "dim"), attr_bool(attr, "largest"), true, &out[0], &indices);
        kn_release(indices);
        return 1;
    }
    if (!strcmp(op, "unique")) return kn_unique(in[0], &out[0], &out[1], &out[2]), 3;
    if (!strcmp(op, "unique_values_counts")) return kn_unique(in[0], &out[0], NULL, &out[1]), 2;
    if (!strcmp(op, "max_pool2d_with_indices")) return max_pool(in[0], attr, out), 2;
    if (!strcmp(op, "sdpa")) return out[0] = sdpa(in, n_in, attr), 1;
    return -1;
}

/* ---- comparing ----------------------------------------------------------------------------- */

static double host_value(const unsigned char *host, kn_dtype d, int64_t i) {
    switch (d) {
    case KN_F32: return ((const float *)host)[i];
    case KN_F64: return ((const double *)host)[i];
    case KN_F16: return kn_f16_to_f32(((const uint16_t *)host)[i]);
    case KN_BF16: return kn_bf16_to_f32(((const uint16_t *)host)[i]);
    case KN_I32: return ((const int32_t *)host)[i];
    case KN_I64: return (double)((const int64_t *)host)[i];
    default: return host[i];
    }
}

/* Whether got agrees with torch's want (a recorded string). */
static bool value_agrees(const unsigned char *host, kn_dtype d, int64_t i, const char *want_text, bool exact) {
    if (d == KN_I64) return ((const int64_t *)host)[i] == strtoll(want_text, NULL, 10);
    double got = host_value(host, d, i), want = float_of(want_text);
    if (!kn_dtype_is_float(d)) return got == want;
    if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
    if (isinf(want) || isinf(got) || exact || (got == 0 && want == 0)) return got == want && signbit(got) == signbit(want);
    tolerance tol = tol_for(d);
    return fabs(got - want) <= tol.atol + tol.rtol * fabs(want);
}

static void print_inputs(const cJSON *inputs, int64_t at, int64_t out_n) {
    const cJSON *in;
    cJSON_ArrayForEach(in, inputs) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(in, "v");
        int n = cJSON_GetArraySize(v);
        /* elementwise cases line up element for element; 0-d operands have one */
        if (n == out_n || n == 1) fprintf(stderr, " %s", cJSON_GetArrayItem(v, n == 1 ? 0 : (int)at)->valuestring);
    }
}

/* Compares one output; prints the first disagreement. */
static bool output_agrees(const char *id, int k, kn_tensor *got, const recorded *want, const cJSON *inputs, bool exact) {
    kn_shape shape = kn_shape_of(got);
    bool same_shape = shape.n == want->shape.n;
    for (int d = 0; same_shape && d < shape.n; d++) same_shape = shape.v[d] == want->shape.v[d];
    if (kn_dtype_of(got) != want->dtype || !same_shape) {
        fprintf(stderr, "%s: output %d is %s of %d dims; torch's is %s of %d dims\n", id, k,
                kn_dtype_name(kn_dtype_of(got)), shape.n, kn_dtype_name(want->dtype), want->shape.n);
        return false;
    }
    size_t bytes = (size_t)want->n * kn_dtype_size(want->dtype);
    unsigned char *host = malloc(bytes ? bytes : 1);
    bool ok = kn_to_host(got, host, bytes) == KN_OK;
    if (!ok) fprintf(stderr, "%s: output %d cannot be read: %s\n", id, k, kn_last_error());
    for (int64_t i = 0; ok && i < want->n; i++) {
        const char *w = cJSON_GetArrayItem(want->values, (int)i)->valuestring;
        if (value_agrees(host, want->dtype, i, w, exact)) continue;
        fprintf(stderr, "%s: output %d [%lld] is %.17g; torch gives %s (inputs:", id, k, (long long)i,
                host_value(host, want->dtype, i), w);
        print_inputs(inputs, i, want->n);
        fprintf(stderr, ")\n");
        ok = false;
    }
    free(host);
    return ok;
}

static bool is_extension(const char *id) {
    for (size_t i = 0; i < sizeof extensions / sizeof *extensions; i++)
        if (!strncmp(id, extensions[i], strlen(extensions[i]))) return true;
    return false;
}

typedef struct tally {
    int cases, agree, differ, refused_alike, extensions;
} tally;

static void run_case(const cJSON *c, tally *t) {
    const char *id = cJSON_GetObjectItemCaseSensitive(c, "id")->valuestring;
    const char *op = cJSON_GetObjectItemCaseSensitive(c, "op")->valuestring;
    const cJSON *attr = cJSON_GetObjectItemCaseSensitive(c, "attr"), *inputs = cJSON_GetObjectItemCaseSensitive(c, "in");
    const cJSON *torch_error = cJSON_GetObjectItemCaseSensitive(c, "torch_error");
    bool exact = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "exact"));
    kn_tensor *in[4] = {0}, *out[MAX_OUT] = {0};
    int n_in = 0;
    const cJSON *j;
    cJSON_ArrayForEach(j, inputs) {
        recorded r;
        CHECK_MSG(n_in < 4 && read_recorded(j, &r), "%s: input %d is malformed", id, n_in);
        if (n_in < 4) in[n_in] = make_tensor(&r);
        n_in++;
    }
    t->cases++;
    kn_clear_error();
    int n_out = run_op(op, in, n_in, attr, out);
    CHECK_MSG(n_out > 0, "%s: the test does not know op '%s'", id, op);
    bool failed = n_out <= 0 || !out[0];
    for (int k = 0; !failed && k < n_out; k++) failed = !out[k] || kn_sync() != KN_OK;
    if (cJSON_IsString(torch_error)) {
        if (failed) t->refused_alike++;
        else if (is_extension(id)) t->extensions++;
        else CHECK_MSG(false, "%s: kiln computes what torch refuses (\"%s\")", id, torch_error->valuestring);
    } else if (failed) {
        CHECK_MSG(false, "%s: kiln refuses what torch computes: %s", id, kn_last_error());
        t->differ++;
    } else {
        bool ok = true;
        int k = 0;
        cJSON_ArrayForEach(j, cJSON_GetObjectItemCaseSensitive(c, "out")) {
            recorded want;
            CHECK_MSG(k < n_out && read_recorded(j, &want), "%s: output %d is malformed", id, k);
            if (k < n_out) ok &= output_agrees(id, k, out[k], &want, inputs, exact);
            k++;
        }
        ok ? t->agree++ : t->differ++;
    }
    kn_clear_error();
    for (int i = 0; i < n_in && i < 4; i++) kn_release(in[i]);
    for (int k = 0; k < MAX_OUT; k++) kn_release(out[k]);
}

static void test_every_recorded_case_agrees_with_torch(void) {
    cJSON *root = kn_hf_read_json(FIXTURE, 16u << 20);
    CHECK(root != NULL);
    if (!root) return;
    /* Most cases make NaN and infinities on purpose: debug mode would refuse them. */
    kn_mode saved = debug_checks_off();
    tally t = {0};
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(root, "cases")) run_case(c, &t);
    debug_checks_restore(saved);
    printf("%d cases from torch %s: %d agree, %d differ, %d refused by both, %d documented extensions\n", t.cases,
           cJSON_GetObjectItemCaseSensitive(root, "torch_version")->valuestring, t.agree, t.differ, t.refused_alike,
           t.extensions);
    CHECK_MSG(t.cases > 1000, "only %d cases in %s", t.cases, FIXTURE);
    CHECK_MSG(t.differ == 0, "%d cases differ from torch", t.differ);
    cJSON_Delete(root);
}

int main(void) {
    RUN(test_every_recorded_case_agrees_with_torch);
    return test_summary();
}
