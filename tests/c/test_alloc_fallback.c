/* Allocations near the limit (issue 16, item 7): where the usual segment
 * (PyTorch's rule: 20 MiB for a request between 1 and 10 MiB, 2 MiB for a
 * small one) does not fit, lt falls back to a segment of the request's own
 * size (large pool: rounded up to 2 MiB) and counts it in
 * num_segment_fallbacks; only then out of memory, with a message that says
 * whether the limit is reached or the free bytes are fragmented.
 *
 * The guarantee, tested exactly by the sweep: with fallback size F (the
 * request rounded to 512 bytes; above 1 MiB, further up to 2 MiB), an
 * allocation fails only when no cached block of its pool fits it and
 * limit - (bytes of the segments holding live blocks) < F. The message says
 * "allocated is only X below the limit" when limit - allocated < F (no
 * arrangement of the free bytes could help), "fragmented" otherwise. */
#include <stdint.h>
#include <stdio.h>
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
  return h;
}

static held must_alloc(size_t nbytes) { return must_alloc_on(lt_cpu(), nbytes, LT_CAT_OTHER); }

/* An allocation that must fail; its message is lt_last_error(). */
static void must_fail_on(lt_device dev, size_t nbytes) {
  void *ptr = (void *)1;
  lt_block *block = (lt_block *)1;
  CHECK_EQ_INT(lt_alloc(dev, nbytes, LT_CAT_OTHER, &ptr, &block), LT_ERR_OOM);
  CHECK(ptr == NULL && block == NULL);
}

static lt_memory_stats stats_of(lt_device dev) {
  lt_memory_stats s;
  lt_memory_get_stats(dev, &s);
  return s;
}
static lt_memory_stats cpu_stats(void) { return stats_of(lt_cpu()); }

static void start_clean(void) {
  lt_set_limit(lt_cpu(), 0);
  lt_empty_cache(lt_cpu());
  lt_memory_stats s = cpu_stats();
  CHECK_EQ_INT(s.allocated_bytes[LT_POOL_ALL].current, 0);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_ALL].current, 0);
}

/* The issue's state: 34 MiB allocated, 42 MiB reserved, the 8 MiB free all in
 * blocks of at most 3 MiB inside a partly used 20 MiB segment. */
typedef struct fragmented_state {
  held whole; /* 22 MiB: a segment of its own */
  held q[6];  /* 3 MiB each, carved from one 20 MiB segment; q[1], q[3] freed */
} fragmented_state;

static fragmented_state make_fragmented_state(void) {
  fragmented_state st;
  st.whole = must_alloc_on(lt_cpu(), 22 * MiB, LT_CAT_PARAMETER);
  for (int i = 0; i < 6; i++) st.q[i] = must_alloc_on(lt_cpu(), 3 * MiB, LT_CAT_ACTIVATION);
  for (int i = 1; i < 6; i++) CHECK((char *)st.q[i].ptr == (char *)st.q[0].ptr + (size_t)i * 3 * MiB);
  lt_free(st.q[1].block);
  lt_free(st.q[3].block);
  st.q[1].block = st.q[3].block = NULL;
  lt_memory_stats s = cpu_stats();
  CHECK_EQ_INT(s.allocated_bytes[LT_POOL_ALL].current, 34 * MiB);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_ALL].current, 42 * MiB);
  /* Two 3 MiB holes and the 2 MiB tail (split off: more than 1 MiB). */
  CHECK_EQ_INT(s.inactive_split[LT_POOL_LARGE].current, 3);
  CHECK_EQ_INT(s.inactive_split_bytes[LT_POOL_LARGE].current, 8 * MiB);
  CHECK_EQ_INT(s.segment[LT_POOL_LARGE].current, 2);
  return st;
}

static void free_fragmented_state(fragmented_state *st) {
  lt_free(st->whole.block);
  for (int i = 0; i < 6; i++) lt_free(st->q[i].block);
}

