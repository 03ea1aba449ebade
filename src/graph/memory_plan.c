/* Offsets in one arena by greedy by size (graph/memory_plan.h). */
#include "graph/memory_plan.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static size_t aligned(size_t bytes, size_t align) { return (bytes + align - 1) & ~(align - 1); }

static bool meet(const kn_plan_value *a, const kn_plan_value *b) { return a->first <= b->last && b->first <= a->last; }

static _Thread_local const kn_plan_value *sort_base; /* qsort has no context argument */

/* Largest first; ties by first step, so that the plan does not depend on qsort's order. */
static int by_size(const void *x, const void *y) {
    const kn_plan_value *a = &sort_base[*(const int *)x], *b = &sort_base[*(const int *)y];
    if (a->bytes != b->bytes) return a->bytes < b->bytes ? 1 : -1;
    if (a->first != b->first) return a->first < b->first ? -1 : 1;
    return *(const int *)x - *(const int *)y;
}

/* Largest bytes x steps first, then as by_size. */
static int by_area(const void *x, const void *y) {
    const kn_plan_value *a = &sort_base[*(const int *)x], *b = &sort_base[*(const int *)y];
    const double ea = (double)a->bytes * (a->last - a->first + 1), eb = (double)b->bytes * (b->last - b->first + 1);
    if (ea != eb) return ea < eb ? 1 : -1;
    return by_size(x, y);
}

/* Program order: first step first, then as by_size. */
static int by_first(const void *x, const void *y) {
    const kn_plan_value *a = &sort_base[*(const int *)x], *b = &sort_base[*(const int *)y];
    if (a->first != b->first) return a->first < b->first ? -1 : 1;
    return by_size(x, y);
}

static int by_offset(const void *x, const void *y) {
    const kn_plan_value *a = &sort_base[*(const int *)x], *b = &sort_base[*(const int *)y];
    return a->offset < b->offset ? -1 : a->offset > b->offset;
}

/* The first value of the chain of take-overs that v[i] belongs to. */
static int chain_head(const kn_plan_value *v, int i) {
    while (v[i].takes_over) i = v[i].takes_over - 1;
    return i;
}

/* Places whole[order[0..n_order)] in that order, each into the smallest gap among the values
 * already placed whose lifetimes meet its own, else above them; the arena's size. placed and
 * near are scratch of n_order ints. */
static size_t place(kn_plan_value *whole, const int *order, int n_order, size_t align, int *placed, int *near) {
    size_t arena = 0;
    int n_placed = 0;
    for (int k = 0; k < n_order; k++) {
        kn_plan_value *x = &whole[order[k]];
        const size_t need = aligned(x->bytes, align);
        int n_near = 0; /* placed values live at some step of x's, by offset */
        for (int p = 0; p < n_placed; p++)
            if (meet(&whole[placed[p]], x)) near[n_near++] = placed[p];
        sort_base = whole;
        qsort(near, (size_t)n_near, sizeof *near, by_offset);
        size_t best = SIZE_MAX, best_gap = SIZE_MAX, end = 0;
        for (int p = 0; p < n_near; p++) {
            const kn_plan_value *y = &whole[near[p]];
            if (y->offset >= end && y->offset - end >= need && y->offset - end < best_gap)
                best = end, best_gap = y->offset - end;
            const size_t y_end = y->offset + aligned(y->bytes, align);
            if (y_end > end) end = y_end;
        }
        x->offset = best != SIZE_MAX ? best : end;
        if (x->offset + need > arena) arena = x->offset + need;
        placed[n_placed++] = order[k];
    }
    return arena;
}

