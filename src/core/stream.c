/* Streams and events: each device's streams, the thread's current stream of each device,
 * errors that belong to a stream, events fired by stream tasks, and the completion list
 * through which finished tasks go back to their owners on a host thread. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/backend_device.h"
#include "core/error.h"
#include "core/runtime_impl.h"

/* ---- the completion list ------------------------------------------------------------------ */

static _Atomic(kn_task *) completed;

void kn_task_run(kn_stream *s, kn_task *t) {
    bool report = t->done != NULL; /* without done, run owns t and may have freed it */
    kn_status st = t->run(t->ctx);
    if (st != KN_OK) kn_stream_fail(s, st);
    if (!report || (t->settle && t->settle(t->ctx))) return;
    kn_task *head = atomic_load_explicit(&completed, memory_order_relaxed);
    do t->next = head;
    while (!atomic_compare_exchange_weak_explicit(&completed, &head, t, memory_order_release, memory_order_relaxed));
}

void kn_tasks_drain(void) {
    if (!atomic_load_explicit(&completed, memory_order_relaxed)) return;
    kn_task *t = atomic_exchange_explicit(&completed, NULL, memory_order_acquire);
    while (t) {
        kn_task *next = t->next; /* done may free t */
        t->done(t->ctx);
        t = next;
    }
}

/* ---- streams ------------------------------------------------------------------------------ */

void kn_stream_fail(kn_stream *s, kn_status st) {
    pthread_mutex_lock(&s->lock);
    if (s->error == KN_OK) {
        s->error = st;
        snprintf(s->message, sizeof s->message, "%s", kn_last_error());
    }
    pthread_mutex_unlock(&s->lock);
    kn_clear_error();
}

/* Hands s's error (if any) to this thread as its last error, and clears it on s. */
static kn_status take_error(kn_stream *s) {
    pthread_mutex_lock(&s->lock);
    kn_status st = s->error;
    if (st != KN_OK) kn_error(st, "%s", s->message);
    s->error = KN_OK;
    pthread_mutex_unlock(&s->lock);
    return st;
}

/* Creation and freeing are rare: one lock covers every device's list and the free list.
 * Freed streams go to the free list and are never given back to the system, so a freed
 * stream passed to the API is reported (until a new stream reuses it) instead of undefined. */
static pthread_mutex_t streams_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(kn_stream *) defaults[KN_DEVICE_TYPE_COUNT][KN_MAX_DEVICES];
static kn_stream *others[KN_DEVICE_TYPE_COUNT][KN_MAX_DEVICES]; /* non-default live streams */
static int others_count[KN_DEVICE_TYPE_COUNT][KN_MAX_DEVICES], next_id[KN_DEVICE_TYPE_COUNT][KN_MAX_DEVICES];
static kn_stream *free_streams;
static _Thread_local kn_stream *current[KN_DEVICE_TYPE_COUNT][KN_MAX_DEVICES];

/* A new stream; streams_lock is held. NULL with the error set on failure. */
static kn_stream *stream_make(kn_backend *b, kn_device d, int id) {
    kn_stream *s = free_streams;
    if (s) free_streams = s->next;
    else if (!(s = calloc(1, sizeof *s)))
        return kn_error_null(KN_ERR_OOM, "stream on %s:%d: out of host memory", b->name, d.index);
    else pthread_mutex_init(&s->lock, NULL);
    s->device = d;
    s->backend = b;
    s->id = id;
    s->impl = NULL;
    s->error = KN_OK;
    s->next = NULL;
    if (b->stream_init(s) != KN_OK) {
        s->next = free_streams;
        free_streams = s;
        return NULL;
    }
    s->magic = KN_STREAM_LIVE;
    return s;
}

static kn_stream *default_of(kn_device d) {
    _Atomic(kn_stream *) *slot = &defaults[d.type][d.index];
    kn_stream *s = atomic_load_explicit(slot, memory_order_acquire);
    if (s) return s;
    pthread_mutex_lock(&streams_lock);
    s = atomic_load_explicit(slot, memory_order_relaxed);
    if (!s && (s = stream_make(kn_backend_for(d.type), d, 0))) atomic_store_explicit(slot, s, memory_order_release);
    pthread_mutex_unlock(&streams_lock);
    return s;
}

