/* The caching allocator, checked by exact byte counts on the CPU device (and on
 * a fake device backend for raw-allocation failures). The expected numbers
 * follow PyTorch's CUDACachingAllocator rules: 512-byte rounding, 2 MiB small
 * segments, 20 MiB large segments under 10 MiB, 2 MiB-rounded above. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "lt/alloc.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

typedef struct held {
  void *ptr;
  lt_block *block;
} held;

static held must_alloc_on(lt_device dev, size_t nbytes, lt_category cat) {
  held h = {NULL, NULL};
  lt_status st = lt_alloc(dev, nbytes, cat, &h.ptr, &h.block);
  CHECK_EQ_INT(st, LT_OK);
  if (st != LT_OK) fprintf(stderr, "  lt_alloc(%zu): %s\n", nbytes, lt_last_error());
  CHECK(h.ptr != NULL);
  CHECK(h.block != NULL);
  return h;
}

static held must_alloc(size_t nbytes) { return must_alloc_on(lt_cpu(), nbytes, LT_CAT_OTHER); }

static lt_memory_stats stats_of(lt_device dev) {
  lt_memory_stats s;
  lt_memory_get_stats(dev, &s);
  return s;
}
static lt_memory_stats cpu_stats(void) { return stats_of(lt_cpu()); }

/* Every test starts with nothing allocated and nothing cached. */
static void start_clean(void) {
  lt_set_limit(lt_cpu(), 0);
  lt_alloc_set_oom_hook(NULL, NULL);
  lt_empty_cache(lt_cpu());
  lt_memory_stats s = cpu_stats();
  CHECK_EQ_INT(s.allocated_bytes[LT_POOL_ALL].current, 0);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_ALL].current, 0);
  CHECK_EQ_INT(s.segment[LT_POOL_ALL].current, 0);
  lt_memory_reset_peak(lt_cpu());
}

static void test_rounding(void) {
  start_clean();
  held a = must_alloc(1);
  lt_memory_stats s = cpu_stats();
  CHECK_EQ_INT(lt_block_size(a.block), 512);
  CHECK_EQ_INT(s.allocated_bytes[LT_POOL_ALL].current, 512);
  CHECK_EQ_INT(s.allocated_bytes[LT_POOL_SMALL].current, 512);
  CHECK_EQ_INT(s.active_bytes[LT_POOL_ALL].current, 512);
  CHECK_EQ_INT(s.requested_bytes[LT_POOL_ALL].current, 1);
  CHECK_EQ_INT(s.allocation[LT_POOL_ALL].current, 1);
  CHECK_EQ_INT(s.active[LT_POOL_SMALL].current, 1);
  CHECK_EQ_INT((uintptr_t)a.ptr % 64, 0);
  CHECK_EQ_INT(lt_free(a.block), 512);

  const size_t sizes[][2] = {{512, 512}, {513, 1024}, {1000, 1024}, {MiB, MiB}, {MiB + 1, MiB + 512}};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    held h = must_alloc(sizes[i][0]);
    CHECK_EQ_INT(lt_block_size(h.block), sizes[i][1]);
    s = cpu_stats();
    CHECK_EQ_INT(s.requested_bytes[LT_POOL_ALL].current, sizes[i][0]);
    CHECK_EQ_INT(lt_free(h.block), sizes[i][1]);
  }
  s = cpu_stats();
  CHECK_EQ_INT(s.allocated_bytes[LT_POOL_ALL].current, 0);
  CHECK_EQ_INT(s.requested_bytes[LT_POOL_ALL].current, 0);
  CHECK_EQ_INT(s.allocation[LT_POOL_ALL].current, 0);
  /* 1 MiB is the largest small request, 1 MiB + 1 the smallest large one. */
  CHECK_EQ_INT(s.segment[LT_POOL_SMALL].current, 1);
  CHECK_EQ_INT(s.segment[LT_POOL_LARGE].current, 1);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_ALL].current, 2 * MiB + 20 * MiB);
}

static void test_small_pool_segment(void) {
  start_clean();
  lt_memory_stats before = cpu_stats();
  held a = must_alloc(1000);
  held b = must_alloc(3000);
  lt_memory_stats s = cpu_stats();
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_ALL].current, 2 * MiB);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_SMALL].current, 2 * MiB);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_LARGE].current, 0);
  CHECK_EQ_INT(s.segment[LT_POOL_SMALL].current, 1);
  CHECK_EQ_INT(s.num_device_allocs - before.num_device_allocs, 1);
  /* Best fit carves b from the remainder right after a. */
  CHECK((char *)b.ptr == (char *)a.ptr + 1024);
  CHECK_EQ_INT(s.allocated_bytes[LT_POOL_ALL].current, 1024 + 3072);
  /* The remainder of the segment is a free split block. */
  CHECK_EQ_INT(s.inactive_split[LT_POOL_SMALL].current, 1);
  CHECK_EQ_INT(s.inactive_split_bytes[LT_POOL_SMALL].current, 2 * MiB - 4096);
  lt_free(a.block);
  lt_free(b.block);
  s = cpu_stats();
  CHECK_EQ_INT(s.inactive_split[LT_POOL_ALL].current, 0);
  CHECK_EQ_INT(s.inactive_split_bytes[LT_POOL_ALL].current, 0);
}

