/* The CUDA slot as a table of hooks, after PyTorch's CUDAHooksInterface: lt/cuda.h's
 * functions call the hooks installed now. Without CUDA they are core/cuda_hooks.c's
 * (no devices; every stream or event call fails with LT_ERR_DEVICE); a build with the
 * CUDA backend starts with the runtime's (engine/cuda/cuda_device.cu); a test host
 * installs its own at start-up (the simulated device, tests/simdev/sim_cuda.c; the
 * emulator's runtime). The contracts are lt/cuda.h's. */
#ifndef LT_CORE_CUDA_HOOKS_H
#define LT_CORE_CUDA_HOOKS_H

#include "lt/cuda.h"

typedef struct lt_cuda_hooks {
  const char *name; /* "none", "cuda", "simulated" */
  bool compiled;
  int (*device_count)(void);
  int (*current_device)(void);
  lt_status (*set_device)(int index);
  lt_status (*synchronize)(void);
  const char *(*last_alloc_error)(void);
  lt_status (*stream_new)(int device, lt_cuda_stream *out);
  lt_cuda_stream (*current_stream)(int device);
  lt_status (*set_stream)(int device, lt_cuda_stream stream);
  lt_status (*stream_synchronize)(int device, lt_cuda_stream stream);
  lt_status (*stream_query)(int device, lt_cuda_stream stream, bool *done);
  lt_status (*stream_wait_stream)(int device, lt_cuda_stream waiter, lt_cuda_stream other);
  lt_status (*event_new)(int device, bool enable_timing, lt_cuda_event **out);
  void (*event_free)(lt_cuda_event *event);
  int (*event_device)(const lt_cuda_event *event);
  lt_status (*event_record)(lt_cuda_event *event, lt_cuda_stream stream);
  lt_status (*event_synchronize)(lt_cuda_event *event);
  lt_status (*event_query)(lt_cuda_event *event, bool *done);
  lt_status (*event_elapsed_ms)(lt_cuda_event *start, lt_cuda_event *end, double *ms);
  lt_status (*stream_wait_event)(int device, lt_cuda_stream stream, lt_cuda_event *event);
} lt_cuda_hooks;

/* Installs hooks (every entry set; the table must outlive lt), before the first CUDA call. */
void lt_cuda_set_hooks(const lt_cuda_hooks *hooks);

/* The CUDA runtime's hooks (engine/cuda/cuda_device.cu; only in a program
 * that has the CUDA sources). */
const lt_cuda_hooks *lt_cuda_runtime_hooks(void);

#endif