kn_stream *kn_stream_of(kn_device d) {
    kn_stream *s = current[d.type][d.index];
    return s ? s : default_of(d);
}

/* A stream argument checked: NULL and freed streams are errors naming fn. */
static bool stream_ok(const kn_stream *s, const char *fn) {
    if (!s) return kn_error(KN_ERR_NULL, "%s: the stream is NULL", fn), false;
    if (s->magic != KN_STREAM_LIVE) return kn_error(KN_ERR_ARG, "%s: the stream was freed", fn), false;
    return true;
}

kn_stream *kn_stream_new(kn_device d) {
    kn_backend *b = kn_backend_get(d);
    if (!b || !default_of(d)) return NULL;
    pthread_mutex_lock(&streams_lock);
    kn_stream *s = NULL;
    if (1 + others_count[d.type][d.index] >= KN_MAX_STREAMS)
        kn_error(KN_ERR_ARG, "stream_new: %s:%d has %d streams, the most one device can have", b->name, d.index,
                 KN_MAX_STREAMS);
    else if ((s = stream_make(b, d, ++next_id[d.type][d.index]))) {
        s->next = others[d.type][d.index];
        others[d.type][d.index] = s;
        others_count[d.type][d.index]++;
    }
    pthread_mutex_unlock(&streams_lock);
    return s;
}

void kn_stream_free(kn_stream *s) {
    if (!s) return;
    if (!stream_ok(s, "stream_free")) return;
    kn_device d = s->device;
    if (s->id == 0) {
        kn_error(KN_ERR_ARG, "stream_free: the default stream of %s:%d cannot be freed", s->backend->name, d.index);
        return;
    }
    s->backend->stream_wait(s);
    kn_tasks_drain();
    if (current[d.type][d.index] == s) current[d.type][d.index] = NULL;
    pthread_mutex_lock(&streams_lock);
    for (kn_stream **p = &others[d.type][d.index]; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            break;
        }
    others_count[d.type][d.index]--;
    s->magic = 0;
    s->backend->stream_destroy(s);
    s->next = free_streams;
    free_streams = s;
    pthread_mutex_unlock(&streams_lock);
}

kn_stream *kn_default_stream(kn_device d) { return kn_backend_get(d) ? default_of(d) : NULL; }
kn_stream *kn_current_stream(kn_device d) { return kn_backend_get(d) ? kn_stream_of(d) : NULL; }
kn_device kn_stream_device(const kn_stream *s) { return s ? s->device : KN_CPU; }

kn_stream *kn_set_stream(kn_stream *s) {
    if (!stream_ok(s, "set_stream")) return NULL;
    kn_stream *prev = kn_stream_of(s->device);
    current[s->device.type][s->device.index] = s->id ? s : NULL;
    return prev;
}

kn_status kn_stream_sync(kn_stream *s) {
    if (!stream_ok(s, "stream_sync")) return kn_last_status();
    s->backend->stream_wait(s);
    kn_tasks_drain();
    return take_error(s);
}

int kn_stream_count(kn_device d) {
    pthread_mutex_lock(&streams_lock);
    int n = 1 + others_count[d.type][d.index];
    pthread_mutex_unlock(&streams_lock);
    return n;
}

/* Waits for every stream of d; with `take`, hands over (and clears) the errors of the
 * streams it says, keeping the first's message. */
static kn_status wait_device(kn_device d, bool (*take)(const kn_stream *s)) {
    kn_stream *dflt = atomic_load_explicit(&defaults[d.type][d.index], memory_order_acquire);
    if (!dflt) return KN_OK; /* no stream: nothing was ever queued */
    kn_status first = KN_OK;
    char message[1024] = "";
    pthread_mutex_lock(&streams_lock);
    for (kn_stream *s = dflt; s; s = s == dflt ? others[d.type][d.index] : s->next) {
        s->backend->stream_wait(s);
        if (!take || !take(s)) continue;
        kn_status st = take_error(s);
        if (st != KN_OK && first == KN_OK) {
            first = st;
            snprintf(message, sizeof message, "%s", kn_last_error());
        }
    }
    pthread_mutex_unlock(&streams_lock);
    kn_tasks_drain();
    if (first != KN_OK) kn_error(first, "%s", message);
    return first;
}

