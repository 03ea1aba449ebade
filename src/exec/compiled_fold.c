/* The evaluator of compiled mode's constant folding (graph/const_fold.h): the node's own
 * kernel, on its own backend, over one element. */
#include <math.h>
#include <string.h>

#include "core/backend_device.h"
#include "core/host_values.h"
#include "core/tensor_impl.h"
#include "exec/compiled.h"

/* Runs node op's kernel on b now over the given one-element tensors (inputs, then the output):
 * evaluation while planning, not a launch of the program (not counted as one). */
static bool run_on(kn_backend *b, kn_node *x, kn_op_id op, const kn_attrs *attrs, kn_tensor **in, int n_in, kn_tensor *out) {
    kn_node *m = kn_node_make(op, n_in);
    if (!m) return false;
    m->attrs = *attrs;
    m->stream = x->stream;
    m->n_out = 1;
    m->fresh_out = 1;
    m->out[0] = kn_tensor_incref(out);
    for (int i = 0; i < n_in; i++) m->in[i] = kn_tensor_incref(in[i]);
    bool ok = b->kernels->op[op].fn(m) == KN_OK;
    kn_node_free(m);
    return ok;
}

bool kn_compiled_fold_eval(const kn_node *x, const double *in, double *out, void *ctx) {
    (void)ctx;
    kn_storage *where = x->out[0]->storage;
    kn_backend *b = where->backend;
    kn_dtype dt = x->out[0]->dtype;
    if (!b->holds_values || !b->kernels->op[x->op].fn || !(b->kernels->op[x->op].dtypes & KN_DT(kn_node_key_dtype(x))) ||
        !b->kernels->op[KN_OP_fill].fn)
        return false;
    kn_tensor *t[4] = {0};
    bool ok = true;
    for (int i = 0; i <= x->n_in && ok; i++) {
        kn_dtype d = i < x->n_in ? x->in[i]->dtype : dt;
        ok = (t[i] = kn_tensor_alloc("constant folding", d, NULL, 0, where->device)) != NULL;
        if (ok && i < x->n_in) { /* the input as `fill` makes it */
            kn_attrs fill = {0};
            fill.creation = (kn_creation_attrs){.shape = {.n = 0}, .dtype = d};
            fill.fill.a = in[i];
            ok = run_on(b, (kn_node *)x, KN_OP_fill, &fill, NULL, 0, t[i]);
        }
    }
    ok = ok && run_on(b, (kn_node *)x, x->op, &x->attrs, t, x->n_in, t[x->n_in]);
    unsigned char raw[16];
    ok = ok && b->copy_to_host(x->stream, raw, t[x->n_in]->storage, 0, kn_dtype_size(dt)) == KN_OK;
    if (ok) {
        *out = kn_value_at(raw, dt, 0);
        if (dt == KN_I64) { /* a double holds it exactly, or it is not folded */
            int64_t v;
            memcpy(&v, raw, sizeof v);
            ok = (double)v == *out && fabs(*out) < 0x1p53;
        }
    }
    for (int i = 0; i <= x->n_in; i++) kn_tensor_decref(t[i]);
    return ok;
}
