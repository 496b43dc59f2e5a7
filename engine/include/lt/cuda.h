/* The CUDA device slot. Built from the .cu files of engine/cuda when the toolkit is found,
 * otherwise from engine/cuda/no_cuda.c; either way lt runs without a GPU. */
#ifndef LT_CUDA_H
#define LT_CUDA_H

#include <stdbool.h>

#include "lt/error.h"

bool lt_cuda_compiled(void);     /* was lt built with the CUDA backend */
int lt_cuda_device_count(void);  /* 0 with no driver or no device */
bool lt_cuda_is_available(void); /* compiled and at least one device */
int lt_cuda_current_device(void);
lt_status lt_cuda_set_device(int index);
lt_status lt_cuda_synchronize(void);

#endif
