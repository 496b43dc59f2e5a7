/* The CPU's raw memory for the caching allocator: 64-byte aligned (a cache
 * line, and enough for any SIMD load), straight from the C library. The
 * caching allocator above it does the pooling. */
#include <stdlib.h>
#include <unistd.h>

#include "alloc/backend.h"

#define CPU_ALIGNMENT 64

static void *cpu_raw_alloc(void *ctx, size_t nbytes) {
  (void)ctx;
  void *ptr = NULL;
  if (posix_memalign(&ptr, CPU_ALIGNMENT, nbytes) != 0) return NULL;
  return ptr;
}

static void cpu_raw_free(void *ctx, void *ptr, size_t nbytes) {
  (void)ctx;
  (void)nbytes;
  free(ptr);
}

/* Physical memory, so that a limit can be given as a fraction of it. */
static size_t physical_memory_bytes(void) {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return (size_t)pages * (size_t)page_size;
}

lt_raw_allocator lt_cpu_raw_allocator(void) {
  lt_raw_allocator raw = {cpu_raw_alloc, cpu_raw_free, NULL, physical_memory_bytes()};
  return raw;
}
