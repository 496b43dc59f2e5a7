/* Which kernel table serves a device: the CPU's is built in, others are
 * registered by their backend when it starts. */
#include "core/backend.h"

static const lt_backend *registered[2] = {&lt_cpu_backend, NULL};

void lt_backend_register(lt_device_type type, const lt_backend *backend) {
  if ((unsigned)type < sizeof registered / sizeof registered[0]) registered[type] = backend;
}

const lt_backend *lt_backend_for(lt_device dev) {
  if ((unsigned)dev.type >= sizeof registered / sizeof registered[0]) return NULL;
  return registered[(unsigned)dev.type];
}
