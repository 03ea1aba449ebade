/* The CPU backend: a caching allocator over aligned host memory, the stream, and the kernel
 * table assembled from each family's registrations. */
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "backends/cpu/codegen.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/custom_source.h"
#include "backends/cpu/stream.h"
#include "core/caching_allocator.h"
#include "core/runtime_impl.h"
#include "exec/dispatch.h"

/* 64-byte alignment: a cache line, and enough for any vector load. */
static void *aligned_host_alloc(size_t bytes) {
    void *p = NULL;
    return posix_memalign(&p, 64, bytes) == 0 ? p : NULL;
}

static kn_caching_allocator host_cache = KN_CACHING_ALLOCATOR_INIT(aligned_host_alloc, free);

static kn_status cpu_alloc(int index, size_t bytes, void **data, void **block) {
    kn_cached_block *b = kn_cache_alloc(&host_cache, bytes);
    if (!b) return KN_ERR_OOM;
    *data = b->ptr;
    *block = b;
    return KN_OK;
}

static void cpu_free(int index, void *block) { kn_cache_free(&host_cache, block); }
static void cpu_memory_stats(int index, kn_memory_stats *out) { kn_cache_stats(&host_cache, out); }
static void cpu_reset_peak(int index) { kn_cache_reset_peak(&host_cache); }
static void cpu_empty_cache(int index) { kn_cache_empty(&host_cache); }
static bool cpu_available(int index) { return index == 0; }

/* ---- stream tasks ------------------------------------------------------------------------ */

static kn_status run_node_task(void *arg) {
    kn_node *n = arg;
    kn_status st = kn_node_execute(&kn_cpu_backend, n);
    kn_node_free(n);
    return st;
}

static void cpu_launch(kn_node *n) { kn_cpu_stream_push(run_node_task, n); }

typedef struct host_copy {
    kn_storage *dst;
    size_t offset, bytes;
    char data[];
} host_copy;

static kn_status run_host_copy(void *arg) {
    host_copy *c = arg;
    memcpy((char *)c->dst->data + c->offset, c->data, c->bytes);
    kn_storage_release(c->dst);
    free(c);
    return KN_OK;
}

static kn_status cpu_copy_from_host(kn_storage *dst, size_t offset, const void *src, size_t bytes) {
    /* The caller may reuse src at once, so the stream copies from a private staging copy. */
    host_copy *c = malloc(sizeof *c + bytes);
    if (!c) return kn_error(KN_ERR_OOM, "from_host: out of host memory staging %zu bytes", bytes);
    memcpy(c->data, src, bytes);
    kn_storage_retain(dst);
    c->dst = dst;
    c->offset = offset;
    c->bytes = bytes;
    kn_cpu_stream_push(run_host_copy, c);
    return KN_OK;
}

static kn_status cpu_copy_to_host(void *dst, kn_storage *src, size_t offset, size_t bytes) {
    kn_status st = kn_cpu_stream_sync();
    if (st != KN_OK) return st;
    memcpy(dst, (char *)src->data + offset, bytes);
    return KN_OK;
}

static kn_status cpu_init(kn_backend *b) {
    for (const kn_kernel_reg *const *family = kn_cpu_kernel_families; *family; family++)
        kn_backend_register_kernels(b, *family);
    return KN_OK;
}

kn_backend kn_cpu_backend = {
    .name = "cpu",
    .type = KN_DEVICE_CPU,
    .holds_values = true,
    .init = cpu_init,
    .custom_prepare = kn_cpu_custom_prepare,
    .available = cpu_available,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .memory_stats = cpu_memory_stats,
    .memory_reset_peak = cpu_reset_peak,
    .empty_cache = cpu_empty_cache,
    .copy_from_host = cpu_copy_from_host,
    .copy_to_host = cpu_copy_to_host,
    .launch = cpu_launch,
    .sync = kn_cpu_stream_sync,
    .compile_fused = kn_cpu_fused_compile,
};
