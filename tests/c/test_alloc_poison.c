/* The sanitizer build sees a tensor overrun its own bytes (engine/alloc/
 * poison.h): every byte of a cached host segment that no live block asked
 * for is poisoned. Checked twice: through ASan's shadow directly, and by
 * children (this executable run again with --overrun CASE) that write past a
 * tensor through a deliberately broken view, which must die with ASan's
 * report while a write within the tensor's bytes must not.
 *
 * Without AddressSanitizer there is no shadow to mark: the test says so and
 * passes (build with -DLT_SANITIZE=ON to run it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "lt/lt.h"

#if defined(__SANITIZE_ADDRESS__)
#define HAVE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAVE_ASAN 1
#endif
#endif

#ifdef HAVE_ASAN
#include <fcntl.h>
#include <sanitizer/asan_interface.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)

static bool poisoned(const void *p) { return __asan_address_is_poisoned(p) != 0; }

static lt_memory_stats cpu_stats(void) {
  lt_memory_stats s;
  lt_memory_get_stats(lt_cpu(), &s);
  return s;
}

/* Requested bytes are usable, the rest of the rounded block and the free
 * rest of the segment are not; freed blocks are poisoned again, a reused
 * block is unpoisoned for its new request only. No statistic changes. */
static void test_shadow(void) {
  lt_empty_cache(lt_cpu());
  void *p = NULL, *q = NULL, *big = NULL;
  lt_block *pb = NULL, *qb = NULL, *bigb = NULL;
  CHECK(lt_alloc(lt_cpu(), 12, LT_CAT_OTHER, &p, &pb) == LT_OK);
  char *c = p;
  CHECK(__asan_region_is_poisoned(c, 12) == NULL);
  CHECK(poisoned(c + 12));
  CHECK(poisoned(c + 511)); /* the rounding tail */
  CHECK(poisoned(c + 512)); /* the free rest of the 2 MiB segment */
  CHECK(poisoned(c + 2 * MiB - 1));
  lt_memory_stats s = cpu_stats();
  CHECK_EQ_INT(s.allocated_bytes[LT_POOL_ALL].current, 512);
  CHECK_EQ_INT(s.requested_bytes[LT_POOL_ALL].current, 12);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_ALL].current, (int64_t)(2 * MiB));

  /* A neighbour split from the same segment: its own bytes only. */
  CHECK(lt_alloc(lt_cpu(), 700, LT_CAT_OTHER, &q, &qb) == LT_OK);
  CHECK((char *)q == c + 512);
  CHECK(__asan_region_is_poisoned(q, 700) == NULL);
  CHECK(poisoned((char *)q + 700));
  CHECK(poisoned(c + 12)); /* still: the first block's tail */

  lt_free(pb);
  CHECK(poisoned(c)); /* freed: a use after free is reported */
  CHECK(lt_alloc(lt_cpu(), 100, LT_CAT_OTHER, &p, &pb) == LT_OK);
  CHECK((char *)p == c); /* the same block, reused (best fit) */
  CHECK(__asan_region_is_poisoned(c, 100) == NULL);
  CHECK(poisoned(c + 100));
  lt_free(pb);
  lt_free(qb);
  CHECK(poisoned(c) && poisoned((char *)q)); /* merged back into one free segment */

  /* The large pool: a 3 MiB request in a 20 MiB segment. */
  CHECK(lt_alloc(lt_cpu(), 3 * MiB + 1, LT_CAT_OTHER, &big, &bigb) == LT_OK);
  CHECK(__asan_region_is_poisoned(big, 3 * MiB + 1) == NULL);
  CHECK(poisoned((char *)big + 3 * MiB + 1));
  CHECK(poisoned((char *)big + 20 * MiB - 1));
  lt_free(bigb);
  CHECK(poisoned(big));
  CHECK_EQ_INT(lt_empty_cache(lt_cpu()), 22 * MiB); /* unpoisoned on the way out */
  s = cpu_stats();
  CHECK_EQ_INT(s.allocated_bytes[LT_POOL_ALL].current, 0);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_ALL].current, 0);
}

/* Fallback segments (smaller than the usual one, near the limit) are
 * poisoned the same way: the request's bytes only are usable. */
static void test_fallback_segments(void) {
  lt_empty_cache(lt_cpu());
  lt_set_limit(lt_cpu(), 21 * MiB);
  void *big = NULL, *p = NULL;
  lt_block *bigb = NULL, *pb = NULL;
  CHECK(lt_alloc(lt_cpu(), 5 * MiB, LT_CAT_OTHER, &big, &bigb) == LT_OK); /* 20 MiB segment */
  lt_memory_stats before = cpu_stats();
  CHECK(lt_alloc(lt_cpu(), 3000, LT_CAT_OTHER, &p, &pb) == LT_OK); /* a 1 MiB small segment */
  CHECK_EQ_INT(cpu_stats().num_segment_fallbacks - before.num_segment_fallbacks, 1);
  CHECK(__asan_region_is_poisoned(p, 3000) == NULL);
  CHECK(poisoned((char *)p + 3000));
  CHECK(poisoned((char *)p + MiB - 1)); /* the free rest of the fallback segment */
  lt_free(pb);
  CHECK(poisoned(p));
  lt_free(bigb);
  lt_set_limit(lt_cpu(), 0);
  CHECK_EQ_INT(lt_empty_cache(lt_cpu()), 21 * MiB);
}

