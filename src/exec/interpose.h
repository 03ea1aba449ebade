/* Interposers: what runs on every node the dispatcher records, in one fixed order, so that
 * autograd, the debug checks, the float64 shadow, and later the compile tracer and collective
 * sequence numbering, plug in without editing the dispatcher (DESIGN.md, "Values, not
 * buffers; interposers, not hard-wired calls").
 *
 * The contract, for one op call:
 *  1. The op's API function has recorded the node: inputs, attributes and outputs are set;
 *     the outputs may not hold values yet.
 *  2. record(n, b, &state) runs for every interposer active in the current mode, in list
 *     order; b is the backend n will run on. It may read the node and its inputs' values
 *     (kn_to_host waits for them), keep per-node state in *state (left NULL: nothing more to
 *     do for this node), or refuse the node by returning an error with the message set and
 *     *state left NULL: the op then fails, the node never runs, and the interposers after it
 *     are not called. It must not change the node, keep a pointer to it, or record ops (they
 *     would pass through the interposers again). For ops whose output shapes depend on
 *     values (KN_OPF_SYNC) the node has already run, so its outputs hold values.
 *  3. The mode's scheduler takes the node (exec/scheduler.h): it runs it now (debug), queues
 *     it on the stream (strict) or keeps it in a window (fused). From here on the node may be
 *     gone.
 *  4. done(state, st, outs, n_out) runs for every interposer whose record left a state, in
 *     reverse list order (the first to record finishes last). st is the op's status so far:
 *     KN_OK, a later interposer's refusal or the scheduler's error. done frees its state in
 *     every case and returns the status to pass on: st, or its own error where st is KN_OK.
 *     outs are the handles the caller gets (for an in-place op, the tensors it wrote); they
 *     hold values here only under a scheduler that runs nodes at once (debug).
 * Views record no node (they share their input's storage); view(t, v, rec) runs for every
 * interposer that has it when view v of t is made, in list order, and an error fails the
 * view (autograd records the view's geometry here).
 *
 * Order: by `order`, lowest first (KN_ORDER_*); registration happens before the first op
 * (exec's own interposers are built in; a layer above registers from a constructor), and the
 * list is read without a lock. Nothing is allocated per op: states live on the dispatcher's
 * stack. */
#ifndef KILN_EXEC_INTERPOSE_H
#define KILN_EXEC_INTERPOSE_H

#include "backends/backend.h"

struct kn_view_rec; /* ops/grad.h: how a view maps onto its input */

/* Where each interposer sits. Autograd records first, so that a refusal by a check leaves no
 * history and history is attached after every check has passed. */
enum {
    KN_ORDER_AUTOGRAD = 100,
    KN_ORDER_COLLECTIVES = 200, /* reserved: collective sequence numbering (dist) */
    KN_ORDER_TRACER = 300,      /* reserved: the compile tracer (compiled mode) */
    KN_ORDER_SHADOW = 400,
    KN_ORDER_DEBUG_CHECK = 500,
};

#define KN_MODE_BIT(m) (1u << (m))
#define KN_ALL_MODES ((1u << KN_MODE_COUNT) - 1)
#define KN_INTERPOSERS_MAX 8

typedef struct kn_interposer {
    const char *name;
    int order;
    uint32_t modes; /* KN_MODE_BIT of each mode it is active in */
    kn_status (*record)(const kn_node *n, const kn_backend *b, void **state);
    kn_status (*done)(void *state, kn_status st, kn_tensor *const *outs, int n_out);
    kn_status (*view)(kn_tensor *t, kn_tensor *v, const struct kn_view_rec *rec); /* may be NULL */
} kn_interposer;

/* Adds ip to the list (KN_ERR_ARG when the list is full or ip is there already). */
kn_status kn_interposer_register(const kn_interposer *ip);

/* The dispatcher's two passes. kn_interpose_record fills state[0..KN_INTERPOSERS_MAX) and
 * says in *any whether any state was left (so an in-place op takes references to its outputs
 * only when someone will look at them); kn_interpose_done finishes what record started and
 * returns the op's final status. */
kn_status kn_interpose_record(kn_mode mode, const kn_node *n, const kn_backend *b, void **state, bool *any);
kn_status kn_interpose_done(kn_mode mode, void **state, kn_status st, kn_tensor *const *outs, int n_out);
/* The view functions' call: every view callback, in order; the first error. */
kn_status kn_interpose_view(kn_tensor *t, kn_tensor *v, const struct kn_view_rec *rec);

/* exec's own (exec/debug_check.c, exec/shadow.c). */
extern const kn_interposer kn_debug_check_interposer;
extern const kn_interposer kn_shadow_interposer;

#endif