static bool is_current(const kn_stream *s) { return s == kn_stream_of(s->device); }
static bool every(const kn_stream *s) { return (void)s, true; }

kn_status kn_device_sync(kn_device d) { return wait_device(d, is_current); }
void kn_device_wait(kn_device d) { wait_device(d, NULL); }

kn_status kn_streams_sync_all(void) {
    kn_status first = KN_OK;
    char message[1024] = "";
    for (int t = 0; t < KN_DEVICE_TYPE_COUNT; t++) {
        kn_backend *b = kn_backend_for((kn_device_type)t);
        for (int i = 0; b && i < b->device_count(); i++) {
            kn_status st = wait_device((kn_device){(kn_device_type)t, i}, every);
            if (st != KN_OK && first == KN_OK) {
                first = st;
                snprintf(message, sizeof message, "%s", kn_last_error());
            }
        }
    }
    if (first != KN_OK) kn_error(first, "%s", message);
    return first;
}

/* ---- events ------------------------------------------------------------------------------- */

/* Records count up; a stream task fires each record in its turn. Both counters only grow,
 * across kn_event_free and reuse too, so a waiter queued for record g is released by g's
 * firing whatever happened to the event since. */
struct kn_event {
    uint32_t magic;
    pthread_mutex_t lock;
    pthread_cond_t fired_cond;
    uint64_t recorded, fired;
    uint64_t born;        /* `recorded` when kn_event_new handed it out: records since are its own */
    kn_device device;     /* of the last record */
    int64_t fired_ns;     /* monotonic clock at the last firing */
    kn_status error;      /* its stream's error at the last firing */
    char message[1024];
    struct kn_event *next; /* the free list */
};
#define KN_EVENT_LIVE 0x4556454eu

static pthread_mutex_t events_lock = PTHREAD_MUTEX_INITIALIZER;
static kn_event *free_events;

static bool event_ok(const kn_event *e, const char *fn) {
    if (!e) return kn_error(KN_ERR_NULL, "%s: the event is NULL", fn), false;
    if (e->magic != KN_EVENT_LIVE) return kn_error(KN_ERR_ARG, "%s: the event was freed", fn), false;
    return true;
}

kn_event *kn_event_new(void) {
    pthread_mutex_lock(&events_lock);
    kn_event *e = NULL;
    for (kn_event **p = &free_events; *p; p = &(*p)->next) {
        pthread_mutex_lock(&(*p)->lock);
        bool idle = (*p)->fired == (*p)->recorded; /* no record still to fire */
        pthread_mutex_unlock(&(*p)->lock);
        if (idle) {
            e = *p;
            *p = e->next;
            break;
        }
    }
    pthread_mutex_unlock(&events_lock);
    if (!e) {
        if (!(e = calloc(1, sizeof *e))) return kn_error_null(KN_ERR_OOM, "event_new: out of host memory");
        pthread_mutex_init(&e->lock, NULL);
        pthread_cond_init(&e->fired_cond, NULL);
    }
    e->magic = KN_EVENT_LIVE;
    e->error = KN_OK;
    e->born = e->recorded; /* idle: no other thread touches it */
    return e;
}

void kn_event_free(kn_event *e) {
    if (!e || !event_ok(e, "event_free")) return;
    e->magic = 0;
    pthread_mutex_lock(&events_lock);
    e->next = free_events;
    free_events = e;
    pthread_mutex_unlock(&events_lock);
}

typedef struct event_task {
    kn_task task;
    kn_event *event;
    kn_stream *stream;
    uint64_t record;
} event_task;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static kn_status fire(void *arg) {
    event_task *f = arg;
    kn_event *e = f->event;
    int64_t t = now_ns();
    pthread_mutex_lock(&f->stream->lock);
    pthread_mutex_lock(&e->lock);
    if (f->record > e->fired) {
        e->fired = f->record;
        e->fired_ns = t;
        e->error = f->stream->error;
        snprintf(e->message, sizeof e->message, "%s", f->stream->message);
    }
    pthread_cond_broadcast(&e->fired_cond);
    pthread_mutex_unlock(&e->lock);
    pthread_mutex_unlock(&f->stream->lock);
    free(f);
    return KN_OK;
}

