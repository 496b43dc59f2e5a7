/* Devices: the CPU and CUDA devices. */
#ifndef LT_DEVICE_H
#define LT_DEVICE_H

#include "lt/api.h"

#include <stdbool.h>

typedef enum lt_device_type { LT_DEVICE_CPU = 0, LT_DEVICE_CUDA = 1 } lt_device_type;
/* Device types: the size of every table indexed by lt_device_type. */
#define LT_NDEVICE_TYPES 2

typedef struct lt_device {
  signed char type;  /* lt_device_type */
  signed char index; /* 0 for the cpu */
} lt_device;

#define LT_MAX_DEVICES 16 /* slots per device type in per-device tables */

static inline lt_device lt_cpu(void) { lt_device d = {LT_DEVICE_CPU, 0}; return d; }
static inline bool lt_device_eq(lt_device a, lt_device b) {
  return a.type == b.type && a.index == b.index;
}
/* "cpu" or "cuda:0" into buf (at least 16 bytes); returns buf. */
LT_API char *lt_device_name(lt_device d, char *buf);
/* Parses "cpu", "cuda", "cuda:N"; "cuda" means the current CUDA device. */
LT_API bool lt_device_parse(const char *name, lt_device *out);

#endif
