/* The compiled mode's memory planner (graph/memory_plan.h) on made-up programs: every plan
 * passes its checker, meets the lower bound (the peak live sum) where greedy by size is known
 * to (chains, the forward/backward nest of a training step), in-place take-overs halve a
 * chain's arena, and the checker catches overlaps. */
#include <stdint.h>
#include <stdlib.h>

#include "graph/memory_plan.h"
#include "harness.h"

enum { ALIGN = 64 };

static void check_plan(kn_plan_value *v, int n, const char *what, bool at_peak) {
    size_t arena = kn_memory_plan(v, n, ALIGN), peak = kn_memory_plan_peak(v, n, ALIGN);
    char why[256] = "";
    CHECK_MSG(arena != SIZE_MAX, "%s: no plan", what);
    CHECK_MSG(kn_memory_plan_check(v, n, arena, ALIGN, why, sizeof why), "%s: %s", what, why);
    CHECK_MSG(arena >= peak, "%s: arena %zu below the peak live sum %zu", what, arena, peak);
    if (at_peak) CHECK_MSG(arena == peak, "%s: arena %zu, peak live sum %zu", what, arena, peak);
}

/* y_i = f(y_{i-1}): two values live at each step, whatever their sizes. */
static void test_chain_needs_two_live_values(void) {
    kn_plan_value v[40];
    for (int i = 0; i < 40; i++) v[i] = (kn_plan_value){.bytes = (size_t)(100 + 37 * (i % 7)), .first = i, .last = i + 1};
    check_plan(v, 40, "chain", false);
    size_t arena = kn_memory_plan(v, 40, ALIGN);
    CHECK_MSG(arena <= 2 * 384, "chain: arena %zu for two live values of at most 384 aligned bytes", arena);
}

/* The same chain where each value takes its input over (an elementwise kernel writing over its
 * dead input): one value's memory serves them all; a branch that reads a value later keeps it. */
static void test_take_overs_run_a_chain_in_place(void) {
    kn_plan_value v[41];
    for (int i = 0; i < 40; i++) v[i] = (kn_plan_value){.bytes = 256, .first = i, .last = i + 1, .takes_over = i ? i : 0};
    check_plan(v, 40, "chain in place", true);
    CHECK(kn_memory_plan(v, 40, ALIGN) == 256 && kn_memory_plan_peak(v, 40, ALIGN) == 256);
    for (int i = 0; i < 40; i++) CHECK(v[i].offset == 0);
    v[10].last = 30; /* value 10 is read again at step 30: value 11 cannot take it over */
    v[11].takes_over = 0;
    v[41 - 1] = (kn_plan_value){.bytes = 256, .first = 35, .last = 36}; /* and one more value on its own */
    check_plan(v, 41, "chain with a branch", true);
    CHECK(kn_memory_plan(v, 41, ALIGN) == 512);
    char why[256];
    v[11].takes_over = 11; /* the checker refuses a take-over of a value still read later */
    v[11].offset = v[10].offset;
    CHECK(!kn_memory_plan_check(v, 41, 512, ALIGN, why, sizeof why));
}

/* A training step's shape: forward activations live until their backward reads them, in
 * reverse order, beside short-lived temporaries. */
static void test_forward_backward_nest(void) {
    enum { L = 12 };
    kn_plan_value v[3 * L];
    int n = 0;
    for (int l = 0; l < L; l++) { /* activation l: made at step 2l, read by backward step 4L-2l */
        v[n++] = (kn_plan_value){.bytes = 4096, .first = 2 * l, .last = 4 * L - 2 * l};
        v[n++] = (kn_plan_value){.bytes = 8192, .first = 2 * l + 1, .last = 2 * l + 1}; /* a temporary */
        v[n++] = (kn_plan_value){.bytes = 4096, .first = 4 * L - 2 * l, .last = 4 * L - 2 * l + 1}; /* a gradient */
    }
    check_plan(v, n, "forward/backward", true);
}

/* Random lifetimes and sizes: the checker holds every time, and the arena stays near the peak. */
static void test_random_programs(void) {
    srand(7);
    for (int trial = 0; trial < 200; trial++) {
        int n = 1 + rand() % 60;
        kn_plan_value v[60];
        for (int i = 0; i < n; i++) {
            int first = rand() % 50;
            v[i] = (kn_plan_value){.bytes = (size_t)(rand() % 5000), .first = first, .last = first + rand() % 10};
        }
        char what[32];
        snprintf(what, sizeof what, "random program %d", trial);
        check_plan(v, n, what, false);
        size_t arena = kn_memory_plan(v, n, ALIGN), peak = kn_memory_plan_peak(v, n, ALIGN);
        CHECK_MSG(arena <= 2 * peak + ALIGN, "%s: arena %zu against a peak of %zu", what, arena, peak);
    }
}

static void test_checker_finds_overlaps(void) {
    kn_plan_value v[3] = {{.bytes = 100, .first = 0, .last = 2, .offset = 0},
                          {.bytes = 100, .first = 2, .last = 3, .offset = 64},
                          {.bytes = 100, .first = 3, .last = 4, .offset = 0}};
    char why[256];
    CHECK(!kn_memory_plan_check(v, 3, 256, ALIGN, why, sizeof why)); /* 0 and 1 meet at step 2 */
    v[1].offset = 128;
    CHECK(kn_memory_plan_check(v, 3, 256, ALIGN, why, sizeof why)); /* 0 and 2 never meet */
    CHECK(!kn_memory_plan_check(v, 3, 200, ALIGN, why, sizeof why)); /* 1 ends past the arena */
    v[2].offset = 8;
    CHECK(!kn_memory_plan_check(v, 3, 256, ALIGN, why, sizeof why)); /* misaligned */
    CHECK(kn_memory_plan(v, 0, ALIGN) == 0);
}

int main(void) {
    RUN(test_chain_needs_two_live_values);
    RUN(test_take_overs_run_a_chain_in_place);
    RUN(test_forward_backward_nest);
    RUN(test_random_programs);
    RUN(test_checker_finds_overlaps);
    return test_summary();
}