/* The reported case: PyTorch raises here, lt serves it from a 4 MiB segment. */
static void test_issue_scenario(void) {
  start_clean();
  lt_set_limit(lt_cpu(), 60 * MiB);
  fragmented_state st = make_fragmented_state();
  lt_memory_stats before = cpu_stats();
  CHECK_EQ_INT(before.num_segment_fallbacks, 0);

  held grad = must_alloc_on(lt_cpu(), 4 * MiB, LT_CAT_GRADIENT); /* 20 MiB: 62 > 60 */
  lt_memory_stats s = cpu_stats();
  CHECK_EQ_INT(s.num_segment_fallbacks - before.num_segment_fallbacks, 1);
  CHECK_EQ_INT(s.num_alloc_retries - before.num_alloc_retries, 1); /* released first: nothing */
  CHECK_EQ_INT(s.num_ooms - before.num_ooms, 0);
  CHECK_EQ_INT(s.num_device_allocs - before.num_device_allocs, 1);
  CHECK_EQ_INT(s.num_device_frees - before.num_device_frees, 0);
  CHECK_EQ_INT(lt_block_size(grad.block), 4 * MiB);
  CHECK_EQ_INT(s.allocated_bytes[LT_POOL_ALL].current, 38 * MiB);
  CHECK_EQ_INT(s.allocated_bytes[LT_POOL_LARGE].current, 38 * MiB);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_ALL].current, 46 * MiB);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_LARGE].current, 46 * MiB);
  CHECK_EQ_INT(s.segment[LT_POOL_LARGE].current, 3);
  CHECK_EQ_INT(s.requested_bytes[LT_POOL_ALL].current, 38 * MiB);
  CHECK_EQ_INT(s.category_bytes[LT_CAT_GRADIENT].current, 4 * MiB);
  /* The segment is exactly the block: nothing split, the holes unchanged. */
  CHECK_EQ_INT(s.inactive_split[LT_POOL_LARGE].current, 3);
  CHECK_EQ_INT(s.inactive_split_bytes[LT_POOL_LARGE].current, 8 * MiB);

  /* A 3 MiB request still comes from a hole, without a segment. */
  held hole = must_alloc(3 * MiB);
  CHECK(hole.ptr == st.q[1].ptr);
  CHECK_EQ_INT(cpu_stats().num_device_allocs, s.num_device_allocs);
  lt_free(hole.block);

  /* Freed, the fallback segment is an ordinary whole free segment. */
  CHECK_EQ_INT(lt_free(grad.block), 4 * MiB);
  free_fragmented_state(&st);
  CHECK_EQ_INT(lt_empty_cache(lt_cpu()), 46 * MiB);
  CHECK_EQ_INT(cpu_stats().num_segment_fallbacks - before.num_segment_fallbacks, 1);
}

/* The order: cache, usual segment, (hook), release whole free segments and
 * retry, fallback. A whole free segment is given back before any fallback. */
static void test_release_before_fallback(void) {
  start_clean();
  lt_set_limit(lt_cpu(), 21 * MiB);
  held small = must_alloc(KiB); /* a 2 MiB segment */
  lt_free(small.block);         /* cached, whole and free */
  lt_memory_stats before = cpu_stats();
  held a = must_alloc(5 * MiB); /* 2 + 20 > 21: released, then the usual 20 MiB */
  lt_memory_stats s = cpu_stats();
  CHECK_EQ_INT(s.num_alloc_retries - before.num_alloc_retries, 1);
  CHECK_EQ_INT(s.num_segment_fallbacks - before.num_segment_fallbacks, 0);
  CHECK_EQ_INT(s.num_device_frees - before.num_device_frees, 1);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_ALL].current, 20 * MiB);
  CHECK_EQ_INT(s.inactive_split_bytes[LT_POOL_LARGE].current, 15 * MiB);

  /* A cached block is used before anything else: no retry, no fallback. */
  held b = must_alloc(15 * MiB);
  CHECK((char *)b.ptr == (char *)a.ptr + 5 * MiB);
  CHECK_EQ_INT(cpu_stats().num_alloc_retries, s.num_alloc_retries);
  lt_free(a.block);
  lt_free(b.block);
}

