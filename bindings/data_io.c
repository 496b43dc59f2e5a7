/* Data set files seen from Lua (engine/io: cifar.c, csv.c, image.c,
 * image_pool.c), as private functions of lt.core that lua/lt/data/ builds
 * the public API on:
 *   _cifar10_read({paths})                     -> images, labels
 *   _csv_read(path, delimiter, header, label, dtype)
 *                                               -> features, labels, classes, names, label_name
 *   _image_decode(path, channels, h, w, short) -> uint8 [H, W, C]
 *   _image_resize(t, h, w)                     -> t resized (uint8 [H, W, C] or float32 [C, H, W])
 *   _image_write(path, t, format, quality)     (uint8 [H, W, C] or [H, W])
 *   _list_dir(path)                            -> names, is_dir (sorted)
 *   _image_pool(threads, max_jobs)             -> pool: submit, take, wait_idle, clear, stats, close
 * Images decoded on the pool's threads are malloc'ed buffers; only this,
 * the Lua thread, turns them into tensors (lt's allocator is not shared
 * with other threads). */
#include <string.h>

#include "args.h"
#include "bindings.h"
#include "lt/alloc.h"
#include "lt/data_io.h"
#include "tensor_handle.h"

#define POOL_NAME "lt.data.ImagePool"

/* Tensors made inside lt.memory.estimate hold no bytes: nothing may be
 * written into them. */
static void check_not_estimating(lua_State *L, const char *op) {
  if (lt_estimating())
    ltb_error(L, "%s: cannot read data inside lt.memory.estimate (its tensors hold no data); "
                 "read it before the estimate", op);
}

static lt_tensor *check_cpu_tensor(lua_State *L, int idx, const char *op) {
  lt_tensor *t = ltb_check_tensor(L, idx, op);
  if (t->storage->device.type != LT_DEVICE_CPU)
    ltb_error(L, "%s: expected a CPU tensor (call :cpu() first)", op);
  return t;
}

/* ---- CIFAR-10 ---- */

static int cifar10_read_fn(lua_State *L) {
  const char *op = "cifar10";
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Integer n = luaL_len(L, 1);
  if (n < 1 || n > 1024) return ltb_error(L, "%s: expected 1 to 1024 file names, got %I", op, n);
  const char **paths = lua_newuserdatauv(L, sizeof *paths * (size_t)n, 0);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, 1, i);
    paths[i - 1] = ltb_check_path(L, -1, op);
    lua_pop(L, 1); /* the table keeps the string alive */
  }
  ltb_handle *hi = ltb_new_handle(L);
  ltb_handle *hl = ltb_new_handle(L);
  lt_tensor *images = NULL, *labels = NULL;
  lt_status st = lt_cifar10_read(paths, (int)n, &images, &labels);
  if (st != LT_OK) return ltb_raise(L, st);
  /* Both handles exist already, so finishing one cannot leak the other. */
  ltb_finish(L, hi, LT_OK, images);
  ltb_finish(L, hl, LT_OK, labels);
  return 2;
}

/* ---- CSV ---- */

