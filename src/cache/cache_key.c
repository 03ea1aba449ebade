/* Cache keys: XXH3-128 over the parts of an artifact's identity and kiln's version. */
#include <string.h>
#include <xxhash.h>

#include "cache/cache.h"
#include "kiln/runtime.h"

/* Each part is hashed alone and folded into the running digest, acc = XXH3_128(acc || part's
 * digest), so part boundaries count (("ab", "c") and ("a", "bc") differ) and nothing is
 * allocated. Digests go through the canonical (big-endian) form to be byte-order free. */
static XXH128_hash_t fold(XXH128_hash_t acc, const char *part) {
    XXH128_canonical_t buf[2];
    XXH128_canonicalFromHash(&buf[0], acc);
    XXH128_canonicalFromHash(&buf[1], XXH3_128bits(part, part ? strlen(part) : 0));
    return XXH3_128bits(buf, sizeof buf);
}

kn_ccache_key kn_ccache_key_of(const char *const *parts, int n_parts) {
    XXH128_hash_t acc = XXH3_128bits("kiln ccache", 11);
    for (int i = 0; i < n_parts; i++) acc = fold(acc, parts[i]);
    acc = fold(acc, kn_version());
    return (kn_ccache_key){acc.high64, acc.low64};
}

void kn_ccache_key_hex(kn_ccache_key key, char out[33]) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        out[i] = digits[(key.hi >> (60 - 4 * i)) & 15];
        out[16 + i] = digits[(key.lo >> (60 - 4 * i)) & 15];
    }
    out[32] = '\0';
}