/* Not enough room below the limit for the fallback, though allocated is far
 * enough below it: the free bytes are scattered. */
static void test_fragmented_message(void) {
  start_clean();
  fragmented_state st = make_fragmented_state();
  lt_set_limit(lt_cpu(), 44 * MiB); /* 10 MiB above allocated, 2 MiB above reserved */
  lt_memory_stats before = cpu_stats();
  must_fail_on(lt_cpu(), 4 * MiB);
  CHECK_EQ_STR(lt_last_error(), "out of memory on cpu: tried to allocate 4.0 MiB; 34.0 MiB allocated, "
                                "42.0 MiB reserved, limit 44.0 MiB, 8.0 MiB free in cached blocks, but "
                                "no free block of 4.0 MiB: fragmented (only 2.0 MiB unreserved below "
                                "the limit, a 4.0 MiB segment needed)");
  lt_memory_stats s = cpu_stats();
  CHECK_EQ_INT(s.num_ooms - before.num_ooms, 1);
  CHECK_EQ_INT(s.num_segment_fallbacks - before.num_segment_fallbacks, 0);
  CHECK_EQ_INT(s.allocated_bytes[LT_POOL_ALL].current, 34 * MiB);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_ALL].current, 42 * MiB);
  CHECK_EQ_INT(s.num_device_allocs, before.num_device_allocs);

  /* The holes still serve what fits them; then the 2 MiB below the limit
   * take a 2 MiB fallback, and nothing is left. */
  held c = must_alloc(3 * MiB);
  CHECK(c.ptr == st.q[1].ptr);
  held d = must_alloc(3 * MiB);
  CHECK(d.ptr == st.q[3].ptr);
  held e = must_alloc(2 * MiB);
  CHECK((char *)e.ptr == (char *)st.q[5].ptr + 3 * MiB);
  before = cpu_stats();
  held f = must_alloc(2 * MiB);
  s = cpu_stats();
  CHECK_EQ_INT(s.num_segment_fallbacks - before.num_segment_fallbacks, 1);
  CHECK_EQ_INT(s.allocated_bytes[LT_POOL_ALL].current, 44 * MiB);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_ALL].current, 44 * MiB);
  must_fail_on(lt_cpu(), 512 * KiB);
  CHECK_EQ_STR(lt_last_error(), "out of memory on cpu: tried to allocate 512.0 KiB; 44.0 MiB allocated, "
                                "44.0 MiB reserved, limit 44.0 MiB; allocated is only 0 B below the "
                                "limit, a 512.0 KiB segment needed");
  lt_free(c.block);
  lt_free(d.block);
  lt_free(e.block);
  lt_free(f.block); /* its segment is whole and free: released by the next retry */

  /* A limit set below reserved: fragmented still, and says by how much. */
  lt_set_limit(lt_cpu(), 40 * MiB);
  must_fail_on(lt_cpu(), 4 * MiB);
  CHECK_EQ_STR(lt_last_error(), "out of memory on cpu: tried to allocate 4.0 MiB; 34.0 MiB allocated, "
                                "42.0 MiB reserved, limit 40.0 MiB, 8.0 MiB free in cached blocks, but "
                                "no free block of 4.0 MiB: fragmented (reserved is 2.0 MiB over the "
                                "limit)");
  free_fragmented_state(&st);
}