static kn_status wait_for(void *arg) {
    event_task *w = arg;
    kn_event *e = w->event;
    pthread_mutex_lock(&e->lock);
    while (e->fired < w->record) pthread_cond_wait(&e->fired_cond, &e->lock);
    pthread_mutex_unlock(&e->lock);
    free(w);
    return KN_OK;
}

static event_task *event_task_new(kn_status (*run)(void *), kn_event *e, kn_stream *s, uint64_t record) {
    event_task *f = malloc(sizeof *f);
    if (!f) return kn_error_null(KN_ERR_OOM, "event: out of host memory");
    *f = (event_task){.task = {run, NULL, f, NULL}, .event = e, .stream = s, .record = record};
    return f;
}

kn_status kn_host_event_record(kn_event *e, kn_stream *s) {
    event_task *f = event_task_new(fire, e, s, 0);
    if (!f) return kn_last_status();
    pthread_mutex_lock(&e->lock);
    f->record = ++e->recorded;
    e->device = s->device;
    pthread_mutex_unlock(&e->lock);
    s->backend->launch(s, &f->task);
    return KN_OK;
}

kn_status kn_host_stream_wait_event(kn_stream *s, kn_event *e) {
    pthread_mutex_lock(&e->lock);
    uint64_t record = e->recorded;
    bool fired = e->fired >= record;
    pthread_mutex_unlock(&e->lock);
    if (fired) return KN_OK;
    event_task *w = event_task_new(wait_for, e, s, record);
    if (!w) return kn_last_status();
    s->backend->launch(s, &w->task);
    return KN_OK;
}

kn_status kn_event_record(kn_event *e, kn_stream *s) {
    if (!event_ok(e, "event_record") || !stream_ok(s, "event_record")) return kn_last_status();
    return s->backend->event_record(e, s);
}

kn_status kn_stream_wait_event(kn_stream *s, kn_event *e) {
    if (!stream_ok(s, "stream_wait_event") || !event_ok(e, "stream_wait_event")) return kn_last_status();
    return s->backend->stream_wait_event(s, e);
}

/* Waits for the event's last record; false if it was never recorded. */
static bool event_wait(kn_event *e) {
    pthread_mutex_lock(&e->lock);
    uint64_t record = e->recorded;
    while (e->fired < record) pthread_cond_wait(&e->fired_cond, &e->lock);
    pthread_mutex_unlock(&e->lock);
    return record > e->born;
}

kn_status kn_event_sync(kn_event *e) {
    if (!event_ok(e, "event_sync")) return kn_last_status();
    event_wait(e);
    kn_tasks_drain();
    pthread_mutex_lock(&e->lock);
    kn_status st = e->error;
    if (st != KN_OK) kn_error(st, "%s", e->message);
    pthread_mutex_unlock(&e->lock);
    return st;
}

bool kn_event_query(kn_event *e) {
    if (!event_ok(e, "event_query")) return false;
    pthread_mutex_lock(&e->lock);
    bool done = e->fired >= e->recorded;
    pthread_mutex_unlock(&e->lock);
    return done;
}

kn_status kn_event_elapsed_ms(kn_event *start, kn_event *end, double *ms) {
    if (!event_ok(start, "event_elapsed_ms") || !event_ok(end, "event_elapsed_ms")) return kn_last_status();
    if (!ms) return kn_error(KN_ERR_NULL, "event_elapsed_ms: the output pointer is NULL");
    if (!event_wait(start) || !event_wait(end))
        return kn_error(KN_ERR_ARG, "event_elapsed_ms: the %s event was never recorded",
                        start->recorded > start->born ? "end" : "start");
    pthread_mutex_lock(&start->lock);
    kn_device a = start->device;
    int64_t t0 = start->fired_ns;
    pthread_mutex_unlock(&start->lock);
    pthread_mutex_lock(&end->lock);
    kn_device b = end->device;
    int64_t t1 = end->fired_ns;
    pthread_mutex_unlock(&end->lock);
    if (a.type != b.type || a.index != b.index)
        return kn_error(KN_ERR_DEVICE, "event_elapsed_ms: the events were recorded on %s:%d and %s:%d; time is measured on one device",
                        kn_device_type_name(a.type), a.index, kn_device_type_name(b.type), b.index);
    *ms = (double)(t1 - t0) / 1e6;
    return KN_OK;
}
