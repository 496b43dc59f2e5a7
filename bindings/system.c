/* Small facts about the process that recipes and benchmarks need and Lua does
 * not give: a monotonic wall clock (os.clock is CPU time, which counts every
 * thread), the peak resident set size, and whether stdout is a terminal. */
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>

#include "args.h"
#include "bindings.h"

/* lt.clock(): seconds on a monotonic clock, as a float. */
static int l_clock(lua_State *L) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec * 1e-9);
  return 1;
}

/* lt.peak_rss(): the process's peak resident memory in bytes. */
static int l_peak_rss(lua_State *L) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return ltb_error(L, "peak_rss: getrusage failed");
  lua_pushinteger(L, (lua_Integer)ru.ru_maxrss * 1024); /* Linux reports KiB */
  return 1;
}

/* lt.stdout_is_tty(): whether progress bars may redraw in place. */
static int l_stdout_is_tty(lua_State *L) {
  lua_pushboolean(L, isatty(fileno(stdout)));
  return 1;
}

void ltb_open_system(lua_State *L, int core_idx) {
  static const luaL_Reg functions[] = {
      {"clock", l_clock}, {"peak_rss", l_peak_rss}, {"stdout_is_tty", l_stdout_is_tty}, {NULL, NULL}};
  lua_pushvalue(L, core_idx);
  luaL_setfuncs(L, functions, 0);
  lua_pop(L, 1);
}
