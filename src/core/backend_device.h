/* The device side of a backend (DESIGN.md "Backends: one interface, registry -> device ->
 * stream"): what core calls -- devices, memory, streams, events, copies -- and the registry.
 * A backend's kernels (indexed by op) and its code generation are above core: the struct
 * carries them as an opaque pointer that backends/backend.h defines and core never follows. */
#ifndef KILN_CORE_BACKEND_DEVICE_H
#define KILN_CORE_BACKEND_DEVICE_H

#include <pthread.h>
#include <stdbool.h>

#include "core/task.h"
#include "core/tensor_impl.h"
#include "kiln/runtime.h"
#include "kiln/stream.h"

/* At most this many devices of one type, and streams on one device. */
#define KN_MAX_DEVICES 16
#define KN_MAX_STREAMS 64

/* A stream (include/kiln/stream.h). Core keeps the fields; the backend's queue is `impl`. */
struct kn_stream {
    uint32_t magic;         /* KN_STREAM_LIVE until freed */
    kn_device device;
    struct kn_backend *backend;
    int id;                 /* 0: the device's default stream */
    void *impl;             /* the backend's queue */
    pthread_mutex_t lock;   /* guards error and message */
    kn_status error;        /* first asynchronous error since the last sync */
    char message[1024];
    struct kn_stream *next; /* the device's live streams, or the free list */
};
#define KN_STREAM_LIVE 0x5354524du

/* Notes an error of work on s (the thread's last error is its message), for s's next sync. */
void kn_stream_fail(kn_stream *s, kn_status st);

/* The kernel table and code generation (backends/backend.h). */
struct kn_kernel_table;

typedef struct kn_backend {
    const char *name;
    kn_device_type type;
    bool holds_values; /* false for meta: storages have no memory */
    bool host_memory;  /* its memory is host memory (no pinned staging buffers needed) */

    kn_status (*init)(struct kn_backend *b);
    /* Devices: how many this process can use; name and memory of one (core fills the rest). */
    int (*device_count)(void);
    void (*device_properties)(int index, kn_device_props *out);

    /* Memory, through the device's caching allocator (core/block_pool.h). `block` is the
     * allocator's handle. A block is freed only once every node that used it, on any stream,
     * has completed (exec holds nodes until then), so it may be reused on any stream at once. */
    kn_status (*alloc)(int index, size_t bytes, void **data, void **block);
    void (*free)(int index, void *block);
    void (*memory_stats)(int index, kn_memory_stats *out);
    void (*memory_reset_peak)(int index);
    void (*empty_cache)(int index);

    /* Streams. stream_init makes s->impl (no thread need start before work is queued);
     * stream_destroy runs after s has been waited for. launch queues a task: the stream runs
     * tasks in order, each through kn_task_run (which notes errors on the stream and hands
     * completed tasks back); it never frees or releases anything of the task's owner.
     * stream_wait waits until every task queued on s has run (errors are core's business). */
    kn_status (*stream_init)(kn_stream *s);
    void (*stream_destroy)(kn_stream *s);
    void (*launch)(kn_stream *s, kn_task *t);
    void (*stream_wait)(kn_stream *s);

    /* Events: record e at the end of s's queue; make s's later work wait for e. Backends
     * whose streams run tasks on host threads use core's (kn_host_event_record, ...). */
    kn_status (*event_record)(kn_event *e, kn_stream *s);
    kn_status (*stream_wait_event)(kn_stream *s, kn_event *e);

    /* Copies, queued on s after its earlier work. copy_from_host takes its own copy of src
     * before returning (the caller may reuse it at once); copy_to_host waits for s, then
     * copies; copy_device copies between two storages of this backend (any of its devices)
     * and holds both until it has run. */
    kn_status (*copy_from_host)(kn_stream *s, kn_storage *dst, size_t dst_offset, const void *src, size_t bytes);
    kn_status (*copy_to_host)(kn_stream *s, void *dst, kn_storage *src, size_t src_offset, size_t bytes);
    kn_status (*copy_device)(kn_stream *s, kn_storage *dst, size_t dst_offset, kn_storage *src, size_t src_offset,
                             size_t bytes);

    /* The kernels that run nodes on this backend (never NULL; exec and ops read it through
     * backends/backend.h). */
    struct kn_kernel_table *kernels;
} kn_backend;

/* Adds b to the registry (before or after start-up; a late one is initialized at once).
 * KN_ERR_ARG if a backend of its device type is registered already. */
kn_status kn_backend_register(kn_backend *b);
/* Generated from CMake's KILN_BACKENDS (src/backends/builtin_backends.c.in): registers every
 * built-in backend. */
void kn_register_builtin_backends(void);
/* Initializes every registered backend; the first failure's status (runtime start-up). */
kn_status kn_backends_init(void);
/* The backend for a device type (NULL if none is registered). */
kn_backend *kn_backend_for(kn_device_type type);
/* Whether a registered backend has device d (kn_device_available without starting the runtime,
 * for start-up itself). */
bool kn_device_exists(kn_device d);
/* Makes d (which exists) every thread's default device, for start-up's KILN_DEVICE: through
 * kn_set_default_device it would wait on the start-up it is part of. */
void kn_device_set_process_default(kn_device d);
/* The same, initialized; NULL with an error if the device is not available. */
kn_backend *kn_backend_get(kn_device device);

/* The current stream of an available device, for the dispatcher: no checks, no error. */
kn_stream *kn_stream_of(kn_device device);
/* Waits for every stream of device; returns (and clears) the error of its current stream.
 * Reading values (to_host, ops whose shapes depend on values) goes through this, so a value
 * is never read early whichever stream made it; other streams keep their errors. */
kn_status kn_device_sync(kn_device device);
/* The same, taking no error (kn_memory_empty_cache). */
void kn_device_wait(kn_device device);
/* Waits for every stream of every device; the first error any of them had (all are cleared). */
kn_status kn_streams_sync_all(void);
/* Streams device has now, its default one included. */
int kn_stream_count(kn_device device);
/* Events on streams that run tasks on host threads (cpu, meta): a task fires the event. */
kn_status kn_host_event_record(kn_event *e, kn_stream *s);
kn_status kn_host_stream_wait_event(kn_stream *s, kn_event *e);

#endif
