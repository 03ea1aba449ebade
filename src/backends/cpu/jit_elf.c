/* A shared object's bytes checked before dlopen maps them. The loader trusts the ELF headers:
 * it maps a segment that points past the end of the file, and touching it raises SIGBUS. */
#include <elf.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "backends/cpu/jit_internal.h"

/* The ELF header of the object this code is linked into (the linker defines the symbol): what
 * this process can load has its class, byte order and machine. */
extern const ElfW(Ehdr) __ehdr_start __attribute__((visibility("hidden")));

static bool fail(char *why, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool fail(char *why, size_t size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, size, fmt, ap);
    va_end(ap);
    return false;
}

bool kn_jit_check_object(const void *bytes, size_t n, char *why, size_t size) {
    const ElfW(Ehdr) *self = &__ehdr_start;
    ElfW(Ehdr) h; /* copied out: the bytes need not be aligned for it */
    if (n < sizeof h) return fail(why, size, "%zu bytes, too short for an ELF header", n);
    memcpy(&h, bytes, sizeof h);
    if (memcmp(h.e_ident, ELFMAG, SELFMAG) != 0) return fail(why, size, "not an ELF file");
    if (h.e_ident[EI_CLASS] != self->e_ident[EI_CLASS] || h.e_ident[EI_DATA] != self->e_ident[EI_DATA] ||
        h.e_machine != self->e_machine)
        return fail(why, size, "built for another machine (ELF class %d, byte order %d, machine %d)",
                    h.e_ident[EI_CLASS], h.e_ident[EI_DATA], h.e_machine);
    if (h.e_type != ET_DYN) return fail(why, size, "not a shared object (ELF type %d)", h.e_type);
    if (h.e_phentsize != sizeof(ElfW(Phdr)) || h.e_phnum == 0 || h.e_phnum == PN_XNUM)
        return fail(why, size, "a program header table of %d entries of %d bytes", h.e_phnum, h.e_phentsize);
    if (h.e_phoff > n || (n - h.e_phoff) / sizeof(ElfW(Phdr)) < h.e_phnum)
        return fail(why, size, "program headers past the end of its %zu bytes", n);
    int loadable = 0;
    for (int i = 0; i < h.e_phnum; i++) {
        ElfW(Phdr) p;
        memcpy(&p, (const char *)bytes + h.e_phoff + (size_t)i * sizeof p, sizeof p);
        if (p.p_offset > n || p.p_filesz > n - p.p_offset)
            return fail(why, size, "segment %d (type %u) holds bytes [%llu, +%llu) of %zu", i, (unsigned)p.p_type,
                        (unsigned long long)p.p_offset, (unsigned long long)p.p_filesz, n);
        if (p.p_type == PT_LOAD && p.p_filesz > p.p_memsz)
            return fail(why, size, "segment %d maps fewer bytes than it holds", i);
        loadable += p.p_type == PT_LOAD;
    }
    if (!loadable) return fail(why, size, "no loadable segment");
    return true;
}
