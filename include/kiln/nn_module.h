/* The module tree: named parameters, buffers and children, with PyTorch's state_dict names.
 *
 * A module type is a struct whose first member is a kn_module named `base`, so a pointer to it
 * is also a pointer to its kn_module: every kn_module_* function takes such a pointer as
 * `void *module` (a pointer that is not a module is an error, not a crash). A module owns
 * its parameters, buffers and children; kn_module_free releases the whole tree. Parameters
 * are leaf tensors marked with kn_requires_grad; buffers (running statistics) are not.
 *
 * Writing a module type:
 *
 *     typedef struct block { kn_module base; kn_nn_layer_norm *ln; kn_nn_mlp *mlp; } block;
 *     block *b = kn_module_alloc(sizeof *b, "Block");
 *     b->ln = kn_module_add(b, "ln", kn_nn_layer_norm_new(KN_SHAPE(64), 1e-5, true, KN_F32));
 *     b->mlp = kn_module_add(b, "mlp", kn_nn_mlp_new(64, 256, KN_ACT_GELU, false, true, KN_F32));
 *     return kn_module_check(b);      // NULL (and the tree freed) if any step above failed
 */
#ifndef KILN_NN_MODULE_H
#define KILN_NN_MODULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A list of tensors with names; the names and the array are owned by the list. */
typedef struct kn_named_tensors {
    int count;
    char **names;          /* full names, "h.0.attn.c_attn.weight" */
    kn_tensor **tensors;   /* the module's own handles: borrowed, valid until the module is freed */
} kn_named_tensors;

typedef struct kn_module kn_module;
/* The forward function of a one-input module (NULL for modules with other inputs). */
typedef kn_tensor *(*kn_forward_fn)(void *module, kn_tensor *x);

/* Read it through the functions below; the fields are public only so that types can embed it. */
struct kn_module {
    uint32_t magic;
    const char *type;             /* "Linear", "BatchNorm2d", ... (a static string) */
    bool training, attached, failed;
    kn_forward_fn forward;
    struct kn_module *parent;     /* NULL for the root */
    const char *name;             /* this module's name in its parent ("0", "mlp"), or NULL */
    int n_params, n_buffers, n_children, cap_params, cap_buffers, cap_children;
    char **param_names, **buffer_names, **child_names;
    kn_tensor **params, **buffers;
    kn_module **children;
    void *members;                /* name -> parameter, buffer or child: a hash map (module.c) */
};

/* A zeroed module struct of `size` bytes (at least sizeof(kn_module)) whose base is set up,
 * in training mode; NULL on out-of-memory. */
KN_API void *kn_module_alloc(size_t size, const char *type);
/* Registers t as parameter `name` of module: the module keeps its own handle (returned) and
 * marks it as requiring grad. A NULL t or a failure marks the module failed (kn_module_check)
 * and returns NULL, keeping the first error. */
KN_API kn_tensor *kn_module_param(void *module, const char *name, kn_tensor *t);
/* The same for a buffer (state that is saved but not trained: running statistics). */
KN_API kn_tensor *kn_module_buffer(void *module, const char *name, kn_tensor *t);
/* Adds child (a module with no parent yet) under `name`, or under its index among module's
 * children when name is NULL (lists: "h.0", "h.1"). Returns child; a NULL child marks the
 * module failed. */
KN_API void *kn_module_add(void *module, const char *name, void *child);
/* module itself, or NULL (freeing the tree) if a registration in it or its children failed. */
KN_API void *kn_module_check(void *module);
/* Frees the module, its children, and its references to parameters and buffers. NULL is ignored. */
KN_API void kn_module_free(void *module);

/* Training mode (dropout active, batch norm on batch statistics) for the whole tree. */
KN_API void kn_module_train(void *module, bool training);
KN_API bool kn_module_is_training(const void *module);

/* Calls a one-input module's forward; an error for modules without one. While a module's
 * forward runs (this one, or a kn_nn_*_forward), debug mode's errors name the module by its
 * path in the tree ("h.0.mlp"). */
KN_API kn_tensor *kn_module_forward(void *module, kn_tensor *x);

enum { KN_PARAMS = 1, KN_BUFFERS = 2, KN_STATE = 3 };
/* Lists the tree's parameters (KN_PARAMS), buffers (KN_BUFFERS) or both (KN_STATE, PyTorch's
 * state_dict order: each module's parameters, then its buffers, then its children in the
 * order they were added). KN_PARAMS lists a tensor shared by two modules (tied weights) once,
 * as named_parameters() does; KN_STATE lists every name. Fails only on a bad module or
 * out-of-memory. */
KN_API kn_status kn_module_named(void *module, int which, kn_named_tensors *out);
KN_API void kn_named_tensors_free(kn_named_tensors *list);
/* The parameter or buffer with this full name (the module's handle, borrowed), or NULL with
 * a KN_ERR_ARG error naming it. */
KN_API kn_tensor *kn_module_get(void *module, const char *full_name);
/* Total elements in the tree's parameters (each shared tensor counted once); -1 on error. */
KN_API int64_t kn_module_num_params(void *module);
/* Prints the tree: one line per module with its parameters' and buffers' shapes. */
KN_API kn_status kn_module_print(void *module, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
