/* Devices, streams and events (DESIGN.md, "Backends: one interface, registry -> device ->
 * stream"). A stream is an ordered queue of work on one device; ops run on the calling
 * thread's current stream of their device. An event marks a point in a stream: another
 * stream can wait for it, the host can wait for it or time the work between two. */
#ifndef KILN_STREAM_H
#define KILN_STREAM_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- devices ---------------------------------------------------------------------------- */

typedef struct kn_device_props {
    char name[64];              /* "cpu:1 (logical device over host memory)" */
    kn_device device;
    int64_t total_memory_bytes; /* memory the device can address (host RAM for cpu); 0 for meta */
    int max_streams;            /* streams the device can have at once, its default one included */
    int streams;                /* streams it has now, its default one included */
    bool holds_values;          /* false for meta: tensors have shapes only */
    bool host_memory;           /* its memory is host memory: every host buffer is already "pinned" */
} kn_device_props;

/* Devices of a type this process can use (0 for a type not built in). The CPU has
 * $KILN_CPU_DEVICES logical devices (default 1) over the same memory, each with its own
 * streams and memory pool. */
KN_API int kn_device_count(kn_device_type type);
KN_API kn_status kn_device_properties(kn_device device, kn_device_props *out);

/* ---- streams ---------------------------------------------------------------------------- */

typedef struct kn_stream kn_stream;

/* A new stream on device (NULL, with the error set, if the device is not available or has
 * max_streams already). Free it with kn_stream_free, which first waits for its work. */
KN_API kn_stream *kn_stream_new(kn_device device);
/* NULL is a no-op; the default stream, or a stream freed already, is refused (error set). A
 * thread whose current stream it was goes back to the default stream. */
KN_API void kn_stream_free(kn_stream *s);
/* The device's default stream (where ops run unless kn_set_stream says otherwise). */
KN_API kn_stream *kn_default_stream(kn_device device);
/* This thread's current stream of device. */
KN_API kn_stream *kn_current_stream(kn_device device);
/* Makes s this thread's current stream of its device; returns the previous one, so that a
 * block can restore it: `kn_stream *prev = kn_set_stream(s); ...; kn_set_stream(prev);`.
 * NULL (error set) for a NULL or freed stream. */
KN_API kn_stream *kn_set_stream(kn_stream *s);
KN_API kn_device kn_stream_device(const kn_stream *s);
/* Waits for the work queued on s; returns the first error an op on s reported since the
 * last sync of s (naming the op, its inputs and the device), and clears it. Errors of other
 * streams stay with them. */
KN_API kn_status kn_stream_sync(kn_stream *s);

/* ---- events ----------------------------------------------------------------------------- */

typedef struct kn_event kn_event;

KN_API kn_event *kn_event_new(void);
KN_API void kn_event_free(kn_event *e); /* NULL is a no-op; waiters still queued see it fire */
/* Marks the current end of s's queue: e fires when the work queued on s so far has run. */
KN_API kn_status kn_event_record(kn_event *e, kn_stream *s);
/* Work queued on s from now on runs after e fires (e's last record; an event never
 * recorded is no wait). The host does not wait. */
KN_API kn_status kn_stream_wait_event(kn_stream *s, kn_event *e);
/* Waits for e's last record to fire; returns the error its stream had then (KN_OK if none;
 * the stream keeps it for its own sync too). */
KN_API kn_status kn_event_sync(kn_event *e);
/* Whether e's last record has fired (true for an event never recorded; false, error set, for
 * a NULL or freed event). */
KN_API bool kn_event_query(kn_event *e);
/* Milliseconds between two fired records on the same device (waits for both). */
KN_API kn_status kn_event_elapsed_ms(kn_event *start, kn_event *end, double *ms);

#ifdef __cplusplus
}
#endif
#endif
