/* The thread-local error message behind lt_status. */
#include <stdarg.h>
#include <stdio.h>

#include "lt/error.h"

static _Thread_local char last_message[1024];

lt_status lt_error(lt_status code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_message, sizeof last_message, fmt, ap);
  va_end(ap);
  return code;
}

const char *lt_last_error(void) { return last_message; }

const char *lt_status_name(lt_status code) {
  switch (code) {
    case LT_OK: return "ok";
    case LT_ERR_ARG: return "bad argument";
    case LT_ERR_SHAPE: return "shape error";
    case LT_ERR_DTYPE: return "dtype error";
    case LT_ERR_DEVICE: return "device error";
    case LT_ERR_INDEX: return "index error";
    case LT_ERR_OOM: return "out of memory";
    case LT_ERR_FREED: return "freed tensor";
    case LT_ERR_IO: return "i/o error";
    case LT_ERR_AUTOGRAD: return "autograd error";
    case LT_ERR_INTERNAL: return "internal error";
  }
  return "unknown error";
}

char *lt_format_shape(char *buf, int buflen, const long long *shape, int ndim) {
  int n = snprintf(buf, (size_t)buflen, "[");
  for (int i = 0; i < ndim && n < buflen; i++)
    n += snprintf(buf + n, (size_t)(buflen - n), i ? ", %lld" : "%lld", shape[i]);
  if (n < buflen) snprintf(buf + n, (size_t)(buflen - n), "]");
  return buf;
}
