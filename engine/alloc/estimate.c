/* Estimation (lt.memory.estimate): while it is on, every device's allocator
 * is a shadow, the same caching allocator (rounding, pools, best fit, split
 * and merge, the limit, the peak hook's collect mark) over address space
 * that no memory backs. A shadow starts as a copy of its real allocator: the
 * same segments and blocks (each live real block has a twin there, freed
 * when the real one is freed, moved when its category moves), the same
 * statistics with the peaks reset to the current values. So what the ops
 * allocate and free during the estimate lands on the blocks and moves the
 * figures exactly as in the real run, while nothing is allocated. Where the
 * real run would raise out of memory the shadow notes it and goes on
 * without the limit (oom.c), so that the whole step's peak is still known.
 *
 * Segments are PROT_NONE reservations (MAP_NORESERVE: no memory, no swap), so
 * that a kernel that wrongly ran on them would fault instead of writing over
 * real memory; the ops layer runs no kernel while estimating (lt_estimating).
 * A shadow whose own blocks are all free at the end is released; one that
 * still has live blocks (a tensor made inside the estimate and kept) stays,
 * serving only the frees of its blocks, and a later estimate releases it
 * once empty. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "alloc/alloc_internal.h"

static atomic_bool estimating;
static pthread_mutex_t estimate_lock = PTHREAD_MUTEX_INITIALIZER;
/* The current estimate's shadows, by the real allocator's place. */
static lt_device_allocator *shadows[LT_NDEVICE_TYPES][LT_MAX_DEVICES];
/* Shadows of earlier estimates that still had live blocks. */
static lt_device_allocator *kept;

static void *reserve(void *ctx, int index, size_t nbytes) {
  (void)ctx, (void)index;
  void *p = mmap(NULL, nbytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

static void unreserve(void *ctx, int index, void *ptr, size_t nbytes) {
  (void)ctx, (void)index;
  munmap(ptr, nbytes);
}

static const lt_raw_allocator reservations = {.alloc = reserve, .free = unreserve};

bool lt_estimating(void) { return atomic_load_explicit(&estimating, memory_order_relaxed); }

/* Releases s when none of its blocks is live; true when it did. */
static bool release_if_empty(lt_device_allocator *s) {
  pthread_mutex_lock(&s->lock);
  const bool empty = s->live == NULL && s->pending == NULL;
  if (empty) lt_release_free_segments_locked(s);
  pthread_mutex_unlock(&s->lock);
  if (!empty) return false;
  for (lt_block *b = s->spare_blocks; b;) {
    lt_block *next = b->next;
    free(b);
    b = next;
  }
  pthread_mutex_destroy(&s->lock);
  free(s);
  return true;
}

static lt_device_allocator *new_shadow(lt_device_allocator *real) {
  lt_device_allocator *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  pthread_mutex_init(&s->lock, NULL);
  s->dev = real->dev;
  s->estimate_raw = &reservations;
  s->real = real;
  pthread_mutex_lock(&real->lock);
  pthread_mutex_lock(&s->lock);
  s->stats = real->stats;
  s->collect_mark = real->collect_mark;
  s->collect_mark_requested = real->collect_mark_requested;
  const bool cloned = lt_clone_cache_locked(real, s, &reservations);
  pthread_mutex_unlock(&s->lock);
  pthread_mutex_unlock(&real->lock);
  if (!cloned) { /* out of host memory: no estimate rather than a wrong one */
    lt_drop_twins(real);
    release_if_empty(s);
    return NULL;
  }
  s->stats.num_device_allocs = s->stats.num_device_frees = 0;
  lt_memory_stats *st = &s->stats;
  lt_stat *all[] = {st->allocation, st->segment, st->active, st->inactive_split,
                    st->allocated_bytes, st->reserved_bytes, st->active_bytes,
                    st->inactive_split_bytes, st->requested_bytes};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
    for (int p = 0; p < LT_NPOOLS; p++) all[k][p].peak = all[k][p].current;
  for (int c = 0; c < LT_NCATEGORIES; c++) {
    st->category_bytes[c].peak = st->category_bytes[c].current;
    st->peak_category_bytes[c] = (size_t)st->category_bytes[c].current;
  }
  return s;
}

lt_device_allocator *lt_estimate_shadow_of(lt_device_allocator *real) {
  if (!lt_estimating()) return real;
  const int t = real->dev.type, i = real->dev.index;
  pthread_mutex_lock(&estimate_lock);
  if (!shadows[t][i] && lt_estimating()) shadows[t][i] = new_shadow(real);
  lt_device_allocator *s = shadows[t][i];
  pthread_mutex_unlock(&estimate_lock);
  return s; /* NULL only when the host has no memory for it: no device then */
}

void lt_alloc_estimate_count_free(const lt_block *b) {
  if (!b || !b->segment || !lt_estimating()) return;
  lt_device_allocator *da = b->segment->owner;
  if (lt_is_shadow(da)) return;
  lt_estimate_shadow_of(da); /* the copy, with b's twin, exists from here */
  pthread_mutex_lock(&da->lock);
  lt_block *twin = b->twin;
  ((lt_block *)b)->twin = NULL; /* the real block stays; its copy goes */
  pthread_mutex_unlock(&da->lock);
  if (twin) lt_free(twin);
}

static void release_kept_locked(void) {
  lt_device_allocator **link = &kept;
  while (*link) {
    lt_device_allocator *s = *link;
    lt_device_allocator *next = s->kept_next;
    if (release_if_empty(s))
      *link = next;
    else
      link = &s->kept_next;
  }
}

lt_status lt_alloc_estimate_begin(void) {
  pthread_mutex_lock(&estimate_lock);
  const bool already = lt_estimating();
  if (!already) {
    release_kept_locked();
    atomic_store(&estimating, true);
  }
  pthread_mutex_unlock(&estimate_lock);
  if (already) return lt_error(LT_ERR_ARG, "estimate: an estimate is already running (they do not nest)");
  return LT_OK;
}

void lt_alloc_estimate_end(void) {
  pthread_mutex_lock(&estimate_lock);
  atomic_store(&estimating, false);
  for (int t = 0; t < LT_NDEVICE_TYPES; t++)
    for (int i = 0; i < LT_MAX_DEVICES; i++) {
      lt_device_allocator *s = shadows[t][i];
      shadows[t][i] = NULL;
      if (s) lt_drop_twins(s->real);
      if (s && !release_if_empty(s)) {
        s->kept_next = kept;
        kept = s;
      }
    }
  pthread_mutex_unlock(&estimate_lock);
}

bool lt_alloc_estimate_oom(lt_device dev, char *buf, size_t cap) {
  buf[0] = '\0';
  if (dev.type < 0 || dev.type >= LT_NDEVICE_TYPES || dev.index < 0 ||
      dev.index >= LT_MAX_DEVICES)
    return false;
  pthread_mutex_lock(&estimate_lock);
  lt_device_allocator *s = shadows[dev.type][dev.index];
  if (s) {
    pthread_mutex_lock(&s->lock);
    snprintf(buf, cap, "%s", s->estimate_oom);
    pthread_mutex_unlock(&s->lock);
  }
  pthread_mutex_unlock(&estimate_lock);
  return buf[0] != '\0';
}
