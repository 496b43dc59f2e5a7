// index_select on the device: a gather of slices. Every slice (the dims
// after dim) is a run of contiguous bytes, so the dtype does not matter: the
// kernel moves the widest unit (16 down to 1 bytes) that divides the slice
// and that both pointers are aligned to, one unit per thread. Without it a
// data loader over a dataset already on the device would copy the whole
// dataset to the host for every batch.
#include <stdint.h>

#include "cuda/cuda_kernels.h"

// out unit i = (o, k, c) over [outer, n, inner units]; in has size rows
// along the middle.
template <typename U>
__global__ void index_select_kernel(U *out, const U *in, const int64_t *rows, int64_t n,
                                    int64_t size, int64_t inner, int64_t total, int64_t base) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (int64_t)blockDim.x * gridDim.x) {
    const int64_t c = i % inner, s = i / inner;
    const int64_t k = s % n, o = s / n;
    out[i] = in[(o * size + (rows[k] - base)) * inner + c];
  }
}

template <typename U>
static void launch(void *out, const void *in, const int64_t *rows, int64_t n, int64_t size,
                   int64_t slice_bytes, int64_t outer, int64_t base, cudaStream_t stream) {
  const int64_t inner = slice_bytes / (int64_t)sizeof(U), total = outer * n * inner;
  index_select_kernel<U><<<cuda_blocks_for(total), CUDA_THREADS, 0, stream>>>(
      (U *)out, (const U *)in, rows, n, size, inner, total, base);
}

lt_status cuda_index_select(lt_tensor *out, const lt_tensor *in, int dim, const int64_t *rows,
                            int64_t n, int64_t base) {
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < dim; d++) outer *= in->shape[d];
  for (int d = dim + 1; d < in->ndim; d++) inner *= in->shape[d];
  const int64_t slice_bytes = inner * (int64_t)lt_dtype_size(in->dtype);
  if (outer * n * slice_bytes == 0) return LT_OK;
  cuda_device_guard guard(out->storage->device);
  const cudaStream_t stream = cuda_stream();
  void *o = lt_data(out);
  const void *i = lt_data(in);
  // The widest unit dividing the slice and the alignment of both pointers.
  const uintptr_t align = (uintptr_t)o | (uintptr_t)i | (uintptr_t)slice_bytes;
  const int64_t size = in->shape[dim];
  if (align % 16 == 0)
    launch<uint4>(o, i, rows, n, size, slice_bytes, outer, base, stream);
  else if (align % 8 == 0)
    launch<uint2>(o, i, rows, n, size, slice_bytes, outer, base, stream);
  else if (align % 4 == 0)
    launch<uint32_t>(o, i, rows, n, size, slice_bytes, outer, base, stream);
  else if (align % 2 == 0)
    launch<uint16_t>(o, i, rows, n, size, slice_bytes, outer, base, stream);
  else
    launch<uint8_t>(o, i, rows, n, size, slice_bytes, outer, base, stream);
  return cuda_check_launch("index_select", "index_select_kernel");
}
