/* The CPU's raw memory for the caching allocator: 64-byte aligned (a cache
 * line, and enough for any SIMD load), straight from the C library. The
 * caching allocator above it does the pooling. */
#include <stdlib.h>
#include <unistd.h>

#include "alloc/backend.h"

#define CPU_ALIGNMENT 64

static void *cpu_raw_alloc(void *ctx, int index, size_t nbytes) {
  (void)ctx;
  (void)index;
  void *ptr = NULL;
  if (posix_memalign(&ptr, CPU_ALIGNMENT, nbytes) != 0) return NULL;
  return ptr;
}

static void cpu_raw_free(void *ctx, int index, void *ptr, size_t nbytes) {
  (void)ctx;
  (void)index;
  (void)nbytes;
  free(ptr);
}

/* Physical memory (the base of fractional limits) and what the kernel
 * counts as available now. */
static bool cpu_mem_info(void *ctx, int index, size_t *free_bytes, size_t *total_bytes) {
  (void)ctx;
  (void)index;
  long pages = sysconf(_SC_PHYS_PAGES), avail = sysconf(_SC_AVPHYS_PAGES);
  long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return false;
  *total_bytes = (size_t)pages * (size_t)page_size;
  *free_bytes = avail > 0 ? (size_t)avail * (size_t)page_size : 0;
  return true;
}

lt_raw_allocator lt_cpu_raw_allocator(void) {
  lt_raw_allocator raw = {.alloc = cpu_raw_alloc, .free = cpu_raw_free, .mem_info = cpu_mem_info};
  return raw;
}
