/* The layers' seams: the dispatcher's interposers (order, state, refusal, views, the list's
 * limits), core's realize hook, and reading a strided view without an op. */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/hooks.h"
#include "exec/interpose.h"
#include "exec/scheduler.h"
#include "harness.h"

/* Two test interposers around autograd's slot log what they see while `watching` is set. */
static bool watching, refuse;
static char trace[256];
static kn_status last_done_status;
static kn_tensor *last_out;
static double last_value;
static int views_seen;

static void note(const char *what) {
    if (strlen(trace) + strlen(what) + 2 < sizeof trace) strcat(strcat(trace, " "), what);
}

static kn_status record_early(const kn_node *n, const kn_backend *b, void **state) {
    (void)n, (void)b;
    if (!watching) return KN_OK;
    note("record-early");
    *state = &watching; /* any non-NULL state: done will be called */
    return KN_OK;
}

static kn_status done_early(void *state, kn_status st, kn_tensor *const *outs, int n_out) {
    (void)state;
    note("done-early");
    last_done_status = st;
    last_out = n_out ? outs[0] : NULL;
    /* Under debug mode's scheduler the outputs hold their values here. */
    if (st == KN_OK && n_out && kn_get_mode() == KN_MODE_DEBUG && kn_item(outs[0], &last_value) != KN_OK)
        last_value = -1;
    return st;
}

static kn_status record_late(const kn_node *n, const kn_backend *b, void **state) {
    (void)n, (void)b;
    if (!watching) return KN_OK;
    note("record-late");
    if (refuse) return kn_error(KN_ERR_ARG, "refused by the test interposer");
    *state = &refuse;
    return KN_OK;
}

static kn_status done_late(void *state, kn_status st, kn_tensor *const *outs, int n_out) {
    (void)state, (void)outs, (void)n_out;
    note("done-late");
    return st;
}

static kn_status view_late(kn_tensor *t, kn_tensor *v, const struct kn_view_rec *rec) {
    (void)t, (void)v, (void)rec;
    if (watching) views_seen++;
    return KN_OK;
}

static const kn_interposer early = {"test-early", 150, KN_ALL_MODES, record_early, done_early, NULL};
static const kn_interposer late = {"test-late", 250, KN_ALL_MODES, record_late, done_late, view_late};

/* Starts watching with a clean slate; watch(false) stops and keeps what was seen. */
static void watch(bool on) {
    watching = on;
    if (!on) return;
    refuse = false;
    trace[0] = '\0';
    last_out = NULL;
    last_done_status = KN_ERR_INTERNAL;
    last_value = -1;
}

static void test_interposers_record_in_order_and_finish_in_reverse(void) {
    kn_tensor *x = kn_full(KN_SHAPE(3), 2, KN_F32);
    watch(true);
    kn_tensor *y = kn_add(x, x);
    watch(false);
    CHECK(y != NULL);
    CHECK_MSG(strcmp(trace, " record-early record-late done-late done-early") == 0, "trace:%s", trace);
    CHECK(last_done_status == KN_OK);
    CHECK_MSG(last_out == y, "done sees the handle the caller gets");
}

static void test_a_refused_op_fails_and_the_interposers_before_finish(void) {
    kn_tensor *x = kn_requires_grad(kn_full(KN_SHAPE(3), 2, KN_F32), true);
    int64_t live = kn_autograd_live_nodes();
    watch(true);
    refuse = true;
    kn_tensor *y = kn_mul(x, x);
    refuse = false;
    watch(false);
    CHECK(y == NULL);
    CHECK_ERROR(y != NULL, KN_ERR_ARG, "refused by the test interposer");
    /* the refusing interposer kept no state, so only the earlier one finishes */
    CHECK_MSG(strcmp(trace, " record-early record-late done-early") == 0, "trace:%s", trace);
    CHECK(last_done_status == KN_ERR_ARG);
    /* autograd, which recorded first, dropped the backward node it had built */
    CHECK(kn_autograd_live_nodes() == live);
}

static void test_debug_mode_outputs_hold_values_when_interposers_finish(void) {
    kn_mode saved = kn_get_mode();
    CHECK(kn_set_mode(KN_MODE_DEBUG) == KN_OK);
    kn_tensor *x = kn_full(KN_SHAPE(1), 3, KN_F32);
    watch(true);
    kn_tensor *y = kn_mul_scalar(x, 5);
    watch(false);
    CHECK(y != NULL);
    CHECK_MSG(last_value == 15, "done read %g", last_value);
    CHECK(kn_set_mode(saved) == KN_OK);
}

