/* The smallest kiln program: a few ops, an error handled as a value, a result read back. */
#include <stdio.h>

#include <kiln/kiln.h>

int main(void) {
    kn_manual_seed(0);
    kn_scope_push();
    kn_tensor *x = kn_randn(KN_SHAPE(2, 3), KN_F32);
    kn_tensor *w = kn_randn(KN_SHAPE(3, 4), KN_F32);
    kn_tensor *y = kn_relu(kn_matmul(x, w));          /* queued; runs on the CPU stream */
    if (!y) {
        fprintf(stderr, "kiln: %s\n", kn_last_error());
        return 1;
    }
    kn_print(y);                                        /* reading waits for the result */

    kn_tensor *bad = kn_matmul(w, w);                   /* [3,4] @ [3,4]: an error value */
    printf("%s -> %s\n", bad ? "ok" : "NULL", kn_last_error());
    kn_scope_pop();                                     /* releases every tensor above */
    return 0;
}