static void test_large_pool_segments(void) {
  start_clean();
  held a = must_alloc(5 * MiB);
  lt_memory_stats s = cpu_stats();
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_LARGE].current, 20 * MiB);
  CHECK_EQ_INT(s.segment[LT_POOL_LARGE].current, 1);
  CHECK_EQ_INT(lt_block_size(a.block), 5 * MiB);
  CHECK_EQ_INT(s.inactive_split_bytes[LT_POOL_LARGE].current, 15 * MiB);

  held b = must_alloc(30 * MiB);
  s = cpu_stats();
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_LARGE].current, 20 * MiB + 30 * MiB);
  CHECK_EQ_INT(s.segment[LT_POOL_LARGE].current, 2);

  /* 16 MiB + 512 do not fit the 15 MiB left: a segment of 18 MiB (2 MiB
   * rounding), whose 2 MiB - 512 remainder is more than 1 MiB, so split. */
  held c = must_alloc(16 * MiB + 1);
  s = cpu_stats();
  CHECK_EQ_INT(lt_block_size(c.block), 16 * MiB + 512);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_ALL].current, 20 * MiB + 30 * MiB + 18 * MiB);
  CHECK_EQ_INT(s.inactive_split_bytes[LT_POOL_LARGE].current, 15 * MiB + 2 * MiB - 512);
  CHECK_EQ_INT(s.inactive_split[LT_POOL_LARGE].current, 2);

  /* 12 MiB fit the 15 MiB remainder: served from the cache, split again. */
  held d = must_alloc(12 * MiB);
  CHECK((char *)d.ptr == (char *)a.ptr + 5 * MiB);
  s = cpu_stats();
  CHECK_EQ_INT(s.segment[LT_POOL_LARGE].current, 3);
  CHECK_EQ_INT(s.inactive_split_bytes[LT_POOL_LARGE].current, 3 * MiB + 2 * MiB - 512);
  CHECK_EQ_INT(s.allocated_bytes[LT_POOL_LARGE].current, 5 * MiB + 30 * MiB + 16 * MiB + 512 + 12 * MiB);
  CHECK_EQ_INT(s.allocated_bytes[LT_POOL_SMALL].current, 0);
  lt_free(a.block);
  lt_free(b.block);
  lt_free(c.block);
  lt_free(d.block);

  /* Exactly 10 MiB gets a segment of its own size; just under, 20 MiB. */
  start_clean();
  held e = must_alloc(10 * MiB);
  CHECK_EQ_INT(cpu_stats().reserved_bytes[LT_POOL_ALL].current, 10 * MiB);
  held f = must_alloc(10 * MiB - 512);
  CHECK_EQ_INT(cpu_stats().reserved_bytes[LT_POOL_ALL].current, 30 * MiB);
  lt_free(e.block);
  lt_free(f.block);
}

static void test_reuse_after_free(void) {
  start_clean();
  held a = must_alloc(100 * KiB);
  lt_memory_stats s1 = cpu_stats();
  CHECK_EQ_INT(lt_free(a.block), 100 * KiB);
  held b = must_alloc(100 * KiB);
  lt_memory_stats s2 = cpu_stats();
  CHECK(b.ptr == a.ptr);
  CHECK_EQ_INT(s2.num_device_allocs, s1.num_device_allocs);
  CHECK_EQ_INT(s2.reserved_bytes[LT_POOL_ALL].current, 2 * MiB);
  CHECK_EQ_INT(s2.allocation[LT_POOL_ALL].allocated - s1.allocation[LT_POOL_ALL].allocated, 1);
  CHECK_EQ_INT(s2.allocation[LT_POOL_ALL].freed - s1.allocation[LT_POOL_ALL].freed, 1);
  CHECK_EQ_INT(s2.allocated_bytes[LT_POOL_ALL].freed - s1.allocated_bytes[LT_POOL_ALL].freed,
               100 * KiB);
  lt_free(b.block);

  /* A large cached block serves a smaller large request without a new segment. */
  held c = must_alloc(8 * MiB);
  lt_free(c.block);
  s1 = cpu_stats();
  held d = must_alloc(3 * MiB);
  s2 = cpu_stats();
  CHECK(d.ptr == c.ptr);
  CHECK_EQ_INT(s2.num_device_allocs, s1.num_device_allocs);
  lt_free(d.block);
}