static void test_views_pass_through_the_interposers(void) {
    kn_tensor *x = kn_full(KN_SHAPE(2, 3), 1, KN_F32);
    views_seen = 0;
    watch(true);
    kn_tensor *t = kn_transpose(x, 0, 1);
    watch(false);
    CHECK(t != NULL);
    CHECK(views_seen == 1);
}

/* Core names no mode: reading a value pending in fused mode's window goes through the hook. */
static int realized;
static kn_status (*exec_realize)(kn_tensor *t);
static kn_status counting_realize(kn_tensor *t) {
    realized++;
    return exec_realize(t);
}

static void test_core_realizes_pending_work_through_its_hook(void) {
    CHECK(kn_hooks.realize == kn_realize);
    kn_mode saved = kn_get_mode();
    CHECK(kn_set_mode(KN_MODE_FUSED) == KN_OK);
    exec_realize = kn_hooks.realize;
    kn_hooks.realize = counting_realize;
    realized = 0;
    kn_tensor *x = kn_full(KN_SHAPE(4), 1.5, KN_F32);
    kn_tensor *y = kn_add_scalar(kn_mul_scalar(x, 2), 1);
    float v[4] = {0};
    CHECK(kn_to_host(y, v, sizeof v) == KN_OK);
    kn_hooks.realize = exec_realize;
    CHECK(realized >= 1);
    CHECK(v[0] == 4 && v[3] == 4);
    CHECK(kn_set_mode(saved) == KN_OK);
}

static void test_reading_a_strided_view_runs_no_op(void) {
    double vals[6] = {1, 2, 3, 4, 5, 6};
    kn_tensor *x = tensor_from(vals, KN_SHAPE(2, 3), KN_F64);
    kn_tensor *t = kn_transpose(x, 0, 1); /* 3 x 2: 1 4 / 2 5 / 3 6 */
    kn_tensor *col = kn_select(x, 1, 2);  /* 3 6, from the middle of the storage */
    CHECK(kn_sync() == KN_OK);
    kn_stats before, after;
    kn_stats_get(&before);
    double got[6], c[2];
    CHECK(kn_to_host(t, got, sizeof got) == KN_OK);
    CHECK(kn_to_host(col, c, sizeof c) == KN_OK);
    kn_stats_get(&after);
    CHECK(after.ops_recorded == before.ops_recorded);
    double want[6] = {1, 4, 2, 5, 3, 6};
    CHECK(memcmp(got, want, sizeof want) == 0);
    CHECK(c[0] == 3 && c[1] == 6);
}

static int dummy_count;
static kn_status dummy_record(const kn_node *n, const kn_backend *b, void **state) {
    (void)n, (void)b, (void)state;
    dummy_count++;
    return KN_OK;
}

/* Last: it fills the list for the rest of the process. */
static void test_the_list_refuses_duplicates_and_overflow(void) {
    CHECK_ERROR(kn_interposer_register(&late) == KN_OK, KN_ERR_ARG, "registered already");
    static kn_interposer fillers[KN_INTERPOSERS_MAX];
    kn_status st = KN_OK;
    int added = 0;
    for (int i = 0; i < KN_INTERPOSERS_MAX && st == KN_OK; i++) {
        fillers[i] = (kn_interposer){"filler", 1000 + i, KN_ALL_MODES, dummy_record, NULL, NULL};
        st = kn_interposer_register(&fillers[i]);
        added += st == KN_OK;
    }
    CHECK_ERROR(st == KN_OK, KN_ERR_ARG, "the list is full");
    /* the ones that fit run on every op, each once */
    dummy_count = 0;
    kn_tensor *x = kn_full(KN_SHAPE(2), 1, KN_F32);
    CHECK(kn_neg(x) != NULL);
    CHECK_MSG(dummy_count == 2 * added, "%d records for %d fillers over two ops", dummy_count, added);
}

int main(void) {
    CHECK(kn_interposer_register(&early) == KN_OK);
    CHECK(kn_interposer_register(&late) == KN_OK);
    RUN(test_interposers_record_in_order_and_finish_in_reverse);
    RUN(test_a_refused_op_fails_and_the_interposers_before_finish);
    RUN(test_debug_mode_outputs_hold_values_when_interposers_finish);
    RUN(test_views_pass_through_the_interposers);
    RUN(test_core_realizes_pending_work_through_its_hook);
    RUN(test_reading_a_strided_view_runs_no_op);
    RUN(test_the_list_refuses_duplicates_and_overflow);
    return test_summary();
}
