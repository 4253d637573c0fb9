#include <xxhash.h>
#if defined(__x86_64__)
/* libxxhash's run-time dispatch (SSE2, AVX2 or AVX-512, whichever the CPU has): the plain
   entry points are built for SSE2 only. Called by name; no macro renames anything. */
#define XXH_DISPATCH_DISABLE_REPLACE
#include <xxh_x86dispatch.h>
#endif
