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

/* TensorFloat-32 tensor-core math for float32 GEMMs (matmul, linear) and for
 * cuDNN convolutions, as torch.backends.cuda.matmul.allow_tf32 and
 * torch.backends.cudnn.allow_tf32. Both are off by default in lt (an opt-in):
 * float32 results then agree with the CPU's to float32 rounding; on, they
 * keep about 10 mantissa bits of each product and run several times faster. */
void lt_cuda_set_matmul_tf32(bool on);
bool lt_cuda_matmul_tf32(void);
void lt_cuda_set_cudnn_tf32(bool on);
bool lt_cuda_cudnn_tf32(void);

/* The CUDA slot starts (raw allocator and kernel table installed) the first
 * time lt_cuda_device_count finds a device, which every path to a CUDA tensor
 * goes through (device parsing, availability checks). */

/* Why the last cudaMalloc/cudaFree/cudaMemGetInfo of the raw allocator failed
 * ("cuda: cudaMalloc(2097152 bytes): out of memory"), or NULL if none did: the
 * raw allocator can only answer NULL, and an out-of-memory error then says
 * only how many bytes were asked for. */
const char *lt_cuda_last_alloc_error(void);

#endif
