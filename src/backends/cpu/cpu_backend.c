/* The CPU backend: $KILN_CPU_DEVICES logical devices over host memory, each with a block pool
 * of aligned host memory and its streams (a worker thread each), and the kernel table
 * assembled from each family's registrations. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/backend.h"
#include "backends/cpu/codegen.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/custom_source.h"
#include "backends/cpu/stream.h"
#include "core/block_pool.h"
#include "core/error.h"
#include "core/runtime_impl.h"

/* 64-byte alignment: a cache line, and enough for any vector load. */
static void *aligned_host_alloc(size_t bytes) {
    void *p = NULL;
    return posix_memalign(&p, 64, bytes) == 0 ? p : NULL;
}

static int device_count = 1;
static kn_block_pool pools[KN_MAX_DEVICES];

static int cpu_device_count(void) { return device_count; }

static void cpu_device_properties(int index, kn_device_props *out) {
    snprintf(out->name, sizeof out->name, "cpu:%d (%s)", index,
             device_count > 1 ? "logical device over host memory" : "host");
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    out->total_memory_bytes = pages > 0 && page > 0 ? (int64_t)pages * page : 0;
}

static kn_status cpu_alloc(int index, size_t bytes, void **data, void **block) {
    kn_pool_block *b = kn_block_pool_alloc(&pools[index], bytes);
    if (!b) return KN_ERR_OOM;
    *data = b->ptr;
    *block = b;
    return KN_OK;
}

static void cpu_free(int index, void *block) { kn_block_pool_free(&pools[index], block); }
static void cpu_memory_stats(int index, kn_memory_stats *out) { kn_block_pool_stats(&pools[index], out); }
static void cpu_reset_peak(int index) { kn_block_pool_reset_peak(&pools[index]); }
static void cpu_empty_cache(int index) { kn_block_pool_empty(&pools[index]); }

/* ---- streams ------------------------------------------------------------------------------ */

static kn_status cpu_stream_init(kn_stream *s) {
    s->impl = kn_cpu_queue_new(s);
    return s->impl ? KN_OK : kn_error(KN_ERR_OOM, "stream on cpu:%d: out of host memory", s->device.index);
}

static void cpu_stream_destroy(kn_stream *s) { kn_cpu_queue_free(s->impl); }
static void cpu_launch(kn_stream *s, kn_task *t) { kn_cpu_queue_push(s->impl, t); }
static void cpu_stream_wait(kn_stream *s) { kn_cpu_queue_wait(s->impl); }

/* ---- copies ------------------------------------------------------------------------------- */

/* One copy on a stream. The storages it holds are released by copy_done, on the host thread
 * that drains completions, as nodes' are. It copies from `staged` when src is NULL. */
typedef struct copy_task {
    kn_task task;
    kn_storage *dst, *src;
    size_t dst_offset, src_offset, bytes;
    char staged[];
} copy_task;

static kn_status run_copy(void *arg) {
    copy_task *c = arg;
    const char *from = c->src ? (const char *)c->src->data + c->src_offset : c->staged;
    memcpy((char *)c->dst->data + c->dst_offset, from, c->bytes);
    return KN_OK;
}

static void copy_done(void *arg) {
    copy_task *c = arg;
    kn_storage_release(c->dst);
    kn_storage_release(c->src);
    free(c);
}

static copy_task *copy_new(kn_storage *dst, size_t dst_offset, size_t bytes, size_t staged) {
    copy_task *c = malloc(sizeof *c + staged);
    if (!c) return kn_error_null(KN_ERR_OOM, "copy: out of host memory for %zu bytes", sizeof *c + staged);
    kn_storage_retain(dst);
    *c = (copy_task){.task = {.run = run_copy, .done = copy_done, .ctx = c}, .dst = dst, .dst_offset = dst_offset, .bytes = bytes};
    return c;
}

/* CPU memory is host memory: there is no pinned buffer to stage through, but the caller may
 * reuse src at once, so the stream copies from a private copy. */
static kn_status cpu_copy_from_host(kn_stream *s, kn_storage *dst, size_t offset, const void *src, size_t bytes) {
    copy_task *c = copy_new(dst, offset, bytes, bytes);
    if (!c) return kn_last_status();
    memcpy(c->staged, src, bytes);
    cpu_launch(s, &c->task);
    return KN_OK;
}

static kn_status cpu_copy_to_host(kn_stream *s, void *dst, kn_storage *src, size_t offset, size_t bytes) {
    cpu_stream_wait(s);
    memcpy(dst, (char *)src->data + offset, bytes);
    return KN_OK;
}

/* Between any two cpu devices: one memcpy on the stream, no staging. */
static kn_status cpu_copy_device(kn_stream *s, kn_storage *dst, size_t dst_offset, kn_storage *src, size_t src_offset,
                                 size_t bytes) {
    copy_task *c = copy_new(dst, dst_offset, bytes, 0);
    if (!c) return kn_last_status();
    kn_storage_retain(src);
    c->src = src;
    c->src_offset = src_offset;
    cpu_launch(s, &c->task);
    return KN_OK;
}

static kn_status cpu_init(kn_backend *b) {
    const char *env = getenv("KILN_CPU_DEVICES");
    if (env && *env) {
        char *end;
        long n = strtol(env, &end, 10);
        if (*end || n < 1 || n > KN_MAX_DEVICES)
            return kn_error(KN_ERR_ARG, "KILN_CPU_DEVICES=%s: expected a number of devices from 1 to %d", env,
                            KN_MAX_DEVICES);
        device_count = (int)n;
    }
    for (int i = 0; i < KN_MAX_DEVICES; i++) pools[i] = (kn_block_pool)KN_BLOCK_POOL_INIT(aligned_host_alloc, free);
    /* OpenBLAS runs each call on the calling thread: kiln's pool spreads the products
     * (gemm_tiles.h), and OpenBLAS's own threads would compete with it for the cores. */
    openblas_set_num_threads(1);
    for (const kn_kernel_reg *const *family = kn_cpu_kernel_families; *family; family++)
        kn_kernel_table_add(b->kernels, *family);
    return KN_OK;
}

static kn_kernel_table cpu_kernels = {
    .compile_fused = kn_cpu_fused_compile, .fused_source = kn_cpu_fused_source, .custom_prepare = kn_cpu_custom_prepare};

kn_backend kn_cpu_backend = {
    .name = "cpu",
    .type = KN_DEVICE_CPU,
    .holds_values = true,
    .host_memory = true,
    .init = cpu_init,
    .device_count = cpu_device_count,
    .device_properties = cpu_device_properties,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .memory_stats = cpu_memory_stats,
    .memory_reset_peak = cpu_reset_peak,
    .empty_cache = cpu_empty_cache,
    .stream_init = cpu_stream_init,
    .stream_destroy = cpu_stream_destroy,
    .launch = cpu_launch,
    .stream_wait = cpu_stream_wait,
    .event_record = kn_host_event_record,
    .stream_wait_event = kn_host_stream_wait_event,
    .copy_from_host = cpu_copy_from_host,
    .copy_to_host = cpu_copy_to_host,
    .copy_device = cpu_copy_device,
    .kernels = &cpu_kernels,
};
