/* Memory planning for a compiled program: every intermediate value gets an offset in one arena,
 * chosen from when each value is live, so that running the program allocates nothing per
 * value. The planner knows only sizes and lifetimes (steps of the program's schedule), which
 * keeps it testable on made-up programs; exec/compiled.c derives both from the nodes. */
#ifndef KILN_GRAPH_MEMORY_PLAN_H
#define KILN_GRAPH_MEMORY_PLAN_H

#include <stdbool.h>
#include <stddef.h>

typedef struct kn_plan_value {
    size_t bytes;
    int first, last; /* live from step first (written) to step last (last read), inclusive */
    /* In-place reuse: 1 + the index of a value of the same size whose last step is this one's
     * first, and whose bytes this one may take over exactly (a kernel that writes each element
     * after reading the same element of its dead input); 0: none. Each value is taken over at
     * most once; the caller answers for the kernel. */
    int takes_over;
    size_t offset;   /* set by kn_memory_plan */
} kn_plan_value;

/* Places the n values (offsets multiples of align, a power of two): greedy by size, the
 * "Greedy by Size for Offset Calculation" of Pisarchyk and Lee (2020, "Efficient Memory
 * Management for Deep Neural Net Inference"): largest first, each into the smallest gap
 * between the values already placed whose lifetimes meet its own, else above them. A chain of
 * values that take one another over is placed as one value living from the first's first step
 * to the last's last, all at one offset. Returns the arena's size in bytes, or SIZE_MAX when
 * there is no memory for the bookkeeping. */
size_t kn_memory_plan(kn_plan_value *v, int n, size_t align);

/* The lower bound of any plan: the largest sum of (aligned) sizes live at one step (a value
 * taken over no longer counts at its last step, where its taker does); SIZE_MAX when out of
 * memory. */
size_t kn_memory_plan_peak(const kn_plan_value *v, int n, size_t align);

/* The plan's checker: every value aligned and inside the arena, and no two values live at a
 * common step overlapping, but for a value and the one it takes over, which must share their
 * offset and meet only at that step. False with the first violation described in why. */
bool kn_memory_plan_check(const kn_plan_value *v, int n, size_t arena_bytes, size_t align, char *why,
                          size_t why_size);

#endif
