/* A program linked with libkiln.so, for test_thread_count: runs a little of every kind of
 * parallel work kiln has (products on each provider, a convolution, reductions, elementwise
 * and generated kernels, in strict and fused mode) and prints how many threads the process has. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <kiln/kiln.h>

#include "thread_probe.h"

int main(void) { return probe_main(); }
