/* AddressSanitizer's view of the cache. Tensors are carved from cached
 * segments that ASan sees as one live heap allocation, so without help an
 * access past a tensor's bytes (into its rounding tail or a free block) goes
 * unreported. Under ASan every byte of a host segment that no live block
 * asked for is poisoned: a block's requested bytes are unpoisoned when it is
 * handed out and poisoned again when it returns to its pool; a segment is
 * unpoisoned whole before it goes back to the system.
 *
 * The allocator keeps its bookkeeping outside the memory it hands out, so it
 * never touches poisoned bytes itself. Only host memory is poisoned (the CPU
 * device and the pinned pool): device memory is not the host's to mark, even
 * where an emulator or a simulated device keeps it in host memory. */
#ifndef LT_ALLOC_POISON_H
#define LT_ALLOC_POISON_H

#include <stddef.h>

#include "alloc/alloc_internal.h"

#if defined(__SANITIZE_ADDRESS__)
#define LT_ALLOC_POISONS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LT_ALLOC_POISONS 1
#endif
#endif

#ifdef LT_ALLOC_POISONS
#include <sanitizer/asan_interface.h>
#endif

static inline void lt_poison(const lt_segment *seg, const void *p, size_t n) {
#ifdef LT_ALLOC_POISONS
  if (n && seg->owner->dev.type == LT_DEVICE_CPU && !seg->owner->real) ASAN_POISON_MEMORY_REGION(p, n);
#else
  (void)seg, (void)p, (void)n;
#endif
}

static inline void lt_unpoison(const lt_segment *seg, const void *p, size_t n) {
#ifdef LT_ALLOC_POISONS
  if (n && seg->owner->dev.type == LT_DEVICE_CPU && !seg->owner->real) ASAN_UNPOISON_MEMORY_REGION(p, n);
#else
  (void)seg, (void)p, (void)n;
#endif
}

#endif
