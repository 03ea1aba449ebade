/* oneDNN's engine and per-thread setting (onednn.h). On Linux a process must ask the kernel for
 * AMX's tile state before AMX code runs; kiln asks once, before oneDNN first dispatches, on a CPU
 * that has AMX, and keeps oneDNN off AMX when the kernel refuses (docs/decisions.md). */
#include "backends/cpu/onednn.h"

#ifdef KILN_HAVE_ONEDNN
#include <cpuid.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static pthread_once_t once = PTHREAD_ONCE_INIT;
static dnnl_engine_t engine;
static char amx_state[96] = "not needed (no AMX)";
static _Thread_local bool thread_ready;

/* OpenMP's own entry point (its ABI), declared here rather than through omp.h, which only
 * the compiler's OpenMP support installs; libgomp, which oneDNN runs on, defines it. */
void omp_set_num_threads(int n);

static bool cpu_has_amx(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    return (d >> 24) & 1; /* AMX-TILE */
}

static void start(void) {
    if (cpu_has_amx()) {
        if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0)
            snprintf(amx_state, sizeof amx_state, "granted");
        else {
            snprintf(amx_state, sizeof amx_state, "refused by the kernel (errno %d, %s)", errno, strerror(errno));
            /* oneDNN must not dispatch to AMX code that would fault. */
            dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx512_core_bf16);
            fprintf(stderr, "kiln: warning: AMX permission %s; oneDNN uses AVX512-BF16\n", amx_state);
        }
    }
    if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success) engine = NULL;
}

dnnl_engine_t kn_onednn_engine(void) {
    pthread_once(&once, start);
    if (!thread_ready) {
        omp_set_num_threads(1); /* this thread's OpenMP setting, which oneDNN reads */
        thread_ready = true;
    }
    return engine;
}

const char *kn_onednn_isa(void) {
    pthread_once(&once, start);
    switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "other";
    }
}

const char *kn_onednn_amx(void) {
    pthread_once(&once, start);
    return amx_state;
}

#else /* no oneDNN in this build */

const char *kn_onednn_isa(void) { return "not built in"; }
const char *kn_onednn_amx(void) { return "not built in"; }

#endif
