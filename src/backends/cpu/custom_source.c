/* Source kernels of custom ops: one translation unit per (expression, dtype), so the
 * compilation cache's key (the source text) tells kernels apart by itself and two ops with
 * the same expression share one compiled kernel. */
#include "backends/cpu/custom_source.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/jit.h"
#include "core/error.h"
#include "ops/custom_registry.h"

#define SYMBOL "kn_custom_kernel"

/* Loaded kernels by op and dtype; written once, read by the kernels on the stream. */
static _Atomic(void *) compiled[KN_CUSTOM_MAX_OPS][KN_DTYPE_COUNT];

typedef struct dtype_form {
    const char *storage, *compute, *load, *store;
} dtype_form;

static bool form_of(kn_dtype d, dtype_form *f) {
    switch (d) {
    case KN_F32: *f = (dtype_form){"float", "float", "", ""}; return true;
    case KN_F64: *f = (dtype_form){"double", "double", "", ""}; return true;
    case KN_F16: *f = (dtype_form){"uint16_t", "float", "kn_half_to_f32_f16", "kn_half_from_f32_f16"}; return true;
    case KN_BF16: *f = (dtype_form){"uint16_t", "float", "kn_half_to_f32_bf16", "kn_half_from_f32_bf16"}; return true;
    default: return false;
    }
}

/* The kernel's body after the prelude: the elementwise engine's inner-loop signature, a unit
 * stride loop the compiler vectorizes and a strided one. The call's f[0], f[1] are read as a,
 * b at their offset in the node's kn_attrs, which generated code does not declare. */
static char *generate(const char *expr, int n_in, const dtype_form *f) {
    static const char var[3] = {'x', 'y', 'z'};
    char ptrs[512] = "", unit[512] = "", strided[512] = "", all_unit[64] = "s[0] == 1";
    size_t lp = 0, lu = 0, ls = 0, la = strlen(all_unit);
    for (int k = 0; k < n_in; k++) {
        lp += (size_t)snprintf(ptrs + lp, sizeof ptrs - lp, "    const %s *restrict %cs = (const %s *)p[%d];\n",
                               f->storage, var[k], f->storage, k + 1);
        lu += (size_t)snprintf(unit + lu, sizeof unit - lu, "            const kn_ct %c = %s(%cs[i]);\n", var[k],
                               f->load, var[k]);
        ls += (size_t)snprintf(strided + ls, sizeof strided - ls, "            const kn_ct %c = %s(%cs[i * s[%d]]);\n",
                               var[k], f->load, var[k], k + 1);
        la += (size_t)snprintf(all_unit + la, sizeof all_unit - la, " && s[%d] == 1", k + 1);
    }
    const char *fmt = "%s\n"
                      "typedef %s kn_ct;\n"
                      "struct kn_attrs;\n"
                      "int " SYMBOL "(char *const *p, const int64_t *s, int64_t n, const struct kn_attrs *at) {\n"
                      "    const double *f = (const double *)((const char *)at + %zu);\n"
                      "    const kn_ct a = (kn_ct)f[0], b = (kn_ct)f[1];\n"
                      "    int bad = 0;\n"
                      "    (void)a, (void)b;\n"
                      "    %s *restrict o = (%s *)p[0];\n"
                      "%s"
                      "    if (%s) {\n"
                      "        for (int64_t i = 0; i < n; i++) {\n"
                      "%s"
                      "            o[i] = %s((kn_ct)(%s));\n"
                      "        }\n"
                      "    } else {\n"
                      "        for (int64_t i = 0; i < n; i++) {\n"
                      "%s"
                      "            o[i * s[0]] = %s((kn_ct)(%s));\n"
                      "        }\n"
                      "    }\n"
                      "    return bad;\n"
                      "}\n";
    size_t off = offsetof(kn_attrs, custom.call.f);
#define ARGS kn_jit_prelude, f->compute, off, f->storage, f->storage, ptrs, all_unit, unit, f->store, expr, strided, \
             f->store, expr
    int len = snprintf(NULL, 0, fmt, ARGS);
    char *src = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (src) snprintf(src, (size_t)len + 1, fmt, ARGS);
#undef ARGS
    return src;
}

kn_status kn_cpu_custom_prepare(int id, kn_dtype dtype) {
    if (atomic_load_explicit(&compiled[id][dtype], memory_order_acquire)) return KN_OK;
    const kn_custom_entry *e = kn_custom_get(id);
    dtype_form f;
    if (!form_of(dtype, &f))
        return kn_error(KN_ERR_INTERNAL, "source kernels compute in a float dtype, not %s", kn_dtype_name(dtype));
    char *src = generate(e->def.source, e->def.n_inputs, &f);
    if (!src) return kn_error(KN_ERR_OOM, "out of host memory generating its source kernel");
    void *fn = NULL;
    kn_status st = kn_jit_load(src, 1, (const char *const[]){SYMBOL}, &fn);
    free(src);
    if (st != KN_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", kn_last_error());
        return kn_error(st, "its source kernel for %s does not build: %s", kn_dtype_name(dtype), msg);
    }
    atomic_store_explicit(&compiled[id][dtype], fn, memory_order_release);
    return KN_OK;
}

kn_ew_inner_fn kn_cpu_custom_source_fn(int id, kn_dtype dtype) {
    return (kn_ew_inner_fn)atomic_load_explicit(&compiled[id][dtype], memory_order_acquire);
}
