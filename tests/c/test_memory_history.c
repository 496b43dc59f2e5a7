/* The allocator's event log (engine/alloc/history.c): exact events for a few
 * allocations on the CPU device, blocks live at the start, the cap on the
 * log, stop and clear, and threads allocating while it records. */
#include <pthread.h>
#include <stdlib.h>

#include "check.h"
#include "lt/alloc.h"

enum { MAX_READ = 64 };

static lt_block *must_alloc(size_t nbytes, lt_category cat) {
  void *ptr = NULL;
  lt_block *block = NULL;
  CHECK_EQ_INT(lt_alloc(lt_cpu(), nbytes, cat, &ptr, &block), LT_OK);
  return block;
}

static bool is_segment_event(const lt_memory_event *e) {
  return e->kind == LT_EVENT_SEGMENT_ALLOC || e->kind == LT_EVENT_SEGMENT_FREE;
}

/* The block and mark events of the log (test_segments checks the others). */
static size_t read_all(lt_memory_event *out) {
  lt_memory_event all[MAX_READ];
  size_t n = lt_memory_history_read(0, all, MAX_READ), kept = 0;
  for (size_t i = 0; i < n; i++)
    if (!is_segment_event(&all[i])) out[kept++] = all[i];
  return kept;
}

static void check_block_event(const lt_memory_event *e, lt_event_kind kind, size_t size,
                              size_t requested, lt_category cat) {
  CHECK_EQ_INT(e->kind, kind);
  CHECK_EQ_INT(e->size, size);
  CHECK_EQ_INT(e->requested, requested);
  CHECK_EQ_INT(e->category, cat);
  CHECK_EQ_INT(e->device.type, LT_DEVICE_CPU);
  CHECK(e->id != 0);
}

static void test_events_in_order(void) {
  lt_memory_event ev[MAX_READ];
  CHECK(!lt_memory_history_recording());
  CHECK_EQ_INT(lt_memory_history_start(0), LT_OK);
  CHECK(lt_memory_history_recording());
  CHECK_EQ_INT(read_all(ev), 0); /* nothing live, nothing logged yet */

  lt_block *a = must_alloc(1000, LT_CAT_OTHER);
  lt_block_set_origin(a, "train.lua:7", NULL); /* completes the alloc event */
  lt_memory_mark("epoch 1");
  lt_block *b = must_alloc(100, LT_CAT_OTHER);
  lt_block_set_category(b, LT_CAT_OPTIMIZER);
  lt_block_set_category(b, LT_CAT_OPTIMIZER); /* no change: no event */
  lt_free(a);
  lt_free(a); /* a second free is ignored, and not logged */
  lt_free(b);
  void *ptr;
  lt_block *zero;
  CHECK_EQ_INT(lt_alloc(lt_cpu(), 0, LT_CAT_OTHER, &ptr, &zero), LT_OK); /* no bytes: no event */
  lt_free(zero);

  size_t n = read_all(ev);
  CHECK_EQ_INT(n, 6);
  check_block_event(&ev[0], LT_EVENT_ALLOC, 1024, 1000, LT_CAT_OTHER);
  CHECK_EQ_STR(ev[0].origin, "train.lua:7");
  CHECK_EQ_INT(ev[1].kind, LT_EVENT_MARK);
  CHECK_EQ_STR(ev[1].origin, "epoch 1");
  check_block_event(&ev[2], LT_EVENT_ALLOC, 512, 100, LT_CAT_OTHER);
  CHECK(ev[2].origin == NULL);
  check_block_event(&ev[3], LT_EVENT_CATEGORY, 512, 100, LT_CAT_OPTIMIZER);
  CHECK_EQ_INT(ev[3].previous_category, LT_CAT_OTHER);
  check_block_event(&ev[4], LT_EVENT_FREE, 1024, 1000, LT_CAT_OTHER);
  CHECK_EQ_STR(ev[4].origin, "train.lua:7");
  check_block_event(&ev[5], LT_EVENT_FREE, 512, 100, LT_CAT_OPTIMIZER);
  CHECK_EQ_INT(ev[0].id, ev[4].id);
  CHECK_EQ_INT(ev[2].id, ev[3].id);
  CHECK_EQ_INT(ev[2].id, ev[5].id);
  CHECK(ev[0].id != ev[2].id);
  for (size_t i = 1; i < n; i++) CHECK(ev[i].time_ns >= ev[i - 1].time_ns);

  /* Stopped: the log stays readable and grows no more. */
  lt_memory_history_stop();
  lt_free(must_alloc(10, LT_CAT_OTHER));
  lt_memory_mark("ignored");
  CHECK_EQ_INT(read_all(ev), 6);
  lt_memory_history_info info;
  lt_memory_history_get_info(&info);
  CHECK(!info.recording);
  CHECK_EQ_INT(info.count, 7); /* and first the small pool's fresh segment */
  CHECK_EQ_INT(info.dropped, 0);
  CHECK_EQ_INT(info.max_events, LT_HISTORY_DEFAULT_MAX_EVENTS);
  CHECK_EQ_INT(lt_memory_history_read(0, ev, 1), 1);
  CHECK_EQ_INT(ev[0].kind, LT_EVENT_SEGMENT_ALLOC);
  CHECK_EQ_INT(lt_memory_history_read(5, ev, MAX_READ), 2); /* reading from an offset */
  CHECK_EQ_INT(ev[0].kind, LT_EVENT_FREE);
  CHECK_EQ_INT(lt_memory_history_read(7, ev, MAX_READ), 0);
}

