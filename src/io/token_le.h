/* Little-endian integers from and to bytes: token files are little-endian on every host.
 * Compilers turn these into plain loads and stores on little-endian machines. */
#ifndef KILN_IO_TOKEN_LE_H
#define KILN_IO_TOKEN_LE_H

#include <stdint.h>

static inline uint32_t kn_le16(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }

static inline uint32_t kn_le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void kn_put_le(unsigned char *p, uint32_t v, int bytes) {
    for (int k = 0; k < bytes; k++) p[k] = (unsigned char)(v >> (8 * k));
}

#endif
