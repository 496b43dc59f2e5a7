/* The CUDA math switches (lt/cuda.h), kept in the engine so that they exist
 * and can be set in every build, with or without the CUDA backend. Plain
 * flags: set from the Lua thread, read when a kernel is chosen. */
#include "lt/cuda.h"

static bool matmul_tf32 = false, cudnn_tf32 = false;

void lt_cuda_set_matmul_tf32(bool on) { matmul_tf32 = on; }
bool lt_cuda_matmul_tf32(void) { return matmul_tf32; }
void lt_cuda_set_cudnn_tf32(bool on) { cudnn_tf32 = on; }
bool lt_cuda_cudnn_tf32(void) { return cudnn_tf32; }
