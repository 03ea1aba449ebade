/* Where the host is in the caller's code, for debug-mode errors: the nn module whose forward
 * is running, and the first stack frame outside kiln. */
#ifndef KILN_CORE_CALL_SITE_H
#define KILN_CORE_CALL_SITE_H

#include <stddef.h>

/* The module stack is per thread and holds opaque pointers: nn pushes each module whose
 * forward it enters, with a function that names it, since the layers below nn know nothing
 * of modules. Pushing and popping are a few stores, cheap enough for every forward. */
typedef void (*kn_module_name_fn)(const void *module, char *buf, size_t size);
void kn_module_path_push(const void *module, kn_module_name_fn name);
void kn_module_path_pop(void);
/* The innermost module as its name function writes it (nn: `"h.0.mlp" (MLP)`), or NULL
 * outside any module. A thread-local buffer, valid until the next call on this thread. */
const char *kn_module_current_path(void);

/* Best effort: the first frame of this thread's stack outside kiln, as "fn+0x1c (program)"
 * (a frame kiln's symbols cannot name is given as "program+0x1234", for addr2line). Frames
 * are named through the dynamic symbol table, so a program linking kiln statically names
 * its own functions only when linked with -rdynamic (CMake: ENABLE_EXPORTS). Returns buf. */
char *kn_call_site(char *buf, size_t size);

#endif