static void test_split_and_merge(void) {
  start_clean();
  held a = must_alloc(256 * KiB);
  held b = must_alloc(256 * KiB);
  held c = must_alloc(256 * KiB);
  CHECK((char *)b.ptr == (char *)a.ptr + 256 * KiB);
  CHECK((char *)c.ptr == (char *)b.ptr + 256 * KiB);
  lt_memory_stats s = cpu_stats();
  CHECK_EQ_INT(s.segment[LT_POOL_ALL].current, 1);
  CHECK_EQ_INT(s.inactive_split[LT_POOL_SMALL].current, 1); /* the tail */
  CHECK_EQ_INT(s.inactive_split_bytes[LT_POOL_SMALL].current, 2 * MiB - 768 * KiB);

  lt_free(b.block); /* a hole in the middle: no free neighbour */
  s = cpu_stats();
  CHECK_EQ_INT(s.inactive_split[LT_POOL_SMALL].current, 2);
  CHECK_EQ_INT(s.inactive_split_bytes[LT_POOL_SMALL].current, 2 * MiB - 512 * KiB);
  CHECK_EQ_INT(s.inactive_split[LT_POOL_SMALL].peak, 2);

  lt_free(a.block); /* merges with b */
  s = cpu_stats();
  CHECK_EQ_INT(s.inactive_split[LT_POOL_SMALL].current, 2);
  CHECK_EQ_INT(s.inactive_split_bytes[LT_POOL_SMALL].current, 2 * MiB - 256 * KiB);

  /* The merged 512 KiB block is the best fit: served in place. */
  lt_memory_stats before = cpu_stats();
  held ab = must_alloc(512 * KiB);
  s = cpu_stats();
  CHECK(ab.ptr == a.ptr);
  CHECK_EQ_INT(s.num_device_allocs, before.num_device_allocs);
  CHECK_EQ_INT(s.inactive_split[LT_POOL_SMALL].current, 1);
  CHECK_EQ_INT(lt_free(ab.block), 512 * KiB);

  lt_free(c.block); /* merges both sides: the segment is whole and free again */
  s = cpu_stats();
  CHECK_EQ_INT(s.inactive_split[LT_POOL_ALL].current, 0);
  CHECK_EQ_INT(s.inactive_split_bytes[LT_POOL_ALL].current, 0);
  held whole = must_alloc(MiB);
  held rest = must_alloc(MiB);
  CHECK(whole.ptr == a.ptr);
  CHECK((char *)rest.ptr == (char *)a.ptr + MiB);
  CHECK_EQ_INT(cpu_stats().num_device_allocs, before.num_device_allocs);
  lt_free(whole.block);
  lt_free(rest.block);

  /* Small pool: a remainder of exactly 512 bytes is still split off. */
  held x = must_alloc(MiB);
  held y = must_alloc(MiB - 512);
  CHECK_EQ_INT(lt_block_size(y.block), MiB - 512);
  s = cpu_stats();
  CHECK_EQ_INT(s.inactive_split_bytes[LT_POOL_SMALL].current, 512);
  held z = must_alloc(1);
  CHECK((char *)z.ptr == (char *)x.ptr + 2 * MiB - 512);
  CHECK_EQ_INT(cpu_stats().segment[LT_POOL_SMALL].current, 1);
  lt_free(x.block);
  lt_free(y.block);
  lt_free(z.block);

  /* Large pool: a remainder of at most 1 MiB is not split off. */
  start_clean();
  held big = must_alloc(9 * MiB); /* 20 MiB segment */
  lt_free(big.block);
  held almost = must_alloc(19 * MiB + 512 * KiB);
  CHECK(almost.ptr == big.ptr);
  CHECK_EQ_INT(lt_block_size(almost.block), 20 * MiB);
  s = cpu_stats();
  CHECK_EQ_INT(s.allocated_bytes[LT_POOL_LARGE].current, 20 * MiB);
  CHECK_EQ_INT(s.requested_bytes[LT_POOL_LARGE].current, 19 * MiB + 512 * KiB);
  CHECK_EQ_INT(s.inactive_split[LT_POOL_LARGE].current, 0);
  CHECK_EQ_INT(lt_free(almost.block), 20 * MiB);
}

static void test_empty_cache(void) {
  start_clean();
  held small = must_alloc(KiB);
  held big = must_alloc(5 * MiB);
  held other = must_alloc(KiB); /* shares small's segment */
  lt_free(big.block);
  lt_free(other.block);
  lt_memory_stats before = cpu_stats();
  CHECK_EQ_INT(before.reserved_bytes[LT_POOL_ALL].current, 22 * MiB);
  /* The large segment is entirely free; the small one holds a live block. */
  CHECK_EQ_INT(lt_empty_cache(lt_cpu()), 20 * MiB);
  lt_memory_stats s = cpu_stats();
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_ALL].current, 2 * MiB);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_LARGE].current, 0);
  CHECK_EQ_INT(s.allocated_bytes[LT_POOL_ALL].current, KiB);
  CHECK_EQ_INT(s.segment[LT_POOL_ALL].current, 1);
  CHECK_EQ_INT(s.num_device_frees - before.num_device_frees, 1);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_ALL].peak, 22 * MiB);
  CHECK_EQ_INT(lt_empty_cache(lt_cpu()), 0); /* nothing more is free */
  lt_free(small.block);
  CHECK_EQ_INT(lt_empty_cache(lt_cpu()), 2 * MiB);
  s = cpu_stats();
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_ALL].current, 0);
  CHECK_EQ_INT(s.num_device_allocs - s.num_device_frees, 0);
}

