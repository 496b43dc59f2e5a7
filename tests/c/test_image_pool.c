/* The image decode pool (engine/io/image_pool.c) from C: every job's result
 * reaches its taker whatever the order of takes, a failed decode's message
 * reaches the taker with the file's name, a full pool drops finished jobs or
 * refuses, clear and free with jobs queued or running leak nothing (the suite
 * runs under ASan too), and the counters add up. Also the bilinear resize
 * against F.interpolate's numbers. Built with -fsanitize=thread by hand, it
 * is the pool's race check:
 *   gcc -std=c11 -D_POSIX_C_SOURCE=200809L -fsanitize=thread -g -Iengine/include \
 *     -I/usr/include/stb tests/c/test_image_pool.c engine/io/image_pool.c \
 *     engine/io/image.c engine/core/error.c -lstb -lm -o /tmp/tsan_pool */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "lt/data_io.h"

#define N 24
#define SIDE 9

static char dir[64];

static void path_of(char *buf, size_t n, int i) { snprintf(buf, n, "%s/%d.png", dir, i); }

/* Image i: every byte is (i * 5 + position) % 251. */
static void write_images(void) {
  static uint8_t px[SIDE * SIDE * 3];
  for (int i = 0; i < N; i++) {
    for (int k = 0; k < SIDE * SIDE * 3; k++) px[k] = (uint8_t)((i * 5 + k) % 251);
    char path[128];
    path_of(path, sizeof path, i);
    CHECK_EQ_INT(lt_image_write(path, "png", px, SIDE, SIDE, 3, 0), LT_OK);
  }
  char bad[128];
  snprintf(bad, sizeof bad, "%s/bad.png", dir);
  FILE *f = fopen(bad, "wb");
  fputs("\x89PNG\r\n\x1a\n but nothing else", f);
  fclose(f);
}

static int image_matches(const lt_image *img, int i) {
  if (!img->data || img->height != SIDE || img->width != SIDE || img->channels != 3) return 0;
  for (int k = 0; k < SIDE * SIDE * 3; k++)
    if (img->data[k] != (uint8_t)((i * 5 + k) % 251)) return 0;
  return 1;
}

static void test_takes_in_any_order(void) {
  lt_image_pool *pool;
  CHECK_EQ_INT(lt_image_pool_new(3, 1000, &pool), LT_OK);
  lt_image_spec spec = {3, 0, 0, 0};
  for (int round = 0; round < 2; round++) /* each key twice: takes get one each */
    for (int i = 0; i < N; i++) {
      char path[128];
      path_of(path, sizeof path, i);
      bool ok;
      CHECK_EQ_INT(lt_image_pool_submit(pool, i, path, &spec, &ok), LT_OK);
      CHECK(ok);
    }
  for (int round = 0; round < 2; round++)
    for (int i = N - 1; i >= 0; i--) {
      lt_image img;
      bool found;
      CHECK_EQ_INT(lt_image_pool_take(pool, i, &img, &found), LT_OK);
      CHECK(found);
      CHECK(image_matches(&img, i));
      lt_image_free(&img);
    }
  lt_image img;
  bool found = true;
  CHECK_EQ_INT(lt_image_pool_take(pool, 7, &img, &found), LT_OK);
  CHECK(!found);
  lt_image_pool_stats s = lt_image_pool_get_stats(pool);
  CHECK_EQ_INT(s.threads, 3);
  CHECK_EQ_INT(s.submitted, 2 * N);
  CHECK_EQ_INT(s.ready + s.waited + s.stolen, 2 * N);
  CHECK_EQ_INT(s.decoded + s.stolen, 2 * N);
  CHECK_EQ_INT(s.missed, 1);
  CHECK_EQ_INT(s.pending, 0);
  lt_image_pool_free(pool);
}

