/* Which nn kernel table serves a device: the CPU's is built in, others are
 * registered by their backend when it starts. */
#include "lt/alloc.h"
#include "ops/estimate_backend.h"
#include "core/nn_backend.h"

static const lt_nn_backend *registered[LT_NDEVICE_TYPES] = {&lt_cpu_nn_backend, NULL};

void lt_nn_backend_register(lt_device_type type, const lt_nn_backend *backend) {
  if ((unsigned)type < sizeof registered / sizeof registered[0]) registered[type] = backend;
}

const lt_nn_backend *lt_nn_backend_for(lt_device dev) {
  if ((unsigned)dev.type >= sizeof registered / sizeof registered[0]) return NULL;
  const lt_nn_backend *real = registered[(unsigned)dev.type];
  /* While estimating no kernel runs: results are allocated, not computed. */
  if (real && lt_estimating()) return lt_estimate_nn_backend((lt_device_type)dev.type, real);
  return real;
}