/* The limit itself leaves too little, whatever the arrangement. */
static void test_full_message(void) {
  start_clean();
  lt_set_limit(lt_cpu(), 60 * MiB);
  held a = must_alloc(58 * MiB); /* its own segment */
  lt_memory_stats before = cpu_stats();
  must_fail_on(lt_cpu(), 4 * MiB);
  CHECK_EQ_STR(lt_last_error(), "out of memory on cpu: tried to allocate 4.0 MiB; 58.0 MiB allocated, "
                                "58.0 MiB reserved, limit 60.0 MiB; allocated is only 2.0 MiB below "
                                "the limit, a 4.0 MiB segment needed");
  lt_memory_stats s = cpu_stats();
  CHECK_EQ_INT(s.num_ooms - before.num_ooms, 1);
  CHECK_EQ_INT(s.num_segment_fallbacks, before.num_segment_fallbacks);

  /* Rounding counts: 1.5 MiB + 1 needs a 2 MiB segment, which fits exactly. */
  held b = must_alloc(MiB + MiB / 2 + 1);
  s = cpu_stats();
  CHECK_EQ_INT(s.num_segment_fallbacks - before.num_segment_fallbacks, 1);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_ALL].current, 60 * MiB);
  CHECK_EQ_INT(lt_block_size(b.block), 2 * MiB); /* the 512 KiB left is not split off */
  lt_free(b.block);

  /* 3 MiB + 1 byte needs a 4 MiB segment: with 3.5 MiB left it fails, with
   * 4 MiB left it succeeds. */
  lt_set_limit(lt_cpu(), 61 * MiB + MiB / 2);
  lt_empty_cache(lt_cpu()); /* the 2 MiB segment above, now free */
  must_fail_on(lt_cpu(), 3 * MiB + 1);
  CHECK_EQ_STR(lt_last_error(), "out of memory on cpu: tried to allocate 3.0 MiB; 58.0 MiB allocated, "
                                "58.0 MiB reserved, limit 61.5 MiB; allocated is only 3.5 MiB below "
                                "the limit, a 4.0 MiB segment needed");
  lt_set_limit(lt_cpu(), 62 * MiB);
  held c = must_alloc(3 * MiB + 1);
  CHECK_EQ_INT(cpu_stats().reserved_bytes[LT_POOL_ALL].current, 62 * MiB);
  lt_free(c.block);

  /* Allocated above a limit lowered afterwards. */
  lt_set_limit(lt_cpu(), 50 * MiB);
  must_fail_on(lt_cpu(), KiB);
  CHECK_EQ_STR(lt_last_error(), "out of memory on cpu: tried to allocate 1.0 KiB; 58.0 MiB allocated, "
                                "58.0 MiB reserved, limit 50.0 MiB; allocated is 8.0 MiB over the limit");
  lt_free(a.block);
}

/* The small pool: with less than 2 MiB below the limit, a small request gets
 * a segment of what is left (rounded down to 512 bytes), which the next small
 * requests share. */