/* A device's memory is not poisoned, even where its backend keeps it in
 * host memory (emulators, simulated devices): the device's kernels are no
 * host code ASan could judge. */
static void *host_alloc(void *ctx, int index, size_t nbytes) {
  (void)ctx, (void)index;
  return malloc(nbytes);
}
static void host_free(void *ctx, int index, void *ptr, size_t nbytes) {
  (void)ctx, (void)index, (void)nbytes;
  free(ptr);
}

static void test_device_memory_untouched(void) {
  lt_raw_allocator raw = {.alloc = host_alloc, .free = host_free};
  lt_alloc_set_backend(LT_DEVICE_CUDA, &raw);
  const lt_device dev = {LT_DEVICE_CUDA, 0};
  void *p = NULL;
  lt_block *b = NULL;
  CHECK(lt_alloc(dev, 12, LT_CAT_OTHER, &p, &b) == LT_OK);
  CHECK(__asan_region_is_poisoned(p, 2 * MiB) == NULL);
  lt_free(b);
  CHECK(__asan_region_is_poisoned(p, 2 * MiB) == NULL);
  lt_empty_cache(dev);
  lt_alloc_set_backend(LT_DEVICE_CUDA, NULL);
}

/* ---- children: one bad (or good) write each ---- */

/* A 3-element float tensor and a copy of its header whose geometry the
 * case breaks on purpose, bypassing every view check; then a kernel
 * (fill_) writes through it. */
static int run_overrun(const char *which) {
  int64_t n = 3;
  lt_tensor *t = NULL;
  if (lt_full(&n, 1, 1.0, LT_FLOAT32, lt_cpu(), &t) != LT_OK) return 2;
  lt_tensor view = *t;
  if (strcmp(which, "inside") == 0) {
    /* the tensor's own 12 bytes: fine */
  } else if (strcmp(which, "tail") == 0) {
    view.shape[0] = 100; /* 400 bytes: into the 512-byte block's tail */
  } else if (strcmp(which, "free") == 0) {
    view.offset = 1000; /* 4000 bytes on: the segment's free rest */
  } else if (strcmp(which, "freed") == 0) {
    lt_free(t->storage->block); /* the bytes go back, the header stays: a use after free */
    t->storage->block = NULL;
  } else {
    return 2;
  }
  lt_status st = lt_fill_(&view, 7.0);
  printf("survived: %s\n", st == LT_OK ? "written" : lt_last_error());
  lt_tensor_release(t);
  return 0;
}

/* Runs this executable with --overrun which; returns its exit status (-1
 * when killed) and its output in err. */
static int child(const char *which, char *err, size_t errlen) {
  int fds[2];
  if (pipe(fds) != 0) return -2;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    execl("/proc/self/exe", "test_alloc_poison", "--overrun", which, (char *)NULL);
    _exit(3);
  }
  close(fds[1]);
  size_t got = 0;
  ssize_t r;
  while ((r = read(fds[0], err + got, errlen - 1 - got)) > 0 && got + (size_t)r < errlen - 1)
    got += (size_t)r;
  if (r > 0) got += (size_t)r;
  err[got] = '\0';
  char sink[4096];
  while (read(fds[0], sink, sizeof sink) > 0) {}
  close(fds[0]);
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -2;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void expect_reported(const char *which, const char *kind) {
  static char err[1 << 16];
  int rc = child(which, err, sizeof err);
  check_count++;
  if (rc == 0 || !strstr(err, "ERROR: AddressSanitizer") || !strstr(err, kind)) {
    check_failures++;
    fprintf(stderr, "test_alloc_poison: the %s write was not reported as %s (exit %d):\n%s\n",
            which, kind, rc, err);
  }
}

static void test_overruns_are_reported(void) {
  static char err[1 << 16];
  int rc = child("inside", err, sizeof err);
  CHECK_EQ_INT(rc, 0);
  CHECK(strstr(err, "survived: written") != NULL && strstr(err, "AddressSanitizer") == NULL);
  expect_reported("tail", "use-after-poison");
  expect_reported("free", "use-after-poison");
  expect_reported("freed", "use-after-poison");
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--overrun") == 0) return run_overrun(argv[2]);
  test_shadow();
  test_fallback_segments();
  test_device_memory_untouched();
  test_overruns_are_reported();
  return check_summary("test_alloc_poison");
}

#else

int main(void) {
  printf("test_alloc_poison: skipped: not built with AddressSanitizer, so the allocator "
         "poisons nothing (configure with -DLT_SANITIZE=ON to run it)\n");
  return 0;
}

#endif
