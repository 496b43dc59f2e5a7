/* The kernel tables that serve every device while an estimate runs
 * (ops/estimate_backend.c): results are allocated, nothing is computed.
 * real is the device type's own table (its flags and, for item, its
 * element reads carry over). */
#ifndef LT_OPS_ESTIMATE_BACKEND_H
#define LT_OPS_ESTIMATE_BACKEND_H

#include "core/backend.h"
#include "core/nn_backend.h"
#include "core/optim_backend.h"

const lt_backend *lt_estimate_backend(lt_device_type type, const lt_backend *real);
const lt_nn_backend *lt_estimate_nn_backend(lt_device_type type, const lt_nn_backend *real);
const lt_optim_backend *lt_estimate_optim_backend(void);

#endif