static void push_string_list(lua_State *L, char **list, int64_t n) {
  lua_createtable(L, (int)n, 0);
  for (int64_t i = 0; i < n; i++) {
    lua_pushstring(L, list[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
}

static int csv_gc(lua_State *L) {
  lt_csv_free(lua_touserdata(L, 1));
  return 0;
}

static int csv_read_fn(lua_State *L) {
  const char *op = "csv";
  const char *path = ltb_check_path(L, 1, op);
  size_t dlen;
  const char *delim = luaL_checklstring(L, 2, &dlen);
  if (dlen != 1) return ltb_error(L, "%s: delimiter must be one character, got '%s'", op, delim);
  if (delim[0] == '"' || delim[0] == '\n' || delim[0] == '\r')
    return ltb_error(L, "%s: the delimiter cannot be a quote or a line break", op);
  lt_csv_options opts = {delim[0], lua_toboolean(L, 3), NULL, -1};
  if (lua_type(L, 4) == LUA_TSTRING) {
    opts.label_name = lua_tostring(L, 4);
  } else if (!lua_isnoneornil(L, 4)) {
    opts.label_index = (int64_t)ltb_check_integer(L, 4, op, "label") - 1;
  }
  lt_dtype dt = ltb_check_dtype(L, 5, op);
  check_not_estimating(L, op);
  /* The parsed table lives in a userdata with a __gc until its arrays are
   * tensors, so that a Lua error on the way frees it. */
  lua_settop(L, 5);
  lt_csv *csv = lua_newuserdatauv(L, sizeof *csv, 0);
  memset(csv, 0, sizeof *csv);
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, csv_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lt_status st = lt_csv_read(path, &opts, csv);
  if (st != LT_OK) return ltb_raise(L, st);

  int64_t shape[2] = {csv->rows, csv->features};
  ltb_handle *hf = ltb_new_handle(L);
  lt_tensor *features = NULL;
  if (csv->rows * csv->features == 0) st = lt_zeros(shape, 2, dt, lt_cpu(), &features);
  else st = lt_from_buffer(csv->values, LT_FLOAT64, shape, 2, dt, lt_cpu(), &features);
  ltb_finish(L, hf, st, features);
  if (csv->has_label) {
    int64_t n = csv->rows;
    ltb_handle *hl = ltb_new_handle(L);
    lt_tensor *labels = NULL;
    if (csv->label_is_text || csv->label_integral) {
      if (n == 0) {
        st = lt_zeros(&n, 1, LT_INT64, lt_cpu(), &labels);
      } else {
        st = lt_empty(&n, 1, LT_INT64, lt_cpu(), &labels);
        if (st == LT_OK) {
          int64_t *p = lt_data(labels);
          /* class ids are 0-based in the engine, 1-based in lt */
          int64_t shift = csv->label_is_text ? 1 : 0;
          for (int64_t r = 0; r < n; r++) p[r] = (int64_t)csv->label_values[r] + shift;
        }
      }
    } else if (n == 0) {
      st = lt_zeros(&n, 1, dt, lt_cpu(), &labels);
    } else {
      st = lt_from_buffer(csv->label_values, LT_FLOAT64, &n, 1, dt, lt_cpu(), &labels);
    }
    ltb_finish(L, hl, st, labels);
  } else {
    lua_pushnil(L);
  }
  if (csv->label_is_text) push_string_list(L, csv->classes, csv->nclasses);
  else lua_pushnil(L);
  if (csv->names) push_string_list(L, csv->names, csv->features);
  else lua_pushnil(L);
  if (csv->label_column) lua_pushstring(L, csv->label_column);
  else lua_pushnil(L);
  lt_csv_free(csv);
  return 5;
}

/* ---- images ---- */

static lt_image_spec check_spec(lua_State *L, int first, const char *op) {
  lt_image_spec spec;
  spec.channels = (int)ltb_opt_integer(L, first, op, "channels", 3);
  spec.resize_height = (int)ltb_opt_integer(L, first + 1, op, "the height", 0);
  spec.resize_width = (int)ltb_opt_integer(L, first + 2, op, "the width", 0);
  spec.resize_short = (int)ltb_opt_integer(L, first + 3, op, "the size", 0);
  if (spec.channels != 0 && spec.channels != 1 && spec.channels != 3 && spec.channels != 4)
    ltb_error(L, "%s: channels must be 1 (gray), 3 (RGB) or 4 (RGBA), got %d", op, spec.channels);
  if (spec.resize_height < 0 || spec.resize_width < 0 || spec.resize_short < 0 ||
      (spec.resize_height > 0) != (spec.resize_width > 0))
    ltb_error(L, "%s: bad resize size", op);
  return spec;
}

/* Finishes the handle h with img as a uint8 [H, W, C] tensor; frees img. */
static int finish_image(lua_State *L, ltb_handle *h, lt_image *img) {
  int64_t shape[3] = {img->height, img->width, img->channels};
  lt_tensor *out = NULL;
  lt_status st = lt_empty(shape, 3, LT_UINT8, lt_cpu(), &out);
  if (st == LT_OK) memcpy(lt_data(out), img->data, (size_t)shape[0] * (size_t)shape[1] * (size_t)shape[2]);
  lt_image_free(img);
  return ltb_finish(L, h, st, out);
}

static int image_decode_fn(lua_State *L) {
  const char *op = "image";
  const char *path = ltb_check_path(L, 1, op);
  lt_image_spec spec = check_spec(L, 2, op);
  check_not_estimating(L, op);
  ltb_handle *h = ltb_new_handle(L);
  lt_image img;
  lt_status st = lt_image_decode_file(path, &spec, &img);
  if (st != LT_OK) return ltb_raise(L, st);
  return finish_image(L, h, &img);
}

/* _image_resize(t, h, w): t is a contiguous uint8 [H, W, C] image or a
 * contiguous float32 [C, H, W] one (lua/lt/data/transforms.lua makes it so). */
static int image_resize_fn(lua_State *L) {
  const char *op = "Resize";
  lt_tensor *t = check_cpu_tensor(L, 1, op);
  lua_Integer oh = ltb_check_integer(L, 2, op, "the height");
  lua_Integer ow = ltb_check_integer(L, 3, op, "the width");
  if (oh < 1 || ow < 1 || oh > (1 << 24) || ow > (1 << 24))
    return ltb_error(L, "%s: the size must be positive, got %I x %I", op, oh, ow);
  if (t->ndim != 3 || !lt_is_contiguous(t) || (t->dtype != LT_UINT8 && t->dtype != LT_FLOAT32))
    return ltb_error(L, "%s: expected a contiguous 3-dimensional uint8 or float32 tensor", op);
  check_not_estimating(L, op);
  ltb_handle *h = ltb_new_handle(L);
  lt_tensor *out = NULL;
  lt_status st;
  if (t->dtype == LT_UINT8) { /* [H, W, C] */
    int64_t H = t->shape[0], W = t->shape[1], C = t->shape[2];
    int64_t shape[3] = {oh, ow, C};
    st = lt_empty(shape, 3, LT_UINT8, lt_cpu(), &out);
    if (st == LT_OK && H > 0 && W > 0 && C > 0)
      lt_image_resize_u8(lt_data(t), (int)H, (int)W, (int)C, (lt_image_layout){W * C, C, 1},
                         lt_data(out), (int)oh, (int)ow, (lt_image_layout){ow * C, C, 1});
    else if (st == LT_OK && C > 0)
      memset(lt_data(out), 0, (size_t)(oh * ow * C));
  } else { /* [C, H, W] */
    int64_t C = t->shape[0], H = t->shape[1], W = t->shape[2];
    int64_t shape[3] = {C, oh, ow};
    st = lt_empty(shape, 3, LT_FLOAT32, lt_cpu(), &out);
    if (st == LT_OK && H > 0 && W > 0 && C > 0)
      lt_image_resize_f32(lt_data(t), (int)H, (int)W, (int)C, (lt_image_layout){W, 1, H * W},
                          lt_data(out), (int)oh, (int)ow, (lt_image_layout){ow, 1, oh * ow});
    else if (st == LT_OK && C > 0)
      memset(lt_data(out), 0, sizeof(float) * (size_t)(oh * ow * C));
  }
  return ltb_finish(L, h, st, out);
}

static int image_write_fn(lua_State *L) {
  const char *op = "_write_image";
  const char *path = ltb_check_path(L, 1, op);
  lt_tensor *t = check_cpu_tensor(L, 2, op);
  const char *format = luaL_optstring(L, 3, "png");
  int quality = (int)ltb_opt_integer(L, 4, op, "quality", 95);
  if (t->dtype != LT_UINT8 || (t->ndim != 2 && t->ndim != 3) || !lt_is_contiguous(t))
    return ltb_error(L, "%s: expected a contiguous uint8 [H, W, C] or [H, W] tensor", op);
  int64_t c = t->ndim == 3 ? t->shape[2] : 1;
  if (t->shape[0] > (1 << 16) || t->shape[1] > (1 << 16))
    return ltb_error(L, "%s: the image is too large to write", op);
  lt_status st = lt_image_write(path, format, lt_data(t), (int)t->shape[0], (int)t->shape[1], (int)c, quality);
  if (st != LT_OK) return ltb_raise(L, st);
  return 0;
}

/* ---- directories ---- */

static int list_dir_fn(lua_State *L) {
  const char *path = ltb_check_path(L, 1, "ImageFolder");
  char **names;
  bool *is_dir;
  int64_t n;
  lt_status st = lt_dir_list(path, &names, &is_dir, &n);
  if (st != LT_OK) return ltb_raise(L, st);
  /* Lua may fail to allocate the tables: the lists must not leak then, so
   * the strings go in first (lua_checkstack cannot fail in a way that skips
   * the free: it returns 0, and the tables are pre-sized). */
  if (!lua_checkstack(L, 4)) {
    lt_dir_list_free(names, is_dir, n);
    return ltb_error(L, "ImageFolder: out of Lua stack");
  }
  lua_createtable(L, (int)n, 0);
  lua_createtable(L, (int)n, 0);
  for (int64_t i = 0; i < n; i++) {
    lua_pushstring(L, names[i]);
    lua_rawseti(L, -3, (lua_Integer)i + 1);
    lua_pushboolean(L, is_dir[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lt_dir_list_free(names, is_dir, n);
  return 2;
}

/* ---- the decode pool ---- */

typedef struct {
  lt_image_pool *pool; /* NULL once closed */
} pool_box;

static lt_image_pool *check_pool(lua_State *L) {
  pool_box *b = luaL_checkudata(L, 1, POOL_NAME);
  if (!b->pool) ltb_error(L, "ImageFolder: the decode pool is closed");
  return b->pool;
}

static int pool_new_fn(lua_State *L) {
  int threads = (int)ltb_check_integer(L, 1, "num_workers", "the thread count");
  int max_jobs = (int)ltb_opt_integer(L, 2, "num_workers", "max_jobs", 4096);
  pool_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->pool = NULL;
  luaL_setmetatable(L, POOL_NAME);
  lt_status st = lt_image_pool_new(threads, max_jobs, &b->pool);
  if (st != LT_OK) return ltb_raise(L, st);
  return 1;
}

/* pool:submit(key, path, channels, h, w, short) -> accepted */
static int pool_submit(lua_State *L) {
  lt_image_pool *p = check_pool(L);
  lua_Integer key = ltb_check_integer(L, 2, "prefetch", "the index");
  const char *path = ltb_check_path(L, 3, "prefetch");
  lt_image_spec spec = check_spec(L, 4, "prefetch");
  bool accepted = false;
  lt_status st = lt_image_pool_submit(p, (int64_t)key, path, &spec, &accepted);
  if (st != LT_OK) return ltb_raise(L, st);
  lua_pushboolean(L, accepted);
  return 1;
}

/* pool:take(key) -> uint8 [H, W, C], or nil when no job has that key */
static int pool_take(lua_State *L) {
  lt_image_pool *p = check_pool(L);
  lua_Integer key = ltb_check_integer(L, 2, "get", "the index");
  check_not_estimating(L, "ImageFolder");
  ltb_handle *h = ltb_new_handle(L);
  lt_image img;
  bool found = false;
  lt_status st = lt_image_pool_take(p, (int64_t)key, &img, &found);
  if (st != LT_OK) return ltb_raise(L, st);
  if (!found) {
    lua_pushnil(L);
    return 1;
  }
  return finish_image(L, h, &img);
}

static int pool_wait_idle(lua_State *L) {
  lt_image_pool_wait_idle(check_pool(L));
  return 0;
}

static int pool_clear(lua_State *L) {
  lt_image_pool_clear(check_pool(L));
  return 0;
}

static int pool_stats(lua_State *L) {
  lt_image_pool_stats s = lt_image_pool_get_stats(check_pool(L));
  lua_createtable(L, 0, 10);
  const struct {
    const char *name;
    int64_t value;
  } fields[] = {{"threads", s.threads}, {"submitted", s.submitted}, {"refused", s.refused},
                {"dropped", s.dropped}, {"decoded", s.decoded},     {"ready", s.ready},
                {"waited", s.waited},   {"stolen", s.stolen},       {"missed", s.missed},
                {"pending", s.pending}};
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
    lua_pushinteger(L, (lua_Integer)fields[i].value);
    lua_setfield(L, -2, fields[i].name);
  }
  return 1;
}

/* close (and __gc, __close): stops and joins the threads, frees what they
 * decoded and nobody took. Idempotent. */
static int pool_close(lua_State *L) {
  pool_box *b = luaL_checkudata(L, 1, POOL_NAME);
  lt_image_pool_free(b->pool);
  b->pool = NULL;
  return 0;
}

static int pool_closed(lua_State *L) {
  pool_box *b = luaL_checkudata(L, 1, POOL_NAME);
  lua_pushboolean(L, b->pool == NULL);
  return 1;
}

void ltb_open_data_io(lua_State *L, int core_idx) {
  core_idx = lua_absindex(L, core_idx);
  static const luaL_Reg pool_methods[] = {
      {"submit", pool_submit}, {"take", pool_take},   {"wait_idle", pool_wait_idle},
      {"clear", pool_clear},   {"stats", pool_stats}, {"close", pool_close},
      {"closed", pool_closed}, {NULL, NULL},
  };
  luaL_newmetatable(L, POOL_NAME);
  luaL_newlib(L, pool_methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, pool_close);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, pool_close);
  lua_setfield(L, -2, "__close");
  lua_pop(L, 1);
  static const luaL_Reg functions[] = {
      {"_cifar10_read", cifar10_read_fn}, {"_csv_read", csv_read_fn},
      {"_image_decode", image_decode_fn}, {"_image_resize", image_resize_fn},
      {"_image_write", image_write_fn},   {"_list_dir", list_dir_fn},
      {"_image_pool", pool_new_fn},       {NULL, NULL},
  };
  lua_pushvalue(L, core_idx);
  luaL_setfuncs(L, functions, 0);
  lua_pop(L, 1);
}
