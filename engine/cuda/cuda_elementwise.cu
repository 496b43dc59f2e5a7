// Elementwise kernels: binary (with broadcasting and a scalar operand),
// unary, clamp and where. One generic N-d strided kernel per compute type
// (float for float32/float16/bfloat16, double, int64 for integers and bool):
// each thread loads its operands with conversion, computes once and stores
// with the output's rounding, as the CPU kernels do. The op is a runtime
// switch inside the kernel; it is uniform across a launch, so it costs no
// divergence, and it keeps the number of instantiations small.
#include "cuda/cuda_convert.cuh"
#include "cuda/cuda_kernels.h"

// ---- the per-element math, matching engine/cpu/cpu_binary.c ----

template <typename C> __device__ inline C binary_float(int op, C x, C y) {
  switch (op) {
    case LT_OP_ADD: return x + y;
    case LT_OP_SUB: return x - y;
    case LT_OP_MUL: return x * y;
    case LT_OP_DIV: return x / y;
    case LT_OP_POW: return pow(x, y);
    case LT_OP_MAXIMUM: return (x != x || x > y) ? x : y; // NaN propagates
    case LT_OP_MINIMUM: return (x != x || x < y) ? x : y;
    case LT_OP_EQ: return (C)(x == y);
    case LT_OP_NE: return (C)(x != y);
    case LT_OP_LT: return (C)(x < y);
    case LT_OP_LE: return (C)(x <= y);
    case LT_OP_GT: return (C)(x > y);
    case LT_OP_GE: return (C)(x >= y);
    default: return 0;
  }
}

// Integer arithmetic wraps (through unsigned: signed overflow is undefined).
__device__ inline int64_t wrap_mul(int64_t x, int64_t y) {
  return (int64_t)((uint64_t)x * (uint64_t)y);
}

// PyTorch's integer pow: a negative exponent gives 1, +-1 or 0.
__device__ inline int64_t int_pow(int64_t base, int64_t exp) {
  if (exp < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exp & 1) ? -1 : 1;
    return 0;
  }
  int64_t result = 1;
  while (exp) {
    if (exp & 1) result = wrap_mul(result, base);
    base = wrap_mul(base, base);
    exp >>= 1;
  }
  return result;
}

__device__ inline int64_t binary_int(int op, int64_t x, int64_t y) {
  switch (op) {
    case LT_OP_ADD: return (int64_t)((uint64_t)x + (uint64_t)y);
    case LT_OP_SUB: return (int64_t)((uint64_t)x - (uint64_t)y);
    case LT_OP_MUL: return wrap_mul(x, y);
    case LT_OP_DIV: // never traps: x / 0 gives 0, INT64_MIN / -1 wraps
      if (y == 0) return 0;
      if (y == -1) return (int64_t)(0 - (uint64_t)x);
      return x / y;
    case LT_OP_POW: return int_pow(x, y);
    case LT_OP_MAXIMUM: return x > y ? x : y;
    case LT_OP_MINIMUM: return x < y ? x : y;
    case LT_OP_EQ: return x == y;
    case LT_OP_NE: return x != y;
    case LT_OP_LT: return x < y;
    case LT_OP_LE: return x <= y;
    case LT_OP_GT: return x > y;
    case LT_OP_GE: return x >= y;
    default: return 0;
  }
}

template <typename C> __device__ inline C binary_op(int op, C x, C y) { return binary_float(op, x, y); }
template <> __device__ inline int64_t binary_op<int64_t>(int op, int64_t x, int64_t y) {
  return binary_int(op, x, y);
}

// float and double differ only in which libm overload is picked.
template <typename C> __device__ inline C unary_float(int op, C x) {
  switch (op) {
    case LT_OP_NEG: return -x;
    case LT_OP_EXP: return exp(x);
    case LT_OP_LOG: return log(x);
    case LT_OP_SQRT: return sqrt(x);
    case LT_OP_RSQRT: return (C)1 / sqrt(x);
    case LT_OP_ABS: return fabs(x);
    case LT_OP_RELU: return x < 0 ? (C)0 : x; // NaN kept
    case LT_OP_SIGMOID: return (C)1 / ((C)1 + exp(-x));
    case LT_OP_TANH: return tanh(x);
    case LT_OP_SIN: return sin(x);
    case LT_OP_COS: return cos(x);
    case LT_OP_RECIPROCAL: return (C)1 / x;
    case LT_OP_SQUARE: return x * x;
    case LT_OP_SIGN: return (C)((x > 0) - (x < 0));
    case LT_OP_FLOOR: return floor(x);
    case LT_OP_CEIL: return ceil(x);
    case LT_OP_ROUND: return rint(x); // half to even, as nearbyint on the CPU
    case LT_OP_LOGICAL_NOT: return (C)(x == 0);
    default: return x;
  }
}

