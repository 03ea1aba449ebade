/* Where the host is in the caller's code: the per-thread module stack and the first stack
 * frame outside kiln (execinfo's backtrace, named by dladdr). */
#include "core/call_site.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Deeper modules than this are counted but not kept: their nearest kept ancestor names them. */
#define MODULE_DEPTH 64

static _Thread_local struct {
    int depth;
    const void *module[MODULE_DEPTH];
    kn_module_name_fn name[MODULE_DEPTH];
    char text[256];
} modules;

void kn_module_path_push(const void *module, kn_module_name_fn name) {
    if (modules.depth < MODULE_DEPTH) {
        modules.module[modules.depth] = module;
        modules.name[modules.depth] = name;
    }
    modules.depth++;
}

void kn_module_path_pop(void) {
    if (modules.depth > 0) modules.depth--;
}

const char *kn_module_current_path(void) {
    int top = (modules.depth < MODULE_DEPTH ? modules.depth : MODULE_DEPTH) - 1;
    if (top < 0) return NULL;
    modules.name[top](modules.module[top], modules.text, sizeof modules.text);
    return modules.text;
}

/* dl_iterate_phdr visits the main program first: is the address in one of its segments? */
static int in_first_object(struct dl_phdr_info *info, size_t size, void *arg) {
    uintptr_t *addr = arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + p->p_vaddr;
        if (p->p_type == PT_LOAD && *addr >= lo && *addr < lo + p->p_memsz) *addr = 0;
    }
    return 1;
}

static bool in_main_program(const void *p) {
    uintptr_t addr = (uintptr_t)p;
    dl_iterate_phdr(in_first_object, &addr);
    return addr == 0;
}

static const char *base_name(const char *path) {
    const char *slash = path ? strrchr(path, '/') : NULL;
    return slash ? slash + 1 : path ? path : "?";
}

/* "fn+0x1c (program)", or "program+0x1234" (an offset addr2line takes) when unnamed. */
static char *describe_frame(void *frame, const Dl_info *info, char *buf, size_t size) {
    if (info->dli_sname)
        snprintf(buf, size, "%s+0x%tx (%s)", info->dli_sname, (char *)frame - (char *)info->dli_saddr,
                 base_name(info->dli_fname));
    else
        snprintf(buf, size, "%s+0x%tx", base_name(info->dli_fname), (char *)frame - (char *)info->dli_fbase);
    return buf;
}

char *kn_call_site(char *buf, size_t size) {
    void *frames[64];
    int n = backtrace(frames, 64);
    /* In a shared libkiln, kiln's frames are those in its object, and the first frame after
     * them is the caller's, named or not. Linked statically, kiln and the program share one
     * object: kiln's frames are then those named kn_*, and since an unnamed (static) function
     * may be kiln's or the program's, the caller is the first named frame after them. */
    Dl_info self;
    bool shared = dladdr((void *)kn_call_site, &self) && !in_main_program((void *)kn_call_site);
    int last_kiln = -1;
    for (int i = 1; i < n; i++) {
        Dl_info info;
        if (!dladdr(frames[i], &info)) continue;
        const char *name = info.dli_sname;
        if ((name && !strncmp(name, "kn_", 3)) || (shared && info.dli_fbase == self.dli_fbase)) {
            last_kiln = i;
            continue;
        }
        if (last_kiln >= 0 && (name || shared)) return describe_frame(frames[i], &info, buf, size);
    }
    Dl_info info;
    if (last_kiln >= 0 && last_kiln + 1 < n && dladdr(frames[last_kiln + 1], &info))
        return describe_frame(frames[last_kiln + 1], &info, buf, size);
    snprintf(buf, size, "an unnamed caller (link the program with -rdynamic to name it)");
    return buf;
}
