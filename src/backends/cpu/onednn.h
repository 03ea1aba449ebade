/* oneDNN's shared state for every primitive the cpu backend runs (matmul, convolution): one CPU
 * engine, the AMX permission, and a per-thread setting. Each oneDNN call kiln makes is one chunk
 * of kiln's thread pool, so oneDNN's own OpenMP must run one thread in it: the threads it would
 * start take the cores kiln's pool is using (docs/decisions.md, "kiln's thread pool"). */
#ifndef KILN_BACKENDS_CPU_ONEDNN_H
#define KILN_BACKENDS_CPU_ONEDNN_H

#ifdef KILN_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>

/* The engine (NULL when oneDNN could not start), with the calling thread set to run oneDNN on
 * itself alone. Call it on the thread that runs the primitive, before running it. */
dnnl_engine_t kn_onednn_engine(void);
#endif

/* The ISA oneDNN dispatches to ("avx512_core_amx", ...), or "not built in". */
const char *kn_onednn_isa(void);
/* What became of the AMX permission request: "granted", "not needed (no AMX)", or the refusal
 * with its errno; "not built in" without oneDNN. */
const char *kn_onednn_amx(void);

#endif
