// Intel ISA-L's CRC functions (Debian's libisal-dev): crc32_iscsi is CRC32C, dispatched at
// run time to the fastest code the CPU supports (PCLMULQDQ/AVX-512 folding, SSE4.2 crc32).
#include <isa-l/crc.h>
