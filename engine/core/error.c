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

char *lt_format_shape(char *buf, int buflen, const int64_t *shape, int ndim) {
  int n = snprintf(buf, (size_t)buflen, "[");
  for (int i = 0; i < ndim && n < buflen; i++)
    n += snprintf(buf + n, (size_t)(buflen - n), i ? ", %lld" : "%lld", (long long)shape[i]);
  if (n < buflen) snprintf(buf + n, (size_t)(buflen - n), "]");
  return buf;
}