static void test_limit_and_oom_message(void) {
  start_clean();
  lt_set_limit(lt_cpu(), 64 * MiB);
  CHECK_EQ_INT(lt_get_limit(lt_cpu()), 64 * MiB);
  held a = must_alloc(44 * MiB); /* its own 44 MiB segment */
  held b = must_alloc(4 * MiB);  /* a 20 MiB segment, 16 MiB of it left free */
  lt_memory_stats before = cpu_stats();
  CHECK_EQ_INT(before.limit, 64 * MiB);
  CHECK_EQ_INT(before.reserved_bytes[LT_POOL_ALL].current, 64 * MiB);

  void *ptr = (void *)1;
  lt_block *block = (lt_block *)1;
  lt_status st = lt_alloc(lt_cpu(), 128 * MiB, LT_CAT_ACTIVATION, &ptr, &block);
  CHECK_EQ_INT(st, LT_ERR_OOM);
  CHECK(ptr == NULL);
  CHECK(block == NULL);
  CHECK(strstr(lt_last_error(), "out of memory on cpu: tried to allocate 128.0 MiB; 48.0 MiB "
                                "allocated, 64.0 MiB reserved, limit 64.0 MiB") != NULL);
  CHECK_EQ_STR(lt_last_error(), "out of memory on cpu: tried to allocate 128.0 MiB; 48.0 MiB "
                                "allocated, 64.0 MiB reserved, limit 64.0 MiB, 16.0 MiB free in "
                                "cached blocks; allocated is only 16.0 MiB below the limit, a "
                                "128.0 MiB segment needed");
  lt_memory_stats s = cpu_stats();
  CHECK_EQ_INT(s.num_ooms - before.num_ooms, 1);
  CHECK_EQ_INT(s.num_alloc_retries - before.num_alloc_retries, 1);
  CHECK_EQ_INT(s.num_collections - before.num_collections, 0); /* no hook set */
  CHECK_EQ_INT(s.allocated_bytes[LT_POOL_ALL].current, 48 * MiB);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_ALL].current, 64 * MiB);

  /* Anything that fits the free fragment still works. */
  held c = must_alloc(16 * MiB);
  CHECK((char *)c.ptr == (char *)b.ptr + 4 * MiB);
  lt_free(c.block);

  /* Cached whole segments are released to make room under the limit. */
  lt_free(a.block);
  held d = must_alloc(KiB); /* a small segment: fits once a's is released */
  s = cpu_stats();
  CHECK_EQ_INT(s.num_alloc_retries - before.num_alloc_retries, 2);
  CHECK_EQ_INT(s.num_ooms - before.num_ooms, 1);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_ALL].current, 22 * MiB);
  lt_free(d.block);
  lt_free(b.block);

  /* A limit below what is reserved: cached blocks still serve, new segments fail. */
  start_clean();
  held e = must_alloc(KiB);
  lt_set_limit(lt_cpu(), MiB);
  held f = must_alloc(KiB);
  CHECK_EQ_INT(lt_alloc(lt_cpu(), 2 * MiB, LT_CAT_OTHER, &ptr, &block), LT_ERR_OOM);
  CHECK_EQ_STR(lt_last_error(), "out of memory on cpu: tried to allocate 2.0 MiB; 2.0 KiB allocated, "
                                "2.0 MiB reserved, limit 1.0 MiB, 2.0 MiB free in cached blocks; "
                                "allocated is only 1022.0 KiB below the limit, a 2.0 MiB segment "
                                "needed");
  lt_free(e.block);
  lt_free(f.block);
  lt_set_limit(lt_cpu(), 0);
  CHECK_EQ_INT(cpu_stats().limit, 0);
}

static void test_format_bytes(void) {
  char buf[32];
  CHECK_EQ_STR(lt_format_bytes(0, buf), "0 B");
  CHECK_EQ_STR(lt_format_bytes(512, buf), "512 B");
  CHECK_EQ_STR(lt_format_bytes(1536, buf), "1.5 KiB");
  CHECK_EQ_STR(lt_format_bytes(128 * MiB, buf), "128.0 MiB");
  CHECK_EQ_STR(lt_format_bytes(MiB - 1, buf), "1.0 MiB");
  CHECK_EQ_STR(lt_format_bytes(3 * (MiB << 10) / 2, buf), "1.5 GiB");
  CHECK_EQ_STR(lt_format_bytes(4096 * (MiB << 10), buf), "4096.0 GiB");
}

/* ---- the out-of-memory hook ---- */

typedef struct hook_state {
  int calls;
  lt_device dev;
  size_t nbytes;
  lt_block *to_free; /* a block the "collection" gives back */
  size_t freed;
  bool allocate_inside; /* a finalizer that itself fails to allocate */
  lt_status inner_status;
} hook_state;

static void test_hook(void *ud, lt_device dev, size_t nbytes) {
  hook_state *h = ud;
  h->calls++;
  h->dev = dev;
  h->nbytes = nbytes;
  if (h->to_free) { /* re-enters the allocator: no lock may be held */
    h->freed = lt_free(h->to_free);
    h->to_free = NULL;
  }
  if (h->allocate_inside) {
    void *p;
    lt_block *b;
    h->inner_status = lt_alloc(dev, 512 * MiB, LT_CAT_OTHER, &p, &b);
  }
}