size_t kn_memory_plan(kn_plan_value *v, int n, size_t align) {
    const size_t m = (size_t)(n ? n : 1);
    int *order = malloc(m * sizeof *order), *placed = malloc(m * sizeof *placed), *near = malloc(m * sizeof *near);
    int *head = malloc(m * sizeof *head);
    kn_plan_value *whole = malloc(m * sizeof *whole);
    size_t *kept = malloc(m * sizeof *kept);
    if (!order || !placed || !near || !head || !whole || !kept) {
        free(order), free(placed), free(near), free(head), free(whole), free(kept);
        return SIZE_MAX;
    }
    /* Each chain as one value (at its head's index); the other members are left out. */
    int n_order = 0;
    for (int i = 0; i < n; i++) whole[i] = v[i];
    for (int i = 0; i < n; i++) {
        head[i] = chain_head(v, i);
        kn_plan_value *h = &whole[head[i]];
        if (v[i].first < h->first) h->first = v[i].first;
        if (v[i].last > h->last) h->last = v[i].last;
        if (v[i].bytes > h->bytes) h->bytes = v[i].bytes;
    }
    for (int i = 0; i < n; i++)
        if (head[i] == i) order[n_order++] = i;
    /* Greedy by size first; greedy by the area of a value's lifetime (bytes x steps) and a
     * best-fit pass in program order sometimes pack a small program tighter: the smallest of
     * the three is kept. */
    int (*const orders[])(const void *, const void *) = {by_size, by_area, by_first};
    size_t arena = SIZE_MAX;
    for (size_t k = 0; k < sizeof orders / sizeof orders[0]; k++) {
        sort_base = whole;
        qsort(order, (size_t)n_order, sizeof *order, orders[k]);
        size_t got = place(whole, order, n_order, align, placed, near);
        if (got >= arena) continue;
        arena = got;
        for (int i = 0; i < n; i++) kept[i] = whole[head[i]].offset;
    }
    for (int i = 0; i < n; i++) v[i].offset = n_order ? kept[i] : 0;
    free(order), free(placed), free(near), free(head), free(whole), free(kept);
    return n_order ? arena : 0;
}

/* Whether a value takes v[i] over (it then ends where its taker starts). */
static bool taken_over(const kn_plan_value *v, int n, int i) {
    for (int j = 0; j < n; j++)
        if (v[j].takes_over == i + 1) return true;
    return false;
}

size_t kn_memory_plan_peak(const kn_plan_value *v, int n, size_t align) {
    size_t peak = 0;
    bool *ends_early = malloc((size_t)(n ? n : 1) * sizeof *ends_early);
    if (!ends_early) return SIZE_MAX;
    for (int i = 0; i < n; i++) ends_early[i] = taken_over(v, n, i);
    for (int i = 0; i < n; i++) { /* the live sum peaks at some value's first step */
        size_t live = 0;
        for (int j = 0; j < n; j++)
            if (v[j].first <= v[i].first && v[i].first <= v[j].last - ends_early[j]) live += aligned(v[j].bytes, align);
        if (live > peak) peak = live;
    }
    free(ends_early);
    return peak;
}

bool kn_memory_plan_check(const kn_plan_value *v, int n, size_t arena_bytes, size_t align, char *why,
                          size_t why_size) {
    for (int i = 0; i < n; i++) {
        if (v[i].offset % align || v[i].offset + v[i].bytes > arena_bytes) {
            snprintf(why, why_size, "value %d (%zu bytes at %zu) is misaligned or outside the %zu-byte arena", i,
                     v[i].bytes, v[i].offset, arena_bytes);
            return false;
        }
        for (int j = i + 1; j < n; j++) {
            /* a taker and what it takes over: one offset, and one step in common */
            const kn_plan_value *taker = v[i].takes_over == j + 1 ? &v[i] : v[j].takes_over == i + 1 ? &v[j] : NULL;
            const kn_plan_value *taken = taker == &v[i] ? &v[j] : &v[i];
            if (taker && taker->offset == taken->offset && taker->first == taken->last && taker->bytes == taken->bytes)
                continue;
            if (meet(&v[i], &v[j]) && v[i].bytes && v[j].bytes && v[i].offset < v[j].offset + v[j].bytes &&
                v[j].offset < v[i].offset + v[i].bytes) {
                snprintf(why, why_size,
                         "values %d (steps %d-%d, bytes %zu-%zu) and %d (steps %d-%d, bytes %zu-%zu) are live together "
                         "and overlap",
                         i, v[i].first, v[i].last, v[i].offset, v[i].offset + v[i].bytes, j, v[j].first, v[j].last,
                         v[j].offset, v[j].offset + v[j].bytes);
                return false;
            }
        }
    }
    return true;
}
