/* Recyclers: a lock-free stack of returned objects that a thread takes whole (an exchange, so
 * there is no ABA problem) into its own list, then serves from without synchronization. A
 * thread that exits gives its list back. */
#include "core/recycler.h"

#include <pthread.h>
#include <stdlib.h>

static _Thread_local void *local_lists[KN_RECYCLER_MAX];
static _Thread_local kn_recycler *local_owners[KN_RECYCLER_MAX];
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;

static void push_chain(kn_recycler *r, void *first, void *last) {
    void *head = atomic_load_explicit(&r->returned, memory_order_relaxed);
    do {
        *(void **)last = head;
    } while (!atomic_compare_exchange_weak_explicit(&r->returned, &head, first, memory_order_release,
                                                    memory_order_relaxed));
}

static void give_back_lists(void *unused) {
    (void)unused;
    for (int i = 0; i < KN_RECYCLER_MAX; i++) {
        void *first = local_lists[i];
        if (!first) continue;
        void *last = first;
        while (*(void **)last) last = *(void **)last;
        push_chain(local_owners[i], first, last);
        local_lists[i] = NULL;
    }
}

static void make_exit_key(void) { pthread_key_create(&exit_key, give_back_lists); }

void *kn_recycler_get(kn_recycler *r) {
    void **list = &local_lists[r->id];
    if (!*list) {
        *list = atomic_exchange_explicit(&r->returned, NULL, memory_order_acquire);
        if (*list && !local_owners[r->id]) {
            local_owners[r->id] = r;
            pthread_once(&exit_key_once, make_exit_key);
            pthread_setspecific(exit_key, r); /* any non-NULL value arms the destructor */
        }
    }
    void *p = *list;
    if (!p) return malloc(r->size);
    *list = *(void **)p;
    return p;
}

void kn_recycler_put(kn_recycler *r, void *p) { push_chain(r, p, p); }