static void test_oom_hook(void) {
  /* The hook frees a large block; the cache then serves the request. */
  start_clean();
  lt_set_limit(lt_cpu(), 64 * MiB);
  held hold = must_alloc(60 * MiB);
  hook_state h = {.to_free = hold.block};
  lt_alloc_set_oom_hook(test_hook, &h);
  lt_memory_stats before = cpu_stats();
  held got = must_alloc(10 * MiB); /* needs a 20 MiB segment: over the limit */
  lt_memory_stats s = cpu_stats();
  CHECK_EQ_INT(h.calls, 1);
  CHECK_EQ_INT(h.nbytes, 10 * MiB);
  CHECK(lt_device_eq(h.dev, lt_cpu()));
  CHECK_EQ_INT(h.freed, 60 * MiB);
  CHECK(got.ptr == hold.ptr);
  CHECK_EQ_INT(s.num_collections - before.num_collections, 1);
  CHECK_EQ_INT(s.num_alloc_retries - before.num_alloc_retries, 0);
  CHECK_EQ_INT(s.num_ooms - before.num_ooms, 0);
  CHECK_EQ_INT(s.num_device_allocs - before.num_device_allocs, 0);
  lt_free(got.block);

  /* The hook frees a small block: only emptying the cache makes room. */
  start_clean();
  lt_set_limit(lt_cpu(), 21 * MiB);
  hold = must_alloc(KiB); /* a 2 MiB small segment */
  h = (hook_state){.to_free = hold.block};
  lt_alloc_set_oom_hook(test_hook, &h);
  before = cpu_stats();
  got = must_alloc(5 * MiB); /* 2 + 20 MiB > 21 MiB */
  s = cpu_stats();
  CHECK_EQ_INT(h.calls, 1);
  CHECK_EQ_INT(h.freed, KiB);
  CHECK_EQ_INT(s.num_collections - before.num_collections, 1);
  CHECK_EQ_INT(s.num_alloc_retries - before.num_alloc_retries, 1);
  CHECK_EQ_INT(s.num_ooms - before.num_ooms, 0);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_ALL].current, 20 * MiB);
  CHECK_EQ_INT(s.num_device_frees - before.num_device_frees, 1);
  lt_free(got.block);

  /* A hook that cannot help: the error comes after one collection and one
   * retry; an allocation failing inside the hook does not run it again. */
  start_clean();
  lt_set_limit(lt_cpu(), 8 * MiB);
  h = (hook_state){.allocate_inside = true};
  lt_alloc_set_oom_hook(test_hook, &h);
  before = cpu_stats();
  void *ptr;
  lt_block *block;
  CHECK_EQ_INT(lt_alloc(lt_cpu(), 9 * MiB, LT_CAT_OTHER, &ptr, &block), LT_ERR_OOM);
  CHECK_EQ_STR(lt_last_error(), "out of memory on cpu: tried to allocate 9.0 MiB; 0 B allocated, "
                                "0 B reserved, limit 8.0 MiB; allocated is only 8.0 MiB below the "
                                "limit, a 10.0 MiB segment needed");
  s = cpu_stats();
  CHECK_EQ_INT(h.calls, 1);
  CHECK_EQ_INT(h.inner_status, LT_ERR_OOM);
  CHECK_EQ_INT(s.num_collections - before.num_collections, 1);
  CHECK_EQ_INT(s.num_alloc_retries - before.num_alloc_retries, 2); /* inner and outer */
  CHECK_EQ_INT(s.num_ooms - before.num_ooms, 2);
  lt_alloc_set_oom_hook(NULL, NULL);
  lt_set_limit(lt_cpu(), 0);
}

static void test_peaks(void) {
  start_clean();
  held a = must_alloc(MiB);
  held b = must_alloc(MiB);
  lt_free(b.block);
  lt_memory_stats s = cpu_stats();
  CHECK_EQ_INT(s.allocated_bytes[LT_POOL_ALL].current, MiB);
  CHECK_EQ_INT(s.allocated_bytes[LT_POOL_ALL].peak, 2 * MiB);
  CHECK_EQ_INT(s.allocation[LT_POOL_ALL].peak, 2);
  CHECK_EQ_INT(s.requested_bytes[LT_POOL_ALL].peak, 2 * MiB);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_ALL].peak, 2 * MiB);

  lt_memory_reset_peak(lt_cpu());
  s = cpu_stats();
  CHECK_EQ_INT(s.allocated_bytes[LT_POOL_ALL].peak, MiB);
  CHECK_EQ_INT(s.allocated_bytes[LT_POOL_SMALL].peak, MiB);
  CHECK_EQ_INT(s.allocation[LT_POOL_ALL].peak, 1);
  CHECK_EQ_INT(s.requested_bytes[LT_POOL_ALL].peak, MiB);
  CHECK_EQ_INT(s.category_bytes[LT_CAT_OTHER].peak, MiB);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_ALL].peak, 2 * MiB);
  CHECK_EQ_INT(s.inactive_split_bytes[LT_POOL_ALL].peak, MiB);

  lt_free(a.block);
  lt_empty_cache(lt_cpu());
  lt_memory_reset_peak(lt_cpu());
  s = cpu_stats();
  CHECK_EQ_INT(s.allocated_bytes[LT_POOL_ALL].peak, 0);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_ALL].peak, 0);
  CHECK_EQ_INT(s.segment[LT_POOL_ALL].peak, 0);
  held c = must_alloc(3 * KiB);
  s = cpu_stats();
  CHECK_EQ_INT(s.allocated_bytes[LT_POOL_ALL].peak, 3 * KiB);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_ALL].peak, 2 * MiB);
  lt_free(c.block);
}

