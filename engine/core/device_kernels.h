/* What a device type brings to the engine: its kernel tables (elementwise,
 * reductions and indexing; nn layers; optimizer steps), registered together
 * once, when the device starts. The CPU's is built in; CUDA's is registered
 * by the CUDA slot the first time it finds a device (engine/cuda/cuda_device.cu),
 * the simulated device's by the simulated slot. ops/ reads one through
 * lt_backend_for, lt_nn_backend_for and lt_optim_backend_for
 * (ops/backend_select.c), which also put the estimate's tables in its place
 * while lt.memory.estimate runs. */
#ifndef LT_CORE_DEVICE_KERNELS_H
#define LT_CORE_DEVICE_KERNELS_H

#include "core/backend.h"
#include "core/nn_backend.h"
#include "core/optim_backend.h"

typedef struct lt_device_kernels {
  const lt_backend *ops;
  const lt_nn_backend *nn;
  const lt_optim_backend *optim;
} lt_device_kernels;

/* type's tables from now on (every one set); the table must outlive lt. */
void lt_device_kernels_register(lt_device_type type, const lt_device_kernels *kernels);

#endif