static void test_errors_reach_the_taker(void) {
  lt_image_pool *pool;
  CHECK_EQ_INT(lt_image_pool_new(2, 100, &pool), LT_OK);
  lt_image_spec spec = {3, 0, 0, 0};
  char bad[128];
  snprintf(bad, sizeof bad, "%s/bad.png", dir);
  bool ok;
  lt_image_pool_submit(pool, 1, bad, &spec, &ok);
  lt_image_pool_submit(pool, 2, "/nonexistent/x.png", &spec, &ok);
  lt_image_pool_wait_idle(pool);
  lt_image img;
  bool found;
  CHECK_EQ_INT(lt_image_pool_take(pool, 1, &img, &found), LT_ERR_IO);
  CHECK(found);
  CHECK(img.data == NULL);
  CHECK(strstr(lt_last_error(), bad) != NULL);
  CHECK(strstr(lt_last_error(), "is corrupt") != NULL);
  CHECK_EQ_INT(lt_image_pool_take(pool, 2, &img, &found), LT_ERR_IO);
  CHECK_EQ_STR(lt_last_error(), "image: cannot open /nonexistent/x.png: No such file or directory");
  lt_image_pool_free(pool);
}

static void test_full_pool_clear_and_free(void) {
  lt_image_pool *pool;
  CHECK_EQ_INT(lt_image_pool_new(1, 4, &pool), LT_OK);
  lt_image_spec spec = {3, 5, 4, 0};
  int accepted = 0;
  for (int i = 0; i < N; i++) {
    char path[128];
    path_of(path, sizeof path, i);
    bool ok;
    lt_image_pool_submit(pool, i, path, &spec, &ok);
    accepted += ok;
  }
  lt_image_pool_stats s = lt_image_pool_get_stats(pool);
  CHECK(s.pending <= 4);
  CHECK_EQ_INT(s.submitted, accepted);
  CHECK_EQ_INT(s.refused + s.submitted, N);
  lt_image_pool_wait_idle(pool);
  /* Finished jobs nobody took make room for new ones. */
  char path[128];
  path_of(path, sizeof path, 0);
  bool ok;
  lt_image_pool_submit(pool, 100, path, &spec, &ok);
  CHECK(ok);
  CHECK_EQ_INT(lt_image_pool_get_stats(pool).dropped, 1);
  lt_image img;
  bool found;
  CHECK_EQ_INT(lt_image_pool_take(pool, 100, &img, &found), LT_OK);
  CHECK(found && img.height == 5 && img.width == 4 && img.channels == 3);
  lt_image_free(&img);
  /* Clear and free with work queued and running: nothing leaks (ASan). */
  for (int i = 0; i < 4; i++) lt_image_pool_submit(pool, i, path, &spec, &ok);
  lt_image_pool_clear(pool);
  CHECK_EQ_INT(lt_image_pool_get_stats(pool).pending, 0);
  for (int i = 0; i < 4; i++) lt_image_pool_submit(pool, i, path, &spec, &ok);
  lt_image_pool_free(pool);
}

static void test_resize(void) {
  const uint8_t src[4] = {0, 10, 20, 30};
  uint8_t dst[16];
  lt_image_layout a = {2, 1, 1}, b = {4, 1, 1};
  lt_image_resize_u8(src, 2, 2, 1, a, dst, 4, 4, b);
  const uint8_t want[16] = {0, 3, 8, 10, 5, 8, 13, 15, 15, 18, 23, 25, 20, 23, 28, 30};
  CHECK(memcmp(dst, want, 16) == 0);
  const float ramp[4] = {0, 1, 2, 3};
  float half[2];
  lt_image_resize_f32(ramp, 1, 4, 1, (lt_image_layout){4, 1, 1}, half, 1, 2, (lt_image_layout){2, 1, 1});
  CHECK(half[0] == 0.5f && half[1] == 2.5f);
  lt_image_spec spec = {3, 0, 0, 10};
  int oh, ow;
  lt_image_spec_size(&spec, 20, 35, &oh, &ow);
  CHECK(oh == 10 && ow == 17);
  lt_image_spec_size(&spec, 35, 20, &oh, &ow);
  CHECK(oh == 17 && ow == 10);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/lt_pool_XXXXXX");
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  write_images();
  test_takes_in_any_order();
  test_errors_reach_the_taker();
  test_full_pool_clear_and_free();
  test_resize();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return check_summary("test_image_pool");
}