// Integers: ops/ promotes the float-only ops to float32 first; floor, ceil
// and round are the identity; negation wraps.
__device__ inline int64_t unary_int(int op, int64_t x) {
  switch (op) {
    case LT_OP_NEG: return (int64_t)(0 - (uint64_t)x);
    case LT_OP_ABS: return x < 0 ? (int64_t)(0 - (uint64_t)x) : x;
    case LT_OP_RELU: return x < 0 ? 0 : x;
    case LT_OP_SQUARE: return wrap_mul(x, x);
    case LT_OP_SIGN: return (x > 0) - (x < 0);
    case LT_OP_LOGICAL_NOT: return x == 0;
    default: return x;
  }
}

template <typename C> __device__ inline C unary_op(int op, C x) { return unary_float(op, x); }
template <> __device__ inline int64_t unary_op<int64_t>(int op, int64_t x) { return unary_int(op, x); }

// ---- kernels ----

#define GRID_STRIDE_LOOP(i, n)                                                        \
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);          \
       i += (int64_t)blockDim.x * gridDim.x)

// Operand 2 absent (has_b false): the scalar takes b's place, or a's when
// scalar_first.
template <typename C>
__global__ void binary_kernel(cuda_geom g, int op, bool has_b, bool scalar_first, C scalar) {
  GRID_STRIDE_LOOP(i, g.numel) {
    int64_t off[CUDA_MAX_OPS];
    cuda_geom_offsets(g, i, off);
    C x = cuda_load<C>(g.data[1] + off[1], g.dtype[1]);
    C y = has_b ? cuda_load<C>(g.data[2] + off[2], g.dtype[2]) : scalar;
    C r = scalar_first ? binary_op<C>(op, y, x) : binary_op<C>(op, x, y);
    cuda_store<C>(g.data[0] + off[0], g.dtype[0], r);
  }
}

template <typename C> __global__ void unary_kernel(cuda_geom g, int op) {
  GRID_STRIDE_LOOP(i, g.numel) {
    int64_t off[CUDA_MAX_OPS];
    cuda_geom_offsets(g, i, off);
    C x = cuda_load<C>(g.data[1] + off[1], g.dtype[1]);
    cuda_store<C>(g.data[0] + off[0], g.dtype[0], unary_op<C>(op, x));
  }
}

// NaN stays NaN (both comparisons are false); lo > hi gives hi, as PyTorch.
template <typename C>
__global__ void clamp_kernel(cuda_geom g, bool has_lo, C lo, bool has_hi, C hi) {
  GRID_STRIDE_LOOP(i, g.numel) {
    int64_t off[CUDA_MAX_OPS];
    cuda_geom_offsets(g, i, off);
    C x = cuda_load<C>(g.data[1] + off[1], g.dtype[1]);
    if (has_lo && x < lo) x = lo;
    if (has_hi && x > hi) x = hi;
    cuda_store<C>(g.data[0] + off[0], g.dtype[0], x);
  }
}

template <typename C> __global__ void where_kernel(cuda_geom g) {
  GRID_STRIDE_LOOP(i, g.numel) {
    int64_t off[CUDA_MAX_OPS];
    cuda_geom_offsets(g, i, off);
    const bool take_a = *(const uint8_t *)(g.data[1] + off[1]) != 0;
    C v = take_a ? cuda_load<C>(g.data[2] + off[2], g.dtype[2])
                 : cuda_load<C>(g.data[3] + off[3], g.dtype[3]);
    cuda_store<C>(g.data[0] + off[0], g.dtype[0], v);
  }
}

// ---- host entry points ----

enum compute_kind { KIND_F32, KIND_F64, KIND_I64 };

