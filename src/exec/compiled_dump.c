/* KILN_COMPILE_DUMP=DIR (exec/compiled.h): a program's nodes in text, one line each (inputs,
 * attributes, outputs), and as a Graphviz graph. Values are named by storage in order of appearance: v<k> for those the
 * program makes, x<k> for those it reads from outside (inputs, parameters, earlier results). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "core/tensor_impl.h"
#include "exec/compiled.h"
#include "graph/ptr_map.h"

typedef struct names {
    kn_ptr_map ids; /* storage -> k, made inside: k >= 0; from outside: -1 - k */
    int made, outside;
} names;

static void name_of(names *nm, const kn_storage *s, bool made_here, char *buf, size_t size) {
    int *id = kn_ptr_map_at(&nm->ids, s, made_here ? nm->made : -1 - nm->outside);
    if (*id == (made_here ? nm->made : -1 - nm->outside)) made_here ? nm->made++ : nm->outside++;
    if (*id >= 0) snprintf(buf, size, "v%d", *id);
    else snprintf(buf, size, "x%d", -1 - *id);
}

static void describe(const kn_tensor *t, char *buf, size_t size) {
    size_t len = (size_t)snprintf(buf, size, "%s[", kn_dtype_name(t->dtype));
    for (int d = 0; d < t->ndim && len < size; d++)
        len += (size_t)snprintf(buf + len, size - len, d ? ", %lld" : "%lld", (long long)t->shape[d]);
    if (len < size) snprintf(buf + len, size - len, "]");
}

/* Where a value made here lives: planned in an arena (realized before launch) or not yet. */
static void placement(const kn_storage *s, char *buf, size_t size) {
    if (s->deferred || !s->release_ctx) snprintf(buf, size, "own memory at launch");
    else snprintf(buf, size, "arena +%td", (const char *)s->data - (const char *)((const kn_storage *)s->release_ctx)->data);
}

bool kn_compiled_dumping(void) {
    const char *dir = getenv("KILN_COMPILE_DUMP");
    return dir && *dir;
}

void kn_compiled_dump_source(int64_t program, const char *source) {
    if (!source || !kn_compiled_dumping()) return;
    const char *dir = getenv("KILN_COMPILE_DUMP");
    mkdir(dir, 0777);
    char path[1024];
    snprintf(path, sizeof path, "%s/program-%lld-kernels.c", dir, (long long)program);
    FILE *f = fopen(path, "w");
    if (!f || fputs(source, f) == EOF) fprintf(stderr, "kiln: KILN_COMPILE_DUMP=%s: cannot write %s\n", dir, path);
    if (f) fclose(f);
}

void kn_compiled_dump(kn_node *const *nodes, int n, int64_t program, const char *stage,
                      const kn_plan_summary *plan) {
    if (!kn_compiled_dumping()) return;
    const char *dir = getenv("KILN_COMPILE_DUMP");
    mkdir(dir, 0777);
    char path[1024];
    snprintf(path, sizeof path, "%s/program-%lld-%s.txt", dir, (long long)program, stage);
    FILE *txt = fopen(path, "w");
    snprintf(path, sizeof path, "%s/program-%lld-%s.dot", dir, (long long)program, stage);
    FILE *dot = fopen(path, "w");
    int slots = 0;
    for (int j = 0; j < n; j++) slots += nodes[j]->n_in + nodes[j]->n_out;
    names nm = {0};
    kn_ptr_map producer = {0}; /* storage -> node that made it */
    if (!txt || !dot || !kn_ptr_map_init(&nm.ids, (size_t)slots) || !kn_ptr_map_init(&producer, (size_t)slots)) {
        static bool warned;
        if (!warned) fprintf(stderr, "kiln: KILN_COMPILE_DUMP=%s: cannot write %s\n", dir, path);
        warned = true;
        goto out;
    }
    fprintf(txt, "# program %lld, %s: %d nodes\n", (long long)program, stage, n);
    if (plan)
        fprintf(txt, "# memory plan: %d values in an arena of %zu bytes; at most %zu bytes live at once\n", plan->values,
                plan->arena_bytes, plan->peak_bytes);
    fprintf(dot, "digraph program_%lld {\n  node [shape=box, fontname=monospace];\n", (long long)program);
    for (int j = 0; j < n; j++) {
        const kn_node *x = nodes[j];
        char name[32], what[128], where[64];
        fprintf(txt, "n%d = %s(", j, kn_op_name(x->op));
        fprintf(dot, "  n%d [label=\"n%d %s\"];\n", j, j, kn_op_name(x->op));
        for (int i = 0; i < x->n_in; i++) {
            name_of(&nm, x->in[i]->storage, false, name, sizeof name);
            fprintf(txt, i ? ", %s" : "%s", name);
            int from = kn_ptr_map_get(&producer, x->in[i]->storage);
            if (from >= 0) fprintf(dot, "  n%d -> n%d [label=\"%s\"];\n", from, j, name);
            else fprintf(dot, "  %s [shape=ellipse];\n  %s -> n%d;\n", name, name, j);
        }
        char attrs[160] = ""; /* the values a step runs with: a folded constant's, a scalar op's */
        if (x->op != KN_OP_custom) kn_attrs_format(x->op, &x->attrs, attrs, sizeof attrs); /* a custom op's are its own */
        fprintf(txt, "%s%s) ->", *attrs ? "; " : "", attrs);
        for (int o = 0; o < x->n_out; o++) {
            const bool made = x->fresh_out & (1u << o);
            name_of(&nm, x->out[o]->storage, made, name, sizeof name);
            describe(x->out[o], what, sizeof what);
            if (made) {
                *kn_ptr_map_at(&producer, x->out[o]->storage, j) = j;
                placement(x->out[o]->storage, where, sizeof where);
                fprintf(txt, " %s %s (%s)", name, what, where);
            } else {
                fprintf(txt, " %s %s (written in place)", name, what);
            }
        }
        fprintf(txt, "\n");
    }
    fprintf(dot, "}\n");
out:
    if (txt) fclose(txt);
    if (dot) fclose(dot);
    kn_ptr_map_free(&nm.ids);
    kn_ptr_map_free(&producer);
}
