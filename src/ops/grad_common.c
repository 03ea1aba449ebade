/* Helpers gradient formulas share. */
#include "kiln/ops.h"
#include "ops/grad.h"

kn_tensor *kn_sum_to(kn_tensor *g, kn_shape shape) {
    if (!g) return NULL;
    kn_shape have = kn_shape_of(g), dims = {0};
    int lead = have.n - shape.n;
    for (int d = 0; d < have.n; d++)
        if (d < lead || (shape.v[d - lead] == 1 && have.v[d] != 1)) dims.v[dims.n++] = d;
    if (dims.n == 0) return kn_reshape(g, shape);
    kn_tensor *s = kn_sum(g, dims, true);
    return kn_reshape(s, shape);
}
