/* LT_API marks lt's public C API (the declarations of engine/include/lt/):
 * everything else is compiled with hidden visibility, so the lt executable
 * exports these and nothing of its internals, as Lua marks its API with
 * LUA_API and ggml with GGML_API. */
#ifndef LT_API_H
#define LT_API_H

#if defined(__GNUC__)
#define LT_API __attribute__((visibility("default")))
#else
#define LT_API
#endif

#endif
