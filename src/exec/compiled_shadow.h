/* The float64 shadow on a compiled program (KILN_SHADOW in compiled mode). Debug mode checks
 * each op as it is called; a compiled program fuses and plans its ops, so it is checked as a
 * whole: before its passes the program's ops are copied over copies of its values (the
 * outside memory it writes in place snapshotted), and once it has run they run again one by
 * one, each against float64 as in debug mode, and everything the program hands out (its
 * results, gradients, the parameters it updates) is compared with what the ops one by one
 * made. The first op that diverges from float64 is named as debug mode names it; a program
 * whose ops all agree but whose fused, planned run does not is named with the first value
 * that differs. Costs a second run of every program and float64 copies: a debugging tool. */
#ifndef KILN_EXEC_COMPILED_SHADOW_H
#define KILN_EXEC_COMPILED_SHADOW_H

#include "backends/backend.h"

typedef struct kn_program_shadow kn_program_shadow;

/* Whether the shadow is on (KILN_SHADOW, kn_set_shadow), so that the dispatcher keeps each
 * recorded node's origin for the check's errors. */
bool kn_program_shadow_on(void);

/* The copy of a program (nodes[0..n), one stream, before its passes) that the check runs, and
 * the snapshots of what it writes in place; *out NULL when the shadow is off or cannot run it
 * (a node on a backend without values). Reads values: the caller keeps the lazy windows from
 * flushing meanwhile. */
kn_status kn_program_shadow_begin(kn_node *const *nodes, kn_backend *const *backends, int n, int64_t program,
                                  kn_program_shadow **out);

/* Once the program is launched: waits for it, runs the copy op by op under the shadow and
 * compares the values the program hands out; frees ps. KN_ERR_NUMERIC names the divergence. */
kn_status kn_program_shadow_check(kn_program_shadow *ps);

#endif