/* A fresh recording starts with the blocks already live; a block struct
 * recycled from an earlier recording is not mistaken for a logged one. */
static void test_existing_blocks(void) {
  lt_memory_event ev[MAX_READ];
  lt_block *kept = must_alloc(3000, LT_CAT_PARAMETER);
  lt_block_set_origin(kept, "model.lua:3", NULL);
  CHECK_EQ_INT(lt_memory_history_start(0), LT_OK);
  CHECK_EQ_INT(read_all(ev), 1);
  check_block_event(&ev[0], LT_EVENT_EXISTING, 3072, 3000, LT_CAT_PARAMETER);
  CHECK_EQ_STR(ev[0].origin, "model.lua:3");
  lt_block *fresh = must_alloc(5000, LT_CAT_OTHER);
  lt_free(kept);
  lt_free(fresh);
  CHECK_EQ_INT(read_all(ev), 4);
  CHECK_EQ_INT(ev[1].kind, LT_EVENT_ALLOC);
  CHECK_EQ_INT(ev[2].kind, LT_EVENT_FREE);
  CHECK_EQ_INT(ev[2].id, ev[0].id);
  CHECK_EQ_INT(ev[3].id, ev[1].id);

  /* Starting again while recording keeps the log. */
  CHECK_EQ_INT(lt_memory_history_start(0), LT_OK);
  CHECK_EQ_INT(read_all(ev), 4);
  /* A default recording (lt --memory-report) gives way to the next start:
   * the log begins again there, with the live blocks as existing. */
  lt_memory_history_stop();
  lt_block *live = must_alloc(900, LT_CAT_OTHER);
  CHECK_EQ_INT(lt_memory_history_start_default(), LT_OK);
  lt_block *early = must_alloc(700, LT_CAT_OTHER);
  lt_free(early);
  CHECK_EQ_INT(read_all(ev), 3); /* live as existing, then early's alloc and free */
  CHECK_EQ_INT(lt_memory_history_start(0), LT_OK);
  CHECK(lt_memory_history_recording());
  CHECK_EQ_INT(read_all(ev), 1); /* only live, as existing */
  CHECK_EQ_INT(ev[0].kind, LT_EVENT_EXISTING);
  CHECK_EQ_INT(lt_memory_history_start(0), LT_OK); /* now a script's own: kept */
  CHECK_EQ_INT(read_all(ev), 1);
  lt_free(live);
  lt_memory_history_clear();
  CHECK(!lt_memory_history_recording());
  CHECK_EQ_INT(read_all(ev), 0);
}

static void test_max_events(void) {
  lt_memory_event ev[MAX_READ];
  CHECK_EQ_INT(lt_memory_history_start(3), LT_OK);
  lt_block *blocks[4];
  for (int i = 0; i < 4; i++) blocks[i] = must_alloc(512, LT_CAT_OTHER);
  for (int i = 0; i < 4; i++) lt_free(blocks[i]);
  lt_memory_history_info info;
  lt_memory_history_get_info(&info);
  CHECK_EQ_INT(info.count, 3);
  CHECK_EQ_INT(info.dropped, 6); /* the held segment came first */
  CHECK_EQ_INT(info.max_events, 3);
  CHECK_EQ_INT(read_all(ev), 2);
  lt_memory_history_clear();
}

/* Threads allocating while recording: every event is logged once, and the
 * log pairs every alloc with its free. */
enum { THREADS = 4, ROUNDS = 2000 };

/* Counts its own failures: CHECK's counters are not for several threads. */
static void *churn(void *failures) {
  for (int i = 0; i < ROUNDS; i++) {
    void *ptr;
    lt_block *block;
    if (lt_alloc(lt_cpu(), (size_t)(i % 7 + 1) * 700, LT_CAT_ACTIVATION, &ptr, &block) != LT_OK)
      ++*(int *)failures;
    else
      lt_free(block);
  }
  return NULL;
}