static void test_categories(void) {
  start_clean();
  CHECK_EQ_STR(lt_category_name(LT_CAT_PARAMETER), "parameter");
  CHECK_EQ_STR(lt_category_name(LT_CAT_GRADIENT), "gradient");
  CHECK_EQ_STR(lt_category_name(LT_CAT_OPTIMIZER), "optimizer");
  CHECK_EQ_STR(lt_category_name(LT_CAT_ACTIVATION), "activation");
  CHECK_EQ_STR(lt_category_name(LT_CAT_OTHER), "other");
  CHECK_EQ_STR(lt_category_name(LT_CAT_WORKSPACE), "workspace");

  lt_memory_reset_peak(lt_cpu());
  held p = must_alloc_on(lt_cpu(), 1000, LT_CAT_PARAMETER);
  held g = must_alloc_on(lt_cpu(), 2048, LT_CAT_GRADIENT);
  held w = must_alloc_on(lt_cpu(), 3 * MiB, LT_CAT_WORKSPACE);
  CHECK_EQ_INT(lt_block_category(p.block), LT_CAT_PARAMETER);
  lt_memory_stats s = cpu_stats();
  CHECK_EQ_INT(s.category_bytes[LT_CAT_PARAMETER].current, 1024);
  CHECK_EQ_INT(s.category_bytes[LT_CAT_GRADIENT].current, 2048);
  CHECK_EQ_INT(s.category_bytes[LT_CAT_WORKSPACE].current, 3 * MiB);
  CHECK_EQ_INT(s.category_bytes[LT_CAT_OPTIMIZER].current, 0);

  lt_block_set_category(g.block, LT_CAT_OPTIMIZER);
  CHECK_EQ_INT(lt_block_category(g.block), LT_CAT_OPTIMIZER);
  s = cpu_stats();
  CHECK_EQ_INT(s.category_bytes[LT_CAT_GRADIENT].current, 0);
  CHECK_EQ_INT(s.category_bytes[LT_CAT_GRADIENT].peak, 2048);
  CHECK_EQ_INT(s.category_bytes[LT_CAT_OPTIMIZER].current, 2048);
  CHECK_EQ_INT(s.category_bytes[LT_CAT_OPTIMIZER].peak, 2048);
  CHECK_EQ_INT(s.allocated_bytes[LT_POOL_ALL].current, 1024 + 2048 + 3 * MiB); /* unchanged */

  lt_block_set_category(g.block, LT_CAT_OPTIMIZER); /* same category: no change */
  CHECK_EQ_INT(cpu_stats().category_bytes[LT_CAT_OPTIMIZER].current, 2048);

  lt_free(g.block);
  lt_free(p.block);
  lt_free(w.block);
  s = cpu_stats();
  for (int c = 0; c < LT_NCATEGORIES; c++) CHECK_EQ_INT(s.category_bytes[c].current, 0);
  CHECK_EQ_INT(s.category_bytes[LT_CAT_OPTIMIZER].freed - s.category_bytes[LT_CAT_OPTIMIZER].allocated,
               0);
}

static void test_largest(void) {
  start_clean();
  held a = must_alloc_on(lt_cpu(), 3 * KiB, LT_CAT_ACTIVATION);
  held b = must_alloc_on(lt_cpu(), 10 * KiB, LT_CAT_PARAMETER);
  held c = must_alloc_on(lt_cpu(), 1 * KiB, LT_CAT_OTHER);
  held d = must_alloc_on(lt_cpu(), 7 * MiB, LT_CAT_GRADIENT);
  lt_block_set_origin(a.block, "train.lua:10", NULL);
  lt_block_set_origin(b.block, "model.lua:3", NULL);
  lt_block_set_origin(d.block, "train.lua:42", NULL);

  size_t sizes[8];
  const char *origins[8];
  lt_category cats[8];
  CHECK_EQ_INT(lt_memory_largest(lt_cpu(), 3, sizes, origins, cats), 3);
  CHECK_EQ_INT(sizes[0], 7 * MiB);
  CHECK_EQ_INT(sizes[1], 10 * KiB);
  CHECK_EQ_INT(sizes[2], 3 * KiB);
  CHECK_EQ_STR(origins[0], "train.lua:42");
  CHECK_EQ_STR(origins[1], "model.lua:3");
  CHECK_EQ_STR(origins[2], "train.lua:10");
  CHECK_EQ_INT(cats[0], LT_CAT_GRADIENT);
  CHECK_EQ_INT(cats[1], LT_CAT_PARAMETER);
  CHECK_EQ_INT(cats[2], LT_CAT_ACTIVATION);

  CHECK_EQ_INT(lt_memory_largest(lt_cpu(), 8, sizes, origins, NULL), 4);
  CHECK_EQ_INT(sizes[3], KiB);
  CHECK(origins[3] == NULL);
  CHECK_EQ_INT(lt_memory_largest(lt_cpu(), 0, sizes, origins, cats), 0);

  lt_free(d.block);
  CHECK_EQ_INT(lt_memory_largest(lt_cpu(), 1, sizes, NULL, NULL), 1);
  CHECK_EQ_INT(sizes[0], 10 * KiB);
  lt_free(a.block);
  lt_free(b.block);
  lt_free(c.block);
  CHECK_EQ_INT(lt_memory_largest(lt_cpu(), 8, sizes, origins, cats), 0);
}

static void test_zero_bytes_and_null(void) {
  start_clean();
  lt_memory_stats before = cpu_stats();
  held z = must_alloc_on(lt_cpu(), 0, LT_CAT_PARAMETER);
  held z2 = must_alloc(0);
  CHECK_EQ_INT(lt_block_size(z.block), 0);
  CHECK_EQ_INT(lt_block_category(z.block), LT_CAT_PARAMETER);
  lt_block_set_category(z.block, LT_CAT_GRADIENT);
  lt_block_set_origin(z.block, "zero.lua:1", NULL);
  CHECK_EQ_INT(lt_block_category(z.block), LT_CAT_GRADIENT);
  lt_memory_stats s = cpu_stats();
  /* As PyTorch: a zero-byte allocation takes no memory and counts nowhere. */
  CHECK_EQ_INT(s.allocated_bytes[LT_POOL_ALL].current, 0);
  CHECK_EQ_INT(s.allocation[LT_POOL_ALL].allocated, before.allocation[LT_POOL_ALL].allocated);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_ALL].current, 0);
  CHECK_EQ_INT(s.category_bytes[LT_CAT_GRADIENT].current, 0);
  size_t sizes[2];
  CHECK_EQ_INT(lt_memory_largest(lt_cpu(), 2, sizes, NULL, NULL), 0);
  CHECK_EQ_INT(lt_free(z.block), 0);
  CHECK_EQ_INT(lt_free(z2.block), 0);
  CHECK_EQ_INT(lt_free(NULL), 0);
  CHECK_EQ_INT(lt_block_size(NULL), 0);
}

