/* KN_API marks what libkiln exports: every function (and variable) the public headers declare.
 * The library is built with -fvisibility=hidden, so anything without it stays inside. */
#ifndef KILN_API_H
#define KILN_API_H

#if defined(__GNUC__) || defined(__clang__)
#define KN_API __attribute__((visibility("default")))
#else
#define KN_API
#endif

#endif