static compute_kind kind_of(lt_dtype compute) {
  switch (compute) {
    case LT_FLOAT64: return KIND_F64;
    case LT_FLOAT32:
    case LT_FLOAT16:
    case LT_BFLOAT16: return KIND_F32;
    default: return KIND_I64;
  }
}

lt_status cuda_binary(lt_binary_op op, lt_dtype compute, lt_tensor *out, const lt_tensor *a,
                      const lt_tensor *b, lt_scalar s, bool scalar_first) {
  const lt_tensor *ops[3] = {out, a, b};
  cuda_geom g;
  cuda_geom_init(&g, ops, b ? 3 : 2);
  if (g.numel == 0) return LT_OK;
  cuda_device_guard guard(out->storage->device);
  const unsigned blocks = cuda_blocks_for(g.numel);
  const bool sf = !b && scalar_first;
  switch (kind_of(compute)) {
    case KIND_F32: binary_kernel<float><<<blocks, CUDA_THREADS>>>(g, op, b != NULL, sf, (float)s.f); break;
    case KIND_F64: binary_kernel<double><<<blocks, CUDA_THREADS>>>(g, op, b != NULL, sf, s.f); break;
    case KIND_I64: binary_kernel<int64_t><<<blocks, CUDA_THREADS>>>(g, op, b != NULL, sf, s.i); break;
  }
  return cuda_check_launch("binary op", "binary_kernel");
}

lt_status cuda_unary(lt_unary_op op, lt_dtype compute, lt_tensor *out, const lt_tensor *a) {
  const lt_tensor *ops[2] = {out, a};
  cuda_geom g;
  cuda_geom_init(&g, ops, 2);
  if (g.numel == 0) return LT_OK;
  cuda_device_guard guard(out->storage->device);
  const unsigned blocks = cuda_blocks_for(g.numel);
  switch (kind_of(compute)) {
    case KIND_F32: unary_kernel<float><<<blocks, CUDA_THREADS>>>(g, op); break;
    case KIND_F64: unary_kernel<double><<<blocks, CUDA_THREADS>>>(g, op); break;
    case KIND_I64: unary_kernel<int64_t><<<blocks, CUDA_THREADS>>>(g, op); break;
  }
  return cuda_check_launch("unary op", "unary_kernel");
}

lt_status cuda_clamp(lt_dtype compute, lt_tensor *out, const lt_tensor *a, bool has_lo,
                     lt_scalar lo, bool has_hi, lt_scalar hi) {
  const lt_tensor *ops[2] = {out, a};
  cuda_geom g;
  cuda_geom_init(&g, ops, 2);
  if (g.numel == 0) return LT_OK;
  cuda_device_guard guard(out->storage->device);
  const unsigned blocks = cuda_blocks_for(g.numel);
  switch (kind_of(compute)) {
    case KIND_F32:
      clamp_kernel<float><<<blocks, CUDA_THREADS>>>(g, has_lo, (float)lo.f, has_hi, (float)hi.f);
      break;
    case KIND_F64: clamp_kernel<double><<<blocks, CUDA_THREADS>>>(g, has_lo, lo.f, has_hi, hi.f); break;
    case KIND_I64: clamp_kernel<int64_t><<<blocks, CUDA_THREADS>>>(g, has_lo, lo.i, has_hi, hi.i); break;
  }
  return cuda_check_launch("clamp", "clamp_kernel");
}

lt_status cuda_where(lt_tensor *out, const lt_tensor *cond, const lt_tensor *a,
                     const lt_tensor *b) {
  const lt_tensor *ops[4] = {out, cond, a, b};
  cuda_geom g;
  cuda_geom_init(&g, ops, 4);
  if (g.numel == 0) return LT_OK;
  cuda_device_guard guard(out->storage->device);
  const unsigned blocks = cuda_blocks_for(g.numel);
  switch (kind_of(out->dtype)) {
    case KIND_F32: where_kernel<float><<<blocks, CUDA_THREADS>>>(g); break;
    case KIND_F64: where_kernel<double><<<blocks, CUDA_THREADS>>>(g); break;
    case KIND_I64: where_kernel<int64_t><<<blocks, CUDA_THREADS>>>(g); break;
  }
  return cuda_check_launch("where", "where_kernel");
}