static void test_bad_arguments(void) {
  void *ptr;
  lt_block *block;
  lt_device bogus = {7, 0};
  CHECK_EQ_INT(lt_alloc(bogus, 16, LT_CAT_OTHER, &ptr, &block), LT_ERR_DEVICE);
  lt_device bad_index = {LT_DEVICE_CUDA, LT_MAX_DEVICES};
  CHECK_EQ_INT(lt_alloc(bad_index, 16, LT_CAT_OTHER, &ptr, &block), LT_ERR_DEVICE);
  CHECK_EQ_INT(lt_alloc(lt_cpu(), 16, (lt_category)99, &ptr, &block), LT_ERR_ARG);
  CHECK_EQ_INT(lt_alloc(lt_cpu(), 16, LT_CAT_OTHER, NULL, &block), LT_ERR_ARG);
  lt_memory_stats s;
  lt_memory_get_stats(bogus, &s);
  CHECK_EQ_INT(s.allocated_bytes[LT_POOL_ALL].current, 0);
  CHECK_EQ_INT(lt_empty_cache(bogus), 0);
  CHECK_EQ_INT(lt_memory_largest(bogus, 4, (size_t[4]){0}, NULL, NULL), 0);
  /* Too large to round: fails at once, without touching the device. */
  lt_memory_stats before = cpu_stats();
  CHECK_EQ_INT(lt_alloc(lt_cpu(), SIZE_MAX / 2, LT_CAT_OTHER, &ptr, &block), LT_ERR_OOM);
  CHECK(strstr(lt_last_error(), "out of memory on cpu: tried to allocate ") != NULL);
  CHECK(strstr(lt_last_error(), "no limit") != NULL);
  s = cpu_stats();
  CHECK_EQ_INT(s.num_ooms - before.num_ooms, 1);
  CHECK_EQ_INT(s.num_device_allocs, before.num_device_allocs);
}

/* ---- a fake device: raw allocations that fail past a capacity ---- */

typedef struct fake_device {
  size_t capacity, used;
  int allocs, frees;
  size_t last_free_size;
  int last_index; /* the device number of the last raw call */
} fake_device;

static bool fake_mem_info(void *ctx, int index, size_t *free_bytes, size_t *total_bytes) {
  fake_device *d = ctx;
  (void)index;
  *total_bytes = d->capacity;
  *free_bytes = d->capacity - d->used;
  return true;
}

static void *fake_alloc(void *ctx, int index, size_t nbytes) {
  fake_device *d = ctx;
  d->last_index = index;
  if (d->used + nbytes > d->capacity) return NULL;
  void *p = malloc(nbytes);
  if (p) {
    d->used += nbytes;
    d->allocs++;
  }
  return p;
}

static void fake_free(void *ctx, int index, void *ptr, size_t nbytes) {
  fake_device *d = ctx;
  d->last_index = index;
  free(ptr);
  d->used -= nbytes;
  d->frees++;
  d->last_free_size = nbytes;
}

static void test_fake_device_backend(void) {
  lt_device dev = {LT_DEVICE_CUDA, 3};
  void *ptr;
  lt_block *block;
  lt_alloc_set_backend(LT_DEVICE_CUDA, NULL);
  CHECK_EQ_INT(lt_alloc(dev, 16, LT_CAT_OTHER, &ptr, &block), LT_ERR_DEVICE);
  CHECK(strstr(lt_last_error(), "cuda:3") != NULL);

  fake_device fd = {.capacity = 30 * MiB};
  lt_raw_allocator raw = {.alloc = fake_alloc, .free = fake_free, .mem_info = fake_mem_info, .ctx = &fd};
  lt_alloc_set_backend(LT_DEVICE_CUDA, &raw);
  held a = must_alloc_on(dev, 5 * MiB, LT_CAT_PARAMETER); /* 20 MiB segment */
  CHECK_EQ_INT(fd.allocs, 1);
  CHECK_EQ_INT(fd.used, 20 * MiB);
  CHECK_EQ_INT(fd.last_index, 3); /* the raw allocator is told which device */
  size_t dev_free = 0, dev_total = 0; /* the driver's view, beside lt's */
  CHECK(lt_device_memory_info(dev, &dev_free, &dev_total));
  CHECK_EQ_INT(dev_total, 30 * MiB);
  CHECK_EQ_INT(dev_free, 10 * MiB);
  lt_memory_stats s = stats_of(dev);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_ALL].current, 20 * MiB);
  CHECK_EQ_INT(s.num_device_allocs, 1);
  CHECK_EQ_INT(cpu_stats().reserved_bytes[LT_POOL_ALL].current, 0); /* devices are separate */

  /* The device refuses a second 20 MiB segment (no limit is set). */
  CHECK_EQ_INT(lt_alloc(dev, 16 * MiB, LT_CAT_OTHER, &ptr, &block), LT_ERR_OOM);
  CHECK_EQ_STR(lt_last_error(), "out of memory on cuda:3: tried to allocate 16.0 MiB; 5.0 MiB "
                                "allocated, 20.0 MiB reserved, no limit, 15.0 MiB free in cached "
                                "blocks");
  s = stats_of(dev);
  CHECK_EQ_INT(s.num_ooms, 1);
  CHECK_EQ_INT(s.num_alloc_retries, 1);

  /* A small request fits: a 2 MiB segment. */
  held b = must_alloc_on(dev, 100, LT_CAT_OTHER);
  CHECK_EQ_INT(fd.used, 22 * MiB);
  lt_free(a.block);
  lt_free(b.block);
  CHECK_EQ_INT(lt_empty_cache(dev), 22 * MiB);
  CHECK_EQ_INT(fd.used, 0);
  CHECK_EQ_INT(fd.frees, 2);
  s = stats_of(dev);
  CHECK_EQ_INT(s.num_device_frees, 2);
  CHECK_EQ_INT(s.segment[LT_POOL_ALL].current, 0);
  lt_alloc_set_backend(LT_DEVICE_CUDA, NULL);
}

