/* The meta backend: tensors with shapes and no memory. Every op "runs" by being counted, so a
 * model can be traced for its op list, FLOPs and memory without loading it. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "backends/backend.h"
#include "core/error.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static kn_memory_stats stats;
static kn_meta_trace trace;
static int64_t op_counts[KN_OP_COUNT];

/* The allocator hands out no memory; the block handle carries the size for the statistics. */
static kn_status meta_alloc(int index, size_t bytes, void **data, void **block) {
    *data = NULL;
    *block = (void *)(uintptr_t)(bytes + 1);
    pthread_mutex_lock(&lock);
    stats.alloc_count++;
    stats.allocated_bytes += (int64_t)bytes;
    stats.reserved_bytes += (int64_t)bytes;
    if (stats.allocated_bytes > stats.peak_allocated_bytes) stats.peak_allocated_bytes = stats.allocated_bytes;
    if (stats.allocated_bytes > trace.peak_bytes) trace.peak_bytes = stats.allocated_bytes;
    pthread_mutex_unlock(&lock);
    return KN_OK;
}

static void meta_free(int index, void *block) {
    int64_t bytes = (int64_t)((uintptr_t)block - 1);
    pthread_mutex_lock(&lock);
    stats.allocated_bytes -= bytes;
    stats.reserved_bytes -= bytes;
    pthread_mutex_unlock(&lock);
}

static void meta_stats(int index, kn_memory_stats *out) {
    pthread_mutex_lock(&lock);
    *out = stats;
    pthread_mutex_unlock(&lock);
}

static void meta_reset_peak(int index) {
    pthread_mutex_lock(&lock);
    stats.peak_allocated_bytes = stats.allocated_bytes;
    pthread_mutex_unlock(&lock);
}

static void meta_empty_cache(int index) {}
static int meta_device_count(void) { return 1; }

static void meta_device_properties(int index, kn_device_props *out) {
    snprintf(out->name, sizeof out->name, "meta:%d (shapes only)", index);
}

/* Every op "runs" by being counted. */
static kn_status meta_kernel(kn_node *n) {
    double flops = kn_node_flops(n);
    pthread_mutex_lock(&lock);
    trace.ops++;
    trace.flops += flops;
    op_counts[n->op]++;
    pthread_mutex_unlock(&lock);
    return KN_OK;
}

/* Streams: work runs at once on the calling thread, so there is nothing to queue or wait for. */
static kn_status meta_stream_init(kn_stream *s) { return KN_OK; }
static void meta_stream_destroy(kn_stream *s) {}
static void meta_launch(kn_stream *s, kn_task *t) { kn_task_run(s, t); }
static void meta_stream_wait(kn_stream *s) {}

static kn_status meta_from_host(kn_stream *s, kn_storage *dst, size_t off, const void *src, size_t bytes) { return KN_OK; }

static kn_status meta_to_host(kn_stream *s, void *dst, kn_storage *src, size_t off, size_t bytes) {
    return kn_error(KN_ERR_DEVICE, "meta tensors hold no values to read");
}

static kn_status meta_copy_device(kn_stream *s, kn_storage *dst, size_t dst_off, kn_storage *src, size_t src_off,
                                  size_t bytes) {
    return KN_OK;
}

static kn_status meta_init(kn_backend *b) {
    for (int op = 0; op < KN_OP_COUNT; op++)
        if (!(kn_op_table[op].flags & KN_OPF_SYNC)) b->kernels->op[op] = (kn_kernel_entry){meta_kernel, KN_DTS_ALL};
    return KN_OK;
}

void kn_meta_trace_get(kn_meta_trace *out) {
    if (!out) return;
    pthread_mutex_lock(&lock);
    *out = trace;
    pthread_mutex_unlock(&lock);
}

int64_t kn_meta_trace_op_count(const char *name) {
    int op = name ? kn_op_lookup(name) : -1;
    if (op < 0) return 0;
    pthread_mutex_lock(&lock);
    int64_t c = op_counts[op];
    pthread_mutex_unlock(&lock);
    return c;
}

void kn_meta_trace_reset(void) {
    pthread_mutex_lock(&lock);
    memset(&trace, 0, sizeof trace);
    memset(op_counts, 0, sizeof op_counts);
    trace.peak_bytes = stats.allocated_bytes;
    pthread_mutex_unlock(&lock);
}

/* Every op but the synchronous ones runs meta_kernel (meta_init); no generated code. */
static kn_kernel_table meta_kernels;

kn_backend kn_meta_backend = {
    .name = "meta",
    .type = KN_DEVICE_META,
    .holds_values = false,
    .init = meta_init,
    .device_count = meta_device_count,
    .device_properties = meta_device_properties,
    .alloc = meta_alloc,
    .free = meta_free,
    .memory_stats = meta_stats,
    .memory_reset_peak = meta_reset_peak,
    .empty_cache = meta_empty_cache,
    .stream_init = meta_stream_init,
    .stream_destroy = meta_stream_destroy,
    .launch = meta_launch,
    .stream_wait = meta_stream_wait,
    .event_record = kn_host_event_record,
    .stream_wait_event = kn_host_stream_wait_event,
    .copy_from_host = meta_from_host,
    .copy_to_host = meta_to_host,
    .copy_device = meta_copy_device,
    .kernels = &meta_kernels,
};
