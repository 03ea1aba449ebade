/* Recycling of the small fixed-size objects every op makes (nodes, tensor headers, storage
 * headers). They are allocated on the recording thread and freed on the device's worker, so
 * malloc would serialize both threads on its arena lock; a recycler hands them back instead. */
#ifndef KILN_CORE_RECYCLER_H
#define KILN_CORE_RECYCLER_H

#include <stdatomic.h>
#include <stddef.h>

typedef struct kn_recycler {
    int id;                    /* index of this recycler's thread-local list */
    size_t size;               /* bytes per object */
    _Atomic(void *) returned;  /* objects given back by any thread */
} kn_recycler;

#define KN_RECYCLER_MAX 4
#define KN_RECYCLER_INIT(id_, type) {.id = (id_), .size = sizeof(type) > sizeof(void *) ? sizeof(type) : sizeof(void *)}

/* An object of r->size bytes (contents undefined), or NULL if memory is exhausted. */
void *kn_recycler_get(kn_recycler *r);
/* Gives p back for reuse by any thread. */
void kn_recycler_put(kn_recycler *r, void *p);

#endif
