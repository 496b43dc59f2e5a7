/* The CUDA slot when lt is built without the toolkit: no devices. */
#include <stddef.h>

#include "lt/cuda.h"

bool lt_cuda_compiled(void) { return false; }
int lt_cuda_device_count(void) { return 0; }
bool lt_cuda_is_available(void) { return false; }
int lt_cuda_current_device(void) { return 0; }

lt_status lt_cuda_set_device(int index) {
  return lt_error(LT_ERR_DEVICE, "cuda.set_device: lt was built without CUDA (device %d)", index);
}

lt_status lt_cuda_synchronize(void) { return LT_OK; }

const char *lt_cuda_last_alloc_error(void) { return NULL; }
