/* Status codes and the thread-local error message of the lt engine.
 * Every engine call that can fail returns an lt_status; on failure it has set a
 * message that names the op and the offending values (lt_last_error). */
#ifndef LT_ERROR_H
#define LT_ERROR_H

#include <stdint.h>

#include "lt/api.h"

typedef enum lt_status {
  LT_OK = 0,
  LT_ERR_ARG,      /* a bad argument: wrong count, wrong kind, bad option */
  LT_ERR_SHAPE,    /* shapes that do not fit the op */
  LT_ERR_DTYPE,    /* a dtype the op does not take */
  LT_ERR_DEVICE,   /* tensors on different devices, or a device that is absent */
  LT_ERR_INDEX,    /* an index or dimension out of range */
  LT_ERR_OOM,      /* the allocator could not satisfy a request */
  LT_ERR_FREED,    /* use of a released tensor */
  LT_ERR_IO,       /* a file could not be read or written, or is malformed */
  LT_ERR_AUTOGRAD, /* backward through a modified or released graph */
  LT_ERR_INTERNAL  /* a broken invariant: a bug in lt */
} lt_status;

/* Sets the message (printf format) and returns code, so callers write
 *   return lt_error(LT_ERR_SHAPE, "add: shapes [2, 3] and [4] ...");  */
LT_API lt_status lt_error(lt_status code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* The message of the last failure on this thread ("" if none). */
LT_API const char *lt_last_error(void);

/* Writes "[2, 3, 4]" for a shape into buf (always NUL-terminated); returns buf.
 * Error messages use it so that every op prints shapes the same way. */
LT_API char *lt_format_shape(char *buf, int buflen, const int64_t *shape, int ndim);

/* Messages show dimensions and positions as lt's users write them: 1-based
 * (the engine is 0-based inside; its only users are Lua scripts). */
#define LT_USER_INDEX(i) ((long long)(i) + 1)

#define LT_TRY(expr)                                                          \
  do {                                                                        \
    lt_status lt_try_status_ = (expr);                                        \
    if (lt_try_status_ != LT_OK) return lt_try_status_;                       \
  } while (0)

#endif