static void test_threads(void) {
  CHECK_EQ_INT(lt_memory_history_start(0), LT_OK);
  pthread_t threads[THREADS];
  int failures[THREADS] = {0};
  for (int i = 0; i < THREADS; i++) pthread_create(&threads[i], NULL, churn, &failures[i]);
  for (int i = 0; i < THREADS; i++) {
    pthread_join(threads[i], NULL);
    CHECK_EQ_INT(failures[i], 0);
  }
  lt_memory_history_stop();
  lt_memory_history_info info;
  lt_memory_history_get_info(&info);
  lt_memory_event *ev = malloc(info.count * sizeof *ev);
  CHECK_EQ_INT(lt_memory_history_read(0, ev, info.count), info.count);
  long long balance = 0, blocks = 0;
  for (size_t i = 0; i < info.count; i++) {
    if (is_segment_event(&ev[i])) continue;
    blocks++;
    balance += ev[i].kind == LT_EVENT_ALLOC ? (long long)ev[i].size : -(long long)ev[i].size;
  }
  CHECK_EQ_INT(blocks, 2 * THREADS * ROUNDS);
  CHECK_EQ_INT(balance, 0);
  free(ev);
  lt_memory_history_clear();
}

/* Segment events (held ones first), each block's segment and offset, and
 * the frees between lt_memory_history_collecting(true) and (false) flagged. */
static void test_segments(void) {
  lt_memory_event ev[MAX_READ];
  lt_empty_cache(lt_cpu());
  lt_block *small = must_alloc(1000, LT_CAT_OTHER); /* a small segment, held at the start */
  CHECK_EQ_INT(lt_memory_history_start(0), LT_OK);
  lt_block *big = must_alloc((size_t)25 << 20, LT_CAT_OTHER); /* a segment of its own */
  lt_block *next = must_alloc(1000, LT_CAT_OTHER);            /* after small in its segment */
  lt_memory_history_collecting(true);
  lt_free(big);
  lt_memory_history_collecting(false);
  lt_free(next);
  lt_free(small);
  lt_empty_cache(lt_cpu());
  lt_memory_history_stop();
  size_t n = lt_memory_history_read(0, ev, MAX_READ);
  CHECK_EQ_INT(n, 10);
  CHECK_EQ_INT(ev[0].kind, LT_EVENT_SEGMENT_ALLOC);
  CHECK_EQ_INT(ev[0].size, (size_t)2 << 20);
  CHECK_EQ_INT(ev[1].kind, LT_EVENT_EXISTING);
  CHECK_EQ_INT(ev[1].segment, ev[0].id);
  CHECK_EQ_INT(ev[1].offset, 0);
  CHECK_EQ_INT(ev[2].kind, LT_EVENT_SEGMENT_ALLOC);
  CHECK_EQ_INT(ev[2].size, (size_t)26 << 20);
  CHECK_EQ_INT(ev[3].kind, LT_EVENT_ALLOC);
  CHECK_EQ_INT(ev[3].segment, ev[2].id);
  CHECK_EQ_INT(ev[4].kind, LT_EVENT_ALLOC);
  CHECK_EQ_INT(ev[4].segment, ev[0].id);
  CHECK_EQ_INT(ev[4].offset, 1024);
  CHECK_EQ_INT(ev[5].kind, LT_EVENT_FREE);
  CHECK_EQ_INT(ev[5].flags, LT_EVENT_COLLECTED);
  CHECK_EQ_INT(ev[6].kind, LT_EVENT_FREE);
  CHECK_EQ_INT(ev[6].flags, 0);
  CHECK_EQ_INT(ev[7].flags, 0);
  /* empty_cache releases both segments, in the device's list order */
  CHECK_EQ_INT(ev[8].kind, LT_EVENT_SEGMENT_FREE);
  CHECK_EQ_INT(ev[9].kind, LT_EVENT_SEGMENT_FREE);
  CHECK(ev[8].id != ev[9].id);
  CHECK(ev[8].id == ev[0].id || ev[8].id == ev[2].id);
  CHECK(ev[9].id == ev[0].id || ev[9].id == ev[2].id);
  lt_memory_history_clear();
}

int main(void) {
  test_events_in_order();
  lt_memory_history_clear();
  test_existing_blocks();
  test_max_events();
  test_threads();
  test_segments();
  lt_empty_cache(lt_cpu());
  return check_summary("test_memory_history");
}
