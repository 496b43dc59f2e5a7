/* Which kernels serve a device: one table per device type (core/device_kernels.h).
 * The CPU's is built in, others are registered by their device when it starts. */
#include "core/device_kernels.h"
#include "lt/alloc.h"
#include "ops/estimate_backend.h"

static const lt_device_kernels cpu_kernels = {&lt_cpu_backend, &lt_cpu_nn_backend, &lt_cpu_optim_backend};
static const lt_device_kernels *registered[LT_NDEVICE_TYPES] = {[LT_DEVICE_CPU] = &cpu_kernels};

void lt_device_kernels_register(lt_device_type type, const lt_device_kernels *kernels) {
  if ((unsigned)type < LT_NDEVICE_TYPES) registered[type] = kernels;
}

static const lt_device_kernels *kernels_for(lt_device dev) {
  return (unsigned)dev.type < LT_NDEVICE_TYPES ? registered[(unsigned)dev.type] : NULL;
}

/* While estimating no kernel runs: results are allocated, not computed. */

const lt_backend *lt_backend_for(lt_device dev) {
  const lt_device_kernels *k = kernels_for(dev);
  if (!k) return NULL;
  return lt_estimating() ? lt_estimate_backend((lt_device_type)dev.type, k->ops) : k->ops;
}

const lt_nn_backend *lt_nn_backend_for(lt_device dev) {
  const lt_device_kernels *k = kernels_for(dev);
  if (!k) return NULL;
  return lt_estimating() ? lt_estimate_nn_backend((lt_device_type)dev.type, k->nn) : k->nn;
}

const lt_optim_backend *lt_optim_backend_for(lt_device dev) {
  const lt_device_kernels *k = kernels_for(dev);
  if (!k) return NULL;
  return lt_estimating() ? lt_estimate_optim_backend() : k->optim;
}