static void test_small_pool_near_limit(void) {
  start_clean();
  lt_set_limit(lt_cpu(), 21 * MiB + 700); /* 1 MiB + 700 B left after a 20 MiB segment */
  held big = must_alloc(5 * MiB);
  lt_memory_stats before = cpu_stats();
  held a = must_alloc(KiB); /* 20 + 2 > 21 */
  lt_memory_stats s = cpu_stats();
  CHECK_EQ_INT(s.num_segment_fallbacks - before.num_segment_fallbacks, 1);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_SMALL].current, MiB + 512);
  CHECK_EQ_INT(s.segment[LT_POOL_SMALL].current, 1);
  CHECK_EQ_INT(s.allocated_bytes[LT_POOL_SMALL].current, KiB);
  CHECK_EQ_INT(s.inactive_split_bytes[LT_POOL_SMALL].current, MiB + 512 - KiB);

  held b = must_alloc(100 * KiB); /* shares it: no device call, no retry */
  CHECK((char *)b.ptr == (char *)a.ptr + KiB);
  lt_memory_stats s2 = cpu_stats();
  CHECK_EQ_INT(s2.num_device_allocs, s.num_device_allocs);
  CHECK_EQ_INT(s2.num_alloc_retries, s.num_alloc_retries);
  CHECK_EQ_INT(s2.num_segment_fallbacks, s.num_segment_fallbacks);

  /* 1 MiB does not fit what is left of it, and 188 B are left below the
   * limit: the 15 MiB free in the large segment are of the other pool. */
  must_fail_on(lt_cpu(), MiB);
  CHECK_EQ_STR(lt_last_error(), "out of memory on cpu: tried to allocate 1.0 MiB; 5.1 MiB allocated, "
                                "21.0 MiB reserved, limit 21.0 MiB, 15.9 MiB free in cached blocks, but "
                                "no free block of 1.0 MiB: fragmented (only 188 B unreserved below the "
                                "limit, a 1.0 MiB segment needed)");
  lt_free(a.block);
  lt_free(b.block);
  lt_free(big.block);

  /* A small fallback segment, once free, is cached like any other, and
   * released by the retry when a segment needs its room. */
  start_clean();
  lt_set_limit(lt_cpu(), 17 * MiB + 700);
  held whole = must_alloc(16 * MiB); /* a segment of its own: no free large block */
  a = must_alloc(KiB);               /* 16 + 2 > 17: a segment of 1 MiB + 512 */
  CHECK_EQ_INT(cpu_stats().reserved_bytes[LT_POOL_SMALL].current, MiB + 512);
  lt_free(a.block);
  lt_set_limit(lt_cpu(), 18 * MiB);
  before = cpu_stats();
  b = must_alloc(MiB); /* the cached small segment serves it */
  CHECK_EQ_INT(cpu_stats().num_device_allocs, before.num_device_allocs);
  CHECK_EQ_INT(cpu_stats().num_alloc_retries, before.num_alloc_retries);
  lt_free(b.block);
  held c = must_alloc(2 * MiB); /* 20 MiB no; released the small one; 20 MiB no; 2 MiB */
  s = cpu_stats();
  CHECK_EQ_INT(s.num_alloc_retries - before.num_alloc_retries, 1);
  CHECK_EQ_INT(s.num_device_frees - before.num_device_frees, 1);
  CHECK_EQ_INT(s.num_segment_fallbacks - before.num_segment_fallbacks, 1);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_SMALL].current, 0);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_ALL].current, 18 * MiB);
  lt_free(c.block);
  lt_free(whole.block);
}

/* ---- a device that refuses raw allocations past a capacity (no limit) ---- */

typedef struct fake_device {
  size_t capacity, used;
} fake_device;

static void *fake_alloc(void *ctx, int index, size_t nbytes) {
  fake_device *d = ctx;
  (void)index;
  if (d->used + nbytes > d->capacity) return NULL;
  void *p = malloc(nbytes);
  if (p) d->used += nbytes;
  return p;
}

static void fake_free(void *ctx, int index, void *ptr, size_t nbytes) {
  fake_device *d = ctx;
  (void)index;
  free(ptr);
  d->used -= nbytes;
}

