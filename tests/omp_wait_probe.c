/* A program linked with libkiln.so, for test_omp_wait_policy: runs one op (the runtime starts)
 * and prints what it sees of the OpenMP variables in its own environment. */
#include <stdio.h>
#include <stdlib.h>

#include <kiln/kiln.h>

int main(void) {
    kn_tensor *t = kn_ones(KN_SHAPE(2), KN_F32);
    const char *policy = getenv("OMP_WAIT_POLICY"), *blocktime = getenv("KMP_BLOCKTIME");
    printf("op %s; environment: OMP_WAIT_POLICY=%s KMP_BLOCKTIME=%s\n", t ? "ok" : kn_last_error(),
           policy ? policy : "(unset)", blocktime ? blocktime : "(unset)");
    kn_release(t);
    return 0;
}
