/* The CPU kernel of `fused` nodes: runs a generated kernel over the node's operands. */
#include "backends/cpu/codegen.h"
#include "backends/cpu/cpu_kernels.h"
#include "core/error.h"
#include "core/stats.h"
#include "core/thread_pool.h"

static kn_status fused_kernel(kn_node *n) {
    const kn_fused_launch *L = n->aux;
    /* the stored chain values, the inputs, then the row values */
    char *base[KN_FUSED_MAX_OPERANDS + KN_FUSED_MAX_ROWS];
    for (int k = 0; k < L->n_out; k++) base[k] = kn_tensor_data(n->out[k]);
    for (int i = 0; i < n->n_in; i++) base[L->n_out + i] = kn_tensor_data(n->in[i]);
    for (int e = 0; e < L->n_rows; e++) base[L->n_out + n->n_in + e] = kn_tensor_data(n->out[L->n_out + e]);
    kn_stat_add(KN_STAT_FUSED_KERNELS, 1);
    kn_stat_add(KN_STAT_OPS_FUSED, L->n_steps + L->n_rows);
    static const kn_fused_pool pool = {.chunks = kn_parallel_chunks, .run = kn_parallel_run};
    int bad = L->numel ? L->fn(base, L->size, L->stride, L->numel, L->row, L->attrs, &pool) : 0;
    if (bad & 2) return kn_error(KN_ERR_OOM, "fused kernel %s: out of host memory for partial results", L->desc);
    if (bad) return kn_error(KN_ERR_ARG, "fused kernel %s: integer division by zero", L->desc);
    return KN_OK;
}

const kn_kernel_reg kn_cpu_kernels_fused[] = {
    {KN_OP_fused, fused_kernel, KN_DTS_ALL},
    {0},
};