/* The device's own refusal leads to the same fallback. */
static void test_device_refusal(void) {
  lt_device dev = {LT_DEVICE_CUDA, 2};
  fake_device fd = {.capacity = 21 * MiB};
  lt_raw_allocator raw = {.alloc = fake_alloc, .free = fake_free, .ctx = &fd};
  lt_alloc_set_backend(LT_DEVICE_CUDA, &raw);

  held big = must_alloc_on(dev, 16 * MiB, LT_CAT_OTHER); /* a 16 MiB segment */
  held a = must_alloc_on(dev, 4 * MiB, LT_CAT_OTHER);    /* 20 MiB refused: 4 MiB */
  CHECK_EQ_INT(fd.used, 20 * MiB);
  held b = must_alloc_on(dev, KiB, LT_CAT_OTHER); /* 2 MiB refused: 1 KiB */
  CHECK_EQ_INT(fd.used, 20 * MiB + KiB);
  lt_memory_stats s = stats_of(dev);
  CHECK_EQ_INT(s.num_segment_fallbacks, 2);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_SMALL].current, KiB);
  CHECK_EQ_INT(s.num_ooms, 0);

  /* Full: nothing cached, the device says no; no verdict about a limit. */
  must_fail_on(dev, 2 * MiB);
  CHECK_EQ_STR(lt_last_error(), "out of memory on cuda:2: tried to allocate 2.0 MiB; 20.0 MiB allocated, "
                                "20.0 MiB reserved, no limit");
  lt_free(b.block);
  lt_free(a.block);
  lt_free(big.block);
  CHECK_EQ_INT(lt_empty_cache(dev), 20 * MiB + KiB);

  /* Fragmented: 15 MiB free in one segment, a 12 MiB request, no room for a
   * 12 MiB segment on the device. */
  fd.capacity = 30 * MiB;
  held x = must_alloc_on(dev, 5 * MiB, LT_CAT_OTHER); /* 20 MiB segment */
  held y = must_alloc_on(dev, 5 * MiB, LT_CAT_OTHER);
  lt_free(x.block); /* a 5 MiB hole before y, 10 MiB after */
  must_fail_on(dev, 12 * MiB);
  CHECK_EQ_STR(lt_last_error(), "out of memory on cuda:2: tried to allocate 12.0 MiB; 5.0 MiB allocated, "
                                "20.0 MiB reserved, no limit, 15.0 MiB free in cached blocks, but no free "
                                "block of 12.0 MiB: fragmented");
  lt_free(y.block);
  CHECK_EQ_INT(lt_empty_cache(dev), 20 * MiB);
  CHECK_EQ_INT(fd.used, 0);

  /* Under a limit as well: the small fallback takes the 1 MiB the limit
   * leaves; when the device cannot give that, the request's own size. */
  fd.capacity = 20 * MiB + 4 * KiB;
  lt_set_limit(dev, 21 * MiB);
  big = must_alloc_on(dev, 16 * MiB, LT_CAT_OTHER);
  a = must_alloc_on(dev, 4 * MiB, LT_CAT_OTHER); /* 20 MiB over the limit: 4 MiB */
  lt_memory_stats before = stats_of(dev);
  b = must_alloc_on(dev, KiB, LT_CAT_OTHER); /* 2 MiB over the limit, 1 MiB refused: 1 KiB */
  s = stats_of(dev);
  CHECK_EQ_INT(s.num_segment_fallbacks - before.num_segment_fallbacks, 1);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_SMALL].current, KiB);
  CHECK_EQ_INT(fd.used, 20 * MiB + KiB);
  lt_free(b.block);
  lt_free(a.block);
  lt_free(big.block);
  lt_set_limit(dev, 0);
  CHECK_EQ_INT(lt_empty_cache(dev), 20 * MiB + KiB);
  lt_alloc_set_backend(LT_DEVICE_CUDA, NULL);
}

