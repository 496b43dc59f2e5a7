/* The CPU's raw allocator (engine/cpu/cpu_memory.c), which the caching
 * allocator installs by itself on first use of the CPU device. */
#ifndef LT_ALLOC_BACKEND_H
#define LT_ALLOC_BACKEND_H

#include "lt/alloc.h"

lt_raw_allocator lt_cpu_raw_allocator(void);

#endif
