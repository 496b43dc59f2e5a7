/* cuDNN plumbing shared by cuda_nn_conv2d.cu and cuda_nn_batch_norm.cu: one
 * handle per device, error text, descriptors that destroy themselves, the
 * dtype mapping, the scaling-factor constants and the convolution algorithm
 * cache. Compiled by nvcc only (C++).
 *
 * lt uses cuDNN's legacy (v7-style) API: descriptors plus one call per
 * operation. cuDNN 9 keeps it (marked deprecated, which warns only when
 * CUDNN_WARN_DEPRECATED is defined). */
#ifndef LT_CUDA_CUDNN_H
#define LT_CUDA_CUDNN_H

#include <cudnn.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda/cuda_internal.h"

/* Both are C functions: lt_cuda_cudnn_tf32 lives in core/cuda_flags.c and is
 * declared by lt/cuda.h (included through cuda_internal.h); the workspace
 * limit is defined in cuda_cudnn.cu with C linkage so that it can move to
 * lt/cuda.h unchanged. */
extern "C" {
/* The most bytes of workspace a convolution algorithm may ask for when it is
 * chosen: env LT_CUDNN_WORKSPACE_LIMIT (bytes, read once), default 1 GiB. */
size_t lt_cuda_cudnn_workspace_limit(void);
}

/* Whether s says "not supported". cuDNN 9 reports that as a family of codes
 * (CUDNN_STATUS_NOT_SUPPORTED = 3000 and the sub-codes 3001.., e.g.
 * CUDNN_STATUS_NOT_SUPPORTED_SHAPE), so comparing with the base code alone
 * misses most of them; CUDNN_STATUS_CATEGORY folds a sub-code to its family. */
static inline bool cuda_cudnn_not_supported(cudnnStatus_t s) {
#ifdef CUDNN_STATUS_CATEGORY
  return CUDNN_STATUS_CATEGORY(s) == CUDNN_STATUS_NOT_SUPPORTED;
#else
  return s == CUDNN_STATUS_NOT_SUPPORTED;
#endif
}

/* "cuda: <op>: <call>: <cudnnGetErrorString>", as LT_ERR_DEVICE. */
lt_status cuda_cudnn_fail(const char *op, const char *call, cudnnStatus_t s);

/* CUDNN_TRY(op, cudnnFoo, (args...)): calls cudnnFoo(args...) and returns the
 * error naming cudnnFoo (not its arguments) when it does not succeed. */
#define CUDNN_TRY(op, fn, args)                                          \
  do {                                                                   \
    cudnnStatus_t cudnn_try_s_ = fn args;                                \
    if (cudnn_try_s_ != CUDNN_STATUS_SUCCESS)                            \
      return cuda_cudnn_fail(op, #fn, cudnn_try_s_);                     \
  } while (0)

/* The handle of dev, created on first use, bound to the current stream
 * (cuda_stream()) at every call: get it once per op, after the op's device
 * guard, and use it for that op only. Call with dev current
 * (cuda_device_guard): a handle belongs to the device that was current when
 * it was made. */
lt_status cuda_cudnn_handle(const char *op, lt_device dev, cudnnHandle_t *out);

/* float32, float64, float16, bfloat16 -> the cuDNN data type; false for the
 * others. */
bool cuda_cudnn_dtype(lt_dtype dt, cudnnDataType_t *out);

/* Scaling factors (alpha, beta) live in host memory and are double for
 * double data, float for every other data type (cuDNN's rule). */
const void *cuda_cudnn_one(bool f64);
const void *cuda_cudnn_zero(bool f64);

/* ---- descriptors: created by set*, destroyed with the scope ---- */

/* Whether v fits cuDNN's int arguments. */
static inline bool cuda_cudnn_fits_int(int64_t v) { return v >= 0 && v <= 0x7fffffffLL; }

struct cudnn_tensor_desc {
  cudnnTensorDescriptor_t d;
  cudnn_tensor_desc() : d(NULL) {}
  ~cudnn_tensor_desc() {
    if (d) (void)cudnnDestroyTensorDescriptor(d);
  }
  lt_status create(const char *op) {
    if (!d) CUDNN_TRY(op, cudnnCreateTensorDescriptor, (&d));
    return LT_OK;
  }
  /* A packed NCHW tensor [n, c, h, w]. */
  lt_status set4d(const char *op, cudnnDataType_t dt, int64_t n, int64_t c, int64_t h, int64_t w);
  cudnn_tensor_desc(const cudnn_tensor_desc &) = delete;
  cudnn_tensor_desc &operator=(const cudnn_tensor_desc &) = delete;
};

struct cudnn_filter_desc {
  cudnnFilterDescriptor_t d;
  cudnn_filter_desc() : d(NULL) {}
  ~cudnn_filter_desc() {
    if (d) (void)cudnnDestroyFilterDescriptor(d);
  }
  /* A packed filter [k (out channels), c (in channels per group), h, w]. */
  lt_status set4d(const char *op, cudnnDataType_t dt, int64_t k, int64_t c, int64_t h, int64_t w);
  cudnn_filter_desc(const cudnn_filter_desc &) = delete;
  cudnn_filter_desc &operator=(const cudnn_filter_desc &) = delete;
};

struct cudnn_conv_desc {
  cudnnConvolutionDescriptor_t d;
  cudnn_conv_desc() : d(NULL) {}
  ~cudnn_conv_desc() {
    if (d) (void)cudnnDestroyConvolutionDescriptor(d);
  }
  /* Cross-correlation (what conv2d means in PyTorch) with the given padding,
   * stride, dilation (height, width) and group count, computing in ct. */
  lt_status set2d(const char *op, const int64_t pad[2], const int64_t stride[2],
                  const int64_t dilation[2], int64_t groups, cudnnDataType_t ct);
  cudnn_conv_desc(const cudnn_conv_desc &) = delete;
  cudnn_conv_desc &operator=(const cudnn_conv_desc &) = delete;
};

/* ---- convolution algorithm cache ---- */

enum cuda_conv_dir {
  CUDA_CONV_FORWARD = 0,
  CUDA_CONV_BACKWARD_DATA = 1,
  CUDA_CONV_BACKWARD_FILTER = 2
};

/* Everything the choice depends on. All fields are int64_t so that the
 * struct has no padding: keys are hashed and compared as bytes (memset the
 * key to 0 before filling it anyway). tf32 is part of the key because the
 * float32 math type (and so the choice) follows lt_cuda_cudnn_tf32(), which
 * may change between calls. */
struct cuda_conv_key {
  int64_t device, dir, dtype, tf32;
  int64_t x[4]; /* N (of the call), C, H, W */
  int64_t w[4]; /* O, C / groups, kh, kw */
  int64_t stride[2], padding[2], dilation[2], groups;
};

/* The algorithm to run, and the one that needs the least workspace, used
 * when allocating the first's workspace runs out of memory. algo holds a
 * cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t of the key's direction. */
struct cuda_conv_choice {
  int algo;
  size_t workspace;
  cudnnMathType_t math;
  int small_algo;
  size_t small_workspace;
  cudnnMathType_t small_math;
};

bool cuda_cudnn_algo_lookup(const cuda_conv_key *key, cuda_conv_choice *out);
/* Best effort: a key that cannot be stored (out of host memory) is simply
 * chosen again next time. */
void cuda_cudnn_algo_store(const cuda_conv_key *key, const cuda_conv_choice *choice);

#endif