/* ---- the sweep: the guarantee under many limits ---- */

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint64_t next_random(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static size_t sweep_size(void) {
  switch (next_random() % 5) {
    case 0: return 1 + next_random() % (64 * KiB);
    case 1: return 1 + next_random() % MiB;            /* small pool */
    case 2: return MiB + 1 + next_random() % (3 * MiB); /* large, 20 MiB segments */
    case 3: return MiB + 1 + next_random() % (9 * MiB);
    default: return 10 * MiB + next_random() % (14 * MiB); /* own segment */
  }
}

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

enum { SWEEP_LIMITS = 48, SWEEP_SLOTS = 24, SWEEP_STEPS = 600 };

static void test_sweep(void) {
  int violations = 0, allocs = 0, fallbacks = 0, full = 0, fragmented = 0;
  for (int li = 0; li < SWEEP_LIMITS; li++) {
    start_clean();
    /* 5 MiB to about 100 MiB, mostly not multiples of 2 MiB. */
    const size_t limit = 5 * MiB + (size_t)li * (2 * MiB + 37 * KiB) + (size_t)li * 1000;
    lt_set_limit(lt_cpu(), limit);
    held slots[SWEEP_SLOTS] = {{0}};
    for (int step = 0; step < SWEEP_STEPS; step++) {
      int i = (int)(next_random() % SWEEP_SLOTS);
      if (slots[i].block) {
        lt_free(slots[i].block);
        slots[i].block = NULL;
        continue;
      }
      const size_t n = sweep_size();
      const size_t rounded = round_up(n, 512);
      const size_t need = rounded <= MiB ? rounded : round_up(rounded, 2 * MiB);
      const size_t usual = rounded <= MiB ? 2 * MiB : rounded < 10 * MiB ? 20 * MiB : need;
      lt_memory_stats before = cpu_stats();
      lt_status st = lt_alloc(lt_cpu(), n, LT_CAT_OTHER, &slots[i].ptr, &slots[i].block);
      lt_memory_stats after = cpu_stats();
      const size_t reserved = (size_t)after.reserved_bytes[LT_POOL_ALL].current;
      const size_t allocated = (size_t)after.allocated_bytes[LT_POOL_ALL].current;
      if (reserved > limit) violations++;
      if (st == LT_OK) {
        allocs++;
        if (after.num_segment_fallbacks == before.num_segment_fallbacks) continue;
        fallbacks++;
        /* A fallback only where the usual segment did not fit, even with the
         * whole free segments released; its size is need (small pool: the
         * room left, so reserved ends within 512 bytes of the limit). */
        if (need == usual) violations++;
        if (rounded > MiB && limit - (reserved - need) >= usual) violations++;
        if (rounded <= MiB && limit - reserved >= 512) violations++;
        continue;
      }
      slots[i].block = NULL;
      if (st != LT_ERR_OOM || after.allocated_bytes[LT_POOL_ALL].current !=
                                  before.allocated_bytes[LT_POOL_ALL].current) {
        violations++;
        continue;
      }
      /* The guarantee: the failing path released every whole free segment,
       * so reserved is now the segments holding live blocks, and they leave
       * less than the fallback below the limit. */
      if (limit - reserved >= need) {
        violations++;
        fprintf(stderr, "  limit %zu: %zu bytes failed with %zu unreserved: %s\n", limit, n,
                limit - reserved, lt_last_error());
      }
      /* The message names the cause, with the numbers. */
      char expected[256], b1[32], b2[32], b3[32], b4[32];
      if (limit - allocated < need) {
        full++;
        snprintf(expected, sizeof expected, "; allocated is only %s below the limit, a %s segment needed",
                 lt_format_bytes(limit - allocated, b1), lt_format_bytes(need, b2));
      } else {
        fragmented++;
        snprintf(expected, sizeof expected,
                 ", %s free in cached blocks, but no free block of %s: fragmented (only %s unreserved "
                 "below the limit, a %s segment needed)",
                 lt_format_bytes(reserved - allocated, b1), lt_format_bytes(rounded, b2),
                 lt_format_bytes(limit - reserved, b3), lt_format_bytes(need, b4));
      }
      if (!ends_with(lt_last_error(), expected)) {
        violations++;
        fprintf(stderr, "  expected ...%s\n  got %s\n", expected, lt_last_error());
      }
    }
    for (int k = 0; k < SWEEP_SLOTS; k++) lt_free(slots[k].block);
  }
  CHECK_EQ_INT(violations, 0);
  /* Every branch was taken, often. */
  CHECK(allocs > 5000);
  CHECK(fallbacks > 100);
  CHECK(full > 100);
  CHECK(fragmented > 100);
  printf("sweep: %d allocations, %d fallbacks, %d out of memory at the limit, %d fragmented\n", allocs,
         fallbacks, full, fragmented);
  start_clean();
}

int main(void) {
  test_issue_scenario();
  test_release_before_fallback();
  test_fragmented_message();
  test_full_message();
  test_small_pool_near_limit();
  test_device_refusal();
  test_sweep();
  start_clean();
  return check_summary("test_alloc_fallback");
}
