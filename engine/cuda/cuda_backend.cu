// The CUDA backend table, registered with the nn and optimizer tables when the CUDA slot starts (the first
// time lt_cuda_device_count finds a device; see cuda_device.cu). The kernels
// live in cuda_elementwise.cu, cuda_copy.cu, cuda_reduce.cu, cuda_matmul.cu,
// cuda_index_select.cu, cuda_sort.cu and cuda_scatter.cu, with the same
// signatures as the CPU's.
#include "cuda/cuda_kernels.h"

lt_status cuda_not_implemented(const char *op) {
  return lt_error(LT_ERR_DEVICE, "cuda: %s is not implemented on CUDA yet", op);
}

extern const lt_backend cuda_backend = {
    /* name */ "cuda",
    /* binary */ cuda_binary,
    /* unary */ cuda_unary,
    /* clamp */ cuda_clamp,
    /* where */ cuda_where,
    /* copy */ cuda_copy,
    /* copy_non_blocking */ cuda_copy_non_blocking,
    /* fill */ cuda_fill,
    /* read_element */ cuda_read_element,
    /* reduce */ cuda_reduce,
    /* reduce_index */ cuda_reduce_index,
    /* matmul */ cuda_matmul,
    /* index_select */ cuda_index_select,
    /* sort */ cuda_sort,
    /* gather */ cuda_gather,
    /* scatter */ cuda_scatter,
};
