/* Device names: "cpu", "cuda:N". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lt/cuda.h"
#include "lt/device.h"

char *lt_device_name(lt_device d, char *buf) {
  if (d.type == LT_DEVICE_CPU)
    snprintf(buf, 16, "cpu");
  else
    snprintf(buf, 16, "cuda:%d", d.index);
  return buf;
}

bool lt_device_parse(const char *name, lt_device *out) {
  if (strcmp(name, "cpu") == 0) {
    *out = lt_cpu();
    return true;
  }
  if (strncmp(name, "cuda", 4) != 0) return false;
  const char *rest = name + 4;
  if (*rest == '\0') {
    out->type = LT_DEVICE_CUDA;
    out->index = (signed char)lt_cuda_current_device();
    return true;
  }
  if (*rest != ':' || rest[1] < '0' || rest[1] > '9') return false;
  char *end;
  long idx = strtol(rest + 1, &end, 10);
  if (*end != '\0' || idx < 0 || idx >= LT_MAX_DEVICES) return false;
  out->type = LT_DEVICE_CUDA;
  out->index = (signed char)idx;
  return true;
}
