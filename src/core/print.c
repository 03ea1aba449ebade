/* Readable printing of tensors, PyTorch-style, with long dims summarized. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend_device.h"
#include "core/error.h"
#include "core/host_values.h"
#include "core/strbuf.h"
#include "core/tensor_impl.h"

#define EDGE 3       /* items shown at each end of a summarized dim */
#define SUMMARIZE 1000 /* summarize tensors with more elements than this */

typedef struct layout {
    const double *values;
    const int64_t *shape;
    int ndim;
    bool is_float, is_bool, summarize, sci;
    int width, precision;
} layout;

static void put_value(kn_strbuf *s, const layout *L, double v) {
    if (L->is_bool) kn_strbuf_printf(s, "%*s", L->width, v != 0 ? "True" : "False");
    else if (!L->is_float) kn_strbuf_printf(s, "%*.0f", L->width, v);
    else if (isnan(v)) kn_strbuf_printf(s, "%*s", L->width, "nan");
    else if (isinf(v)) kn_strbuf_printf(s, "%*s", L->width, v > 0 ? "inf" : "-inf");
    else if (L->sci) kn_strbuf_printf(s, "%*.*e", L->width, L->precision, v);
    else kn_strbuf_printf(s, "%*.*f", L->width, L->precision, v);
}

static void put_dim(kn_strbuf *s, const layout *L, int d, int64_t base, int indent) {
    kn_strbuf_printf(s, "[");
    int64_t size = L->shape[d], inner = 1;
    for (int k = d + 1; k < L->ndim; k++) inner *= L->shape[k];
    for (int64_t i = 0; i < size; i++) {
        if (L->summarize && size > 2 * EDGE && i == EDGE) {
            kn_strbuf_printf(s, d == L->ndim - 1 ? "..., " : "...,\n%*s", d == L->ndim - 1 ? 0 : indent + 1, "");
            i = size - EDGE;
        }
        if (d == L->ndim - 1) put_value(s, L, L->values[base + i]);
        else put_dim(s, L, d + 1, base + i * inner, indent + 1);
        if (i + 1 < size) {
            if (d == L->ndim - 1) kn_strbuf_printf(s, ", ");
            else kn_strbuf_printf(s, ",%s%*s", d < L->ndim - 2 ? "\n\n" : "\n", indent + 1, "");
        }
    }
    kn_strbuf_printf(s, "]");
}

char *kn_to_string(kn_tensor *t) {
    if (!t) {
        kn_error_null_input("to_string", 0);
        return NULL;
    }
    char desc[96];
    kn_describe(t, desc, sizeof desc);
    kn_strbuf s = {0};
    int64_t n = kn_numel(t);
    if (!t->storage->backend->holds_values) {
        kn_strbuf_printf(&s, "tensor(..., %s, device=%s)", desc, t->storage->backend->name);
        return s.failed ? (free(s.buf), NULL) : s.buf;
    }
    double *values = kn_read_f64("to_string", t);
    if (!values) return NULL;

    layout L = {.values = values, .shape = t->shape, .ndim = t->ndim, .is_float = kn_dtype_is_float(t->dtype),
                .is_bool = t->dtype == KN_BOOL, .summarize = n > SUMMARIZE, .precision = 4};
    double maxabs = 0, minabs = INFINITY;
    bool all_int = true;
    for (int64_t i = 0; i < n; i++) {
        double a = fabs(values[i]);
        if (!isfinite(a)) continue;
        if (a > maxabs) maxabs = a;
        if (a > 0 && a < minabs) minabs = a;
        if (a != floor(a)) all_int = false;
    }
    if (L.is_float) {
        L.sci = maxabs >= 1e8 || (minabs < 1e-4 && maxabs > 0) || (maxabs / minabs > 1e5 && minabs > 0);
        if (all_int && !L.sci) L.precision = 0;
    }
    char probe[64];
    for (int64_t i = 0; i < n; i++) {
        layout one = L;
        one.width = 0;
        kn_strbuf p = {.buf = probe, .cap = sizeof probe};
        put_value(&p, &one, values[i]);
        if ((int)p.len > L.width) L.width = (int)p.len;
    }
    kn_strbuf_printf(&s, "tensor(");
    if (t->ndim == 0) put_value(&s, &L, values[0]);
    else put_dim(&s, &L, 0, 0, 7);
    kn_strbuf_printf(&s, ", %s%s%s)", desc, t->storage->device.type == KN_DEVICE_CPU ? "" : ", device=",
        t->storage->device.type == KN_DEVICE_CPU ? "" : t->storage->backend->name);
    free(values);
    if (s.failed) {
        free(s.buf);
        return kn_error_null(KN_ERR_OOM, "to_string: out of host memory");
    }
    return s.buf;
}

kn_status kn_fprint(FILE *f, kn_tensor *t) {
    char *s = kn_to_string(t);
    if (!s) return kn_last_status();
    fprintf(f ? f : stdout, "%s\n", s);
    free(s);
    return KN_OK;
}

kn_status kn_print(kn_tensor *t) { return kn_fprint(stdout, t); }