/* ---- random allocations against a model of what must hold ---- */

static uint64_t rng_state = 88172645463325252u;
static uint64_t next_random(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static size_t random_size(void) {
  switch (next_random() % 4) {
    case 0: return next_random() % 4096;
    case 1: return next_random() % (256 * KiB);
    case 2: return next_random() % (2 * MiB);
    default: return next_random() % (24 * MiB);
  }
}

enum { NSLOTS = 200, NSTEPS = 4000 };

static void test_random_against_model(void) {
  start_clean();
  held slots[NSLOTS] = {{0}};
  size_t requested[NSLOTS] = {0};
  unsigned char tag[NSLOTS] = {0};
  int failures = 0;
  for (int step = 0; step < NSTEPS; step++) {
    int i = (int)(next_random() % NSLOTS);
    if (slots[i].block) {
      /* The block's first and last bytes still hold its tag: no overlap. */
      unsigned char *p = slots[i].ptr;
      if (requested[i] && (p[0] != tag[i] || p[requested[i] - 1] != tag[i])) failures++;
      lt_free(slots[i].block);
      slots[i].block = NULL;
    } else {
      requested[i] = random_size();
      if (lt_alloc(lt_cpu(), requested[i], LT_CAT_OTHER, &slots[i].ptr, &slots[i].block) != LT_OK) {
        failures++;
        continue;
      }
      tag[i] = (unsigned char)(step & 0xff);
      if (requested[i]) memset(slots[i].ptr, tag[i], requested[i]);
    }
    if (step % 50 == 0) {
      int64_t live = 0, asked = 0;
      for (int k = 0; k < NSLOTS; k++) {
        if (!slots[k].block) continue;
        live += (int64_t)lt_block_size(slots[k].block);
        asked += (int64_t)requested[k];
      }
      lt_memory_stats s = cpu_stats();
      if (s.allocated_bytes[LT_POOL_ALL].current != live) failures++;
      if (s.requested_bytes[LT_POOL_ALL].current != asked) failures++;
      if (s.allocated_bytes[LT_POOL_ALL].current + s.inactive_split_bytes[LT_POOL_ALL].current >
          s.reserved_bytes[LT_POOL_ALL].current)
        failures++;
      if (step % 1000 == 0) lt_empty_cache(lt_cpu());
    }
  }
  CHECK_EQ_INT(failures, 0);
  for (int k = 0; k < NSLOTS; k++) lt_free(slots[k].block);
  lt_memory_stats s = cpu_stats();
  CHECK_EQ_INT(s.allocated_bytes[LT_POOL_ALL].current, 0);
  CHECK_EQ_INT(s.allocation[LT_POOL_ALL].current, 0);
  CHECK_EQ_INT(s.inactive_split[LT_POOL_ALL].current, 0);
  CHECK_EQ_INT(s.inactive_split_bytes[LT_POOL_ALL].current, 0);
  CHECK_EQ_INT(lt_empty_cache(lt_cpu()), (size_t)s.reserved_bytes[LT_POOL_ALL].current);
  s = cpu_stats();
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_ALL].current, 0);
  CHECK_EQ_INT(s.segment[LT_POOL_ALL].current, 0);
  CHECK_EQ_INT(s.num_device_allocs, s.num_device_frees);
}

/* ---- threads: the per-device lock keeps the books straight ---- */

static void *thread_churn(void *arg) {
  (void)arg;
  for (int i = 0; i < 2000; i++) {
    void *p;
    lt_block *b;
    if (lt_alloc(lt_cpu(), (size_t)(i % 97) * 1000 + 1, LT_CAT_OTHER, &p, &b) == LT_OK) lt_free(b);
  }
  return NULL;
}

static void test_threads(void) {
  start_clean();
  pthread_t threads[4];
  for (int i = 0; i < 4; i++) pthread_create(&threads[i], NULL, thread_churn, NULL);
  for (int i = 0; i < 4; i++) pthread_join(threads[i], NULL);
  lt_memory_stats s = cpu_stats();
  CHECK_EQ_INT(s.allocated_bytes[LT_POOL_ALL].current, 0);
  CHECK_EQ_INT(s.allocation[LT_POOL_ALL].current, 0);
  CHECK_EQ_INT(s.requested_bytes[LT_POOL_ALL].current, 0);
  lt_empty_cache(lt_cpu());
}

int main(void) {
  test_rounding();
  test_small_pool_segment();
  test_large_pool_segments();
  test_reuse_after_free();
  test_split_and_merge();
  test_empty_cache();
  test_limit_and_oom_message();
  test_format_bytes();
  test_oom_hook();
  test_peaks();
  test_categories();
  test_largest();
  test_zero_bytes_and_null();
  test_bad_arguments();
  test_fake_device_backend();
  test_random_against_model();
  test_threads();
  start_clean();
  return check_summary("test_alloc");
}
