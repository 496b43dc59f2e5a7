// Elementwise kernels: binary (with broadcasting and a scalar operand),
// unary, clamp and where. One generic N-d strided kernel per compute type
// (float for float32/float16/bfloat16, double, int64 for integers and bool):
// each thread loads its operands with conversion, computes once and stores
// with the output's rounding, as the CPU kernels do. The op is a runtime
// switch inside the kernel; it is uniform across a launch, so it costs no
// divergence, and it keeps the number of instantiations small.
//
// The common case, every operand contiguous (or a single broadcast element)
// with 16-byte-aligned data, takes a vector path instead: each thread moves
// 16 bytes per operand with one aligned load or store and no index
// arithmetic. It calls the same load, math and store functions per element
// as the strided path, with the storage dtype a template argument, so its
// results are bit-identical; only the memory access differs.
#include "cuda/cuda_convert.cuh"
#include "cuda/cuda_kernels.h"

// ---- the per-element math, matching engine/cpu/cpu_binary.c ----

// Python's % and // for floats, as PyTorch computes them (see cpu_binary.c).
template <typename C> __host__ __device__ inline C float_remainder(C x, C y) {
  C m = fmod(x, y);
  if (m != 0 && ((y < 0) != (m < 0))) m += y;
  return m;
}

template <typename C> __host__ __device__ inline C float_floor_divide(C x, C y) {
  if (y == 0) return x / y;
  const C m = fmod(x, y);
  C d = (x - m) / y;
  if (m != 0 && ((y < 0) != (m < 0))) d -= 1;
  if (d == 0) return copysign((C)0, x / y);
  C f = floor(d);
  if (d - f > (C)0.5) f += 1;
  return f;
}

template <typename C> __host__ __device__ inline bool binary_float(int op, C x, C y, C *r) {
  switch (op) {
    case LT_OP_ADD: *r = x + y; return true;
    case LT_OP_SUB: *r = x - y; return true;
    case LT_OP_MUL: *r = x * y; return true;
    case LT_OP_DIV: *r = x / y; return true;
    case LT_OP_POW: *r = pow(x, y); return true;
    case LT_OP_MAXIMUM: *r = (x != x || x > y) ? x : y; return true; // NaN propagates
    case LT_OP_MINIMUM: *r = (x != x || x < y) ? x : y; return true;
    case LT_OP_EQ: *r = (C)(x == y); return true;
    case LT_OP_NE: *r = (C)(x != y); return true;
    case LT_OP_LT: *r = (C)(x < y); return true;
    case LT_OP_LE: *r = (C)(x <= y); return true;
    case LT_OP_GT: *r = (C)(x > y); return true;
    case LT_OP_GE: *r = (C)(x >= y); return true;
    case LT_OP_REMAINDER: *r = float_remainder(x, y); return true;
    case LT_OP_FLOOR_DIVIDE: *r = float_floor_divide(x, y); return true;
    case LT_OP_RELU_GRAD: *r = y <= (C)0 ? (C)0 : x; return true; // a NaN y passes x, as PyTorch
    default: return false; // the host refuses the op first
  }
}

// Integer arithmetic wraps (through unsigned: signed overflow is undefined).
__host__ __device__ inline int64_t wrap_mul(int64_t x, int64_t y) {
  return (int64_t)((uint64_t)x * (uint64_t)y);
}

// PyTorch's integer pow: a negative exponent gives 1, +-1 or 0.
__host__ __device__ inline int64_t int_pow(int64_t base, int64_t exp) {
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

__host__ __device__ inline int64_t int_divide(int64_t x, int64_t y) {
  if (y == 0) return 0; // never traps: x / 0 gives 0, INT64_MIN / -1 wraps
  if (y == -1) return (int64_t)(0 - (uint64_t)x);
  return x / y;
}

// Python's % and //: a divisor of 0 gives 0 (not checked on the GPU), -1 never traps.
__host__ __device__ inline int64_t int_remainder(int64_t x, int64_t y) {
  if (y == 0 || y == -1) return 0;
  const int64_t m = x % y;
  return m != 0 && ((m < 0) != (y < 0)) ? m + y : m;
}

__host__ __device__ inline int64_t int_floor_divide(int64_t x, int64_t y) {
  if (y == 0) return 0;
  if (y == -1) return (int64_t)(0 - (uint64_t)x);
  const int64_t q = x / y;
  return x % y != 0 && ((x < 0) != (y < 0)) ? q - 1 : q;
}

__host__ __device__ inline bool binary_int(int op, int64_t x, int64_t y, int64_t *r) {
  switch (op) {
    case LT_OP_ADD: *r = (int64_t)((uint64_t)x + (uint64_t)y); return true;
    case LT_OP_SUB: *r = (int64_t)((uint64_t)x - (uint64_t)y); return true;
    case LT_OP_MUL: *r = wrap_mul(x, y); return true;
    case LT_OP_DIV: *r = int_divide(x, y); return true;
    case LT_OP_POW: *r = int_pow(x, y); return true;
    case LT_OP_MAXIMUM: *r = x > y ? x : y; return true;
    case LT_OP_MINIMUM: *r = x < y ? x : y; return true;
    case LT_OP_EQ: *r = x == y; return true;
    case LT_OP_NE: *r = x != y; return true;
    case LT_OP_LT: *r = x < y; return true;
    case LT_OP_LE: *r = x <= y; return true;
    case LT_OP_GT: *r = x > y; return true;
    case LT_OP_GE: *r = x >= y; return true;
    case LT_OP_REMAINDER: *r = int_remainder(x, y); return true;
    case LT_OP_FLOOR_DIVIDE: *r = int_floor_divide(x, y); return true;
    default: return false; // the host refuses the op first
  }
}

template <typename C> __device__ inline C binary_op(int op, C x, C y) {
  C r = 0;
  binary_float(op, x, y, &r);
  return r;
}
template <> __device__ inline int64_t binary_op<int64_t>(int op, int64_t x, int64_t y) {
  int64_t r = 0;
  binary_int(op, x, y, &r);
  return r;
}

// float and double differ only in which libm overload is picked.
template <typename C> __host__ __device__ inline bool unary_float(int op, C x, C *r) {
  switch (op) {
    case LT_OP_NEG: *r = -x; return true;
    case LT_OP_EXP: *r = exp(x); return true;
    case LT_OP_LOG: *r = log(x); return true;
    case LT_OP_SQRT: *r = sqrt(x); return true;
    case LT_OP_RSQRT: *r = (C)1 / sqrt(x); return true;
    case LT_OP_ABS: *r = fabs(x); return true;
    case LT_OP_RELU: *r = x < 0 ? (C)0 : x; return true; // NaN kept
    case LT_OP_SIGMOID: *r = (C)1 / ((C)1 + exp(-x)); return true;
    case LT_OP_TANH: *r = tanh(x); return true;
    case LT_OP_SIN: *r = sin(x); return true;
    case LT_OP_COS: *r = cos(x); return true;
    case LT_OP_RECIPROCAL: *r = (C)1 / x; return true;
    case LT_OP_SQUARE: *r = x * x; return true;
    case LT_OP_SIGN: *r = (C)((x > 0) - (x < 0)); return true;
    case LT_OP_FLOOR: *r = floor(x); return true;
    case LT_OP_CEIL: *r = ceil(x); return true;
    case LT_OP_ROUND: *r = rint(x); return true; // half to even, as nearbyint on the CPU
    case LT_OP_LOGICAL_NOT: *r = (C)(x == 0); return true;
    case LT_OP_ERF: *r = erf(x); return true;
    default: return false; // the host refuses the op first
  }
}

// Integers: ops/ promotes the float-only ops to float32 first; floor, ceil
// and round are the identity; negation wraps.
__host__ __device__ inline bool unary_int(int op, int64_t x, int64_t *r) {
  switch (op) {
    case LT_OP_NEG: *r = (int64_t)(0 - (uint64_t)x); return true;
    case LT_OP_ABS: *r = x < 0 ? (int64_t)(0 - (uint64_t)x) : x; return true;
    case LT_OP_RELU: *r = x < 0 ? 0 : x; return true;
    case LT_OP_SQUARE: *r = wrap_mul(x, x); return true;
    case LT_OP_SIGN: *r = (x > 0) - (x < 0); return true;
    case LT_OP_LOGICAL_NOT: *r = x == 0; return true;
    case LT_OP_FLOOR: case LT_OP_CEIL: case LT_OP_ROUND: *r = x; return true; // the identity
    default: return false; // the float-only ops: ops/ promotes them; the host refuses others
  }
}

template <typename C> __device__ inline C unary_op(int op, C x) {
  C r = 0;
  unary_float(op, x, &r);
  return r;
}
template <> __device__ inline int64_t unary_op<int64_t>(int op, int64_t x) {
  int64_t r = 0;
  unary_int(op, x, &r);
  return r;
}

// Whether the per-element math above has a case for op in this compute
// kind, asked on the host before a launch: the same switch, so an op added
// to lt/ops.h without its CUDA case is refused with an error, where a
// default would have copied the input.
static bool binary_has_math(int op, bool integer) {
  double d;
  int64_t i;
  return integer ? binary_int(op, 1, 1, &i) : binary_float<double>(op, 1.0, 1.0, &d);
}

static bool unary_has_math(int op, bool integer) {
  double d;
  int64_t i;
  return integer ? unary_int(op, 1, &i) : unary_float<double>(op, 1.0, &d);
}

// ---- per-element bodies, shared by the strided and the vector kernels so
// that both paths compute exactly the same thing ----

// Operand 2 absent: the scalar takes b's place, or a's when scalar_first.
template <typename C> __device__ inline C binary_apply(int op, bool scalar_first, C x, C y) {
  return scalar_first ? binary_op<C>(op, y, x) : binary_op<C>(op, x, y);
}

// NaN stays NaN (both comparisons are false); lo > hi gives hi, as PyTorch.
template <typename C>
__device__ inline C clamp_apply(C x, bool has_lo, C lo, bool has_hi, C hi) {
  if (has_lo && x < lo) x = lo;
  if (has_hi && x > hi) x = hi;
  return x;
}

// ---- strided kernels (any geometry) ----

#define GRID_STRIDE_LOOP(i, n)                                                        \
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);          \
       i += (int64_t)blockDim.x * gridDim.x)

template <typename C>
__global__ void binary_kernel(cuda_geom g, int op, bool has_b, bool scalar_first, C scalar) {
  GRID_STRIDE_LOOP(i, g.numel) {
    int64_t off[CUDA_MAX_OPS];
    cuda_geom_offsets(g, i, off);
    C x = cuda_load<C>(g.data[1] + off[1], g.dtype[1]);
    C y = has_b ? cuda_load<C>(g.data[2] + off[2], g.dtype[2]) : scalar;
    cuda_store<C>(g.data[0] + off[0], g.dtype[0], binary_apply<C>(op, scalar_first, x, y));
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

template <typename C>
__global__ void clamp_kernel(cuda_geom g, bool has_lo, C lo, bool has_hi, C hi) {
  GRID_STRIDE_LOOP(i, g.numel) {
    int64_t off[CUDA_MAX_OPS];
    cuda_geom_offsets(g, i, off);
    C x = cuda_load<C>(g.data[1] + off[1], g.dtype[1]);
    cuda_store<C>(g.data[0] + off[0], g.dtype[0], clamp_apply<C>(x, has_lo, lo, has_hi, hi));
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

// ---- vector kernels (one merged dim, contiguous or broadcast operands) ----
//
// The host (vec_path_ok) has checked that g has one dim of numel elements,
// that the output is contiguous, that every input is either contiguous
// (stride == its element size, the dtype the kernel was built for) or one
// broadcast element (stride 0), and that every contiguous pointer is 16-byte
// aligned. Element i of a contiguous operand is then at data + i * size, and
// vector v covers elements [v * V, v * V + V): a 16-byte-aligned chunk of at
// most 16 bytes, so one aligned vector access moves it.

// Storage and compute type of each dtype: the compute type is the one
// kind_of gives for it, i.e. the C of the strided kernel that would run it.
template <int D> struct dtype_traits;
template <> struct dtype_traits<LT_FLOAT32> { typedef float storage; typedef float compute; };
template <> struct dtype_traits<LT_FLOAT64> { typedef double storage; typedef double compute; };
template <> struct dtype_traits<LT_FLOAT16> { typedef uint16_t storage; typedef float compute; };
template <> struct dtype_traits<LT_BFLOAT16> { typedef uint16_t storage; typedef float compute; };
template <> struct dtype_traits<LT_INT64> { typedef int64_t storage; typedef int64_t compute; };
template <> struct dtype_traits<LT_INT32> { typedef int32_t storage; typedef int64_t compute; };
template <> struct dtype_traits<LT_UINT8> { typedef uint8_t storage; typedef int64_t compute; };
template <> struct dtype_traits<LT_BOOL> { typedef uint8_t storage; typedef int64_t compute; };

// V elements of S as one aligned unit: nvcc turns a copy of it into a single
// vector load or store (V * sizeof(S) is 1, 2, 4, 8 or 16 bytes).
template <typename S, int V> struct alignas(sizeof(S) * V) vec_t {
  S val[V];
};

// Elements per vector: 16 bytes of the widest operand, so that no access is
// wider than 16 bytes and every chunk's start is aligned to its own size.
template <int DI, int DO> struct vec_width {
  static constexpr int in_size = (int)sizeof(typename dtype_traits<DI>::storage);
  static constexpr int out_size = (int)sizeof(typename dtype_traits<DO>::storage);
  static constexpr int value = 16 / (in_size > out_size ? in_size : out_size);
};

// One input of a vector kernel: contiguous dtype D (V elements per load) or a
// broadcast element, loaded once with its own dtype exactly as the strided
// kernel loads it at offset 0. The dtype being a template argument, the
// switch in cuda_load folds away and the vector stays in registers.
template <typename C, int D, int V> struct vec_in {
  typedef typename dtype_traits<D>::storage S;
  const char *p;
  bool contig;
  C scalar;
  vec_t<S, V> v;
  __device__ vec_in(const cuda_geom &g, int k)
      : p(g.data[k]), contig(g.stride[k][0] != 0),
        scalar(g.stride[k][0] != 0 ? (C)0 : cuda_load<C>(g.data[k], g.dtype[k])) {}
  // A value that is not a tensor (binary's scalar).
  __device__ explicit vec_in(C value) : p(NULL), contig(false), scalar(value) {}
  __device__ void load(int64_t first) {
    if (contig) v = *reinterpret_cast<const vec_t<S, V> *>(p + first * (int64_t)sizeof(S));
  }
  __device__ C get(int j) const {
    return contig ? cuda_load<C>((const char *)&v.val[j], D) : scalar;
  }
  __device__ C get_one(int64_t i) const {
    return contig ? cuda_load<C>(p + i * (int64_t)sizeof(S), D) : scalar;
  }
};

// where's condition: raw bytes (stride 1), read as != 0 as the strided
// kernel reads them, or a broadcast byte.
template <int V> struct vec_cond {
  const uint8_t *p;
  bool contig;
  bool scalar;
  vec_t<uint8_t, V> v;
  __device__ explicit vec_cond(const cuda_geom &g)
      : p((const uint8_t *)g.data[1]), contig(g.stride[1][0] != 0),
        scalar(g.stride[1][0] != 0 ? false : *(const uint8_t *)g.data[1] != 0) {}
  __device__ void load(int64_t first) {
    if (contig) v = *reinterpret_cast<const vec_t<uint8_t, V> *>(p + first);
  }
  __device__ bool get(int j) const { return contig ? v.val[j] != 0 : scalar; }
  __device__ bool get_one(int64_t i) const { return contig ? p[i] != 0 : scalar; }
};

// The output: always contiguous dtype D, one vector store per chunk.
template <typename C, int D, int V> struct vec_out {
  typedef typename dtype_traits<D>::storage S;
  char *p;
  vec_t<S, V> v;
  __device__ explicit vec_out(const cuda_geom &g) : p(g.data[0]) {}
  __device__ void set(int j, C x) { cuda_store<C>((char *)&v.val[j], D, x); }
  __device__ void store(int64_t first) {
    *reinterpret_cast<vec_t<S, V> *>(p + first * (int64_t)sizeof(S)) = v;
  }
  __device__ void store_one(int64_t i, C x) { cuda_store<C>(p + i * (int64_t)sizeof(S), D, x); }
};

// Each kernel below makes two grid-stride loops: over the numel / V whole
// vectors (vector vi covers elements [vi * V, vi * V + V)), then over the
// numel % V elements after them, one element per thread. Written out in
// every kernel rather than through a macro, so that #pragma unroll applies:
// a fully unrolled element loop keeps the vectors in registers.
__device__ inline int64_t vec_thread() { return (int64_t)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ inline int64_t vec_step() { return (int64_t)blockDim.x * gridDim.x; }

// A bool output from non-bool inputs is a comparison: the host sends no
// other op to those instantiations (cuda_binary). Switching on the six
// comparisons calls the same binary_apply with op a constant, so each case
// folds to one comparison and the rest of the op table (pow, integer
// division), unrolled V times, stays out of those kernels.
template <typename C, bool COMPARE_ONLY>
__device__ inline C binary_vec_apply(int op, bool scalar_first, C x, C y) {
  if constexpr (!COMPARE_ONLY) {
    return binary_apply<C>(op, scalar_first, x, y);
  } else {
    switch (op) {
      case LT_OP_EQ: return binary_apply<C>(LT_OP_EQ, scalar_first, x, y);
      case LT_OP_NE: return binary_apply<C>(LT_OP_NE, scalar_first, x, y);
      case LT_OP_LT: return binary_apply<C>(LT_OP_LT, scalar_first, x, y);
      case LT_OP_LE: return binary_apply<C>(LT_OP_LE, scalar_first, x, y);
      case LT_OP_GT: return binary_apply<C>(LT_OP_GT, scalar_first, x, y);
      case LT_OP_GE: return binary_apply<C>(LT_OP_GE, scalar_first, x, y);
      default: return 0; // not reached: the host checks is_comparison
    }
  }
}

template <int DI, int DO>
__global__ void binary_vec_kernel(cuda_geom g, int op, bool has_b, bool scalar_first,
                                  typename dtype_traits<DI>::compute scalar) {
  typedef typename dtype_traits<DI>::compute C;
  constexpr int V = vec_width<DI, DO>::value;
  vec_in<C, DI, V> a(g, 1);
  vec_in<C, DI, V> b = has_b ? vec_in<C, DI, V>(g, 2) : vec_in<C, DI, V>(scalar);
  vec_out<C, DO, V> r(g);
  constexpr bool cmp = DO == LT_BOOL && DI != LT_BOOL;
  const int64_t n = g.numel, nvec = n / V;
  for (int64_t vi = vec_thread(); vi < nvec; vi += vec_step()) {
    const int64_t first = vi * V;
    a.load(first);
    b.load(first);
#pragma unroll
    for (int j = 0; j < V; j++)
      r.set(j, binary_vec_apply<C, cmp>(op, scalar_first, a.get(j), b.get(j)));
    r.store(first);
  }
  for (int64_t i = nvec * V + vec_thread(); i < n; i += vec_step())
    r.store_one(i, binary_vec_apply<C, cmp>(op, scalar_first, a.get_one(i), b.get_one(i)));
}

// A bool output from a non-bool input is logical_not, the only unary op
// whose result is bool (the host checks): with op then a constant, those
// instantiations hold only its code.
template <int DI, int DO> __global__ void unary_vec_kernel(cuda_geom g, int op_arg) {
  typedef typename dtype_traits<DI>::compute C;
  constexpr int V = vec_width<DI, DO>::value;
  const int op = DO == LT_BOOL && DI != LT_BOOL ? (int)LT_OP_LOGICAL_NOT : op_arg;
  vec_in<C, DI, V> a(g, 1);
  vec_out<C, DO, V> r(g);
  const int64_t n = g.numel, nvec = n / V;
  for (int64_t vi = vec_thread(); vi < nvec; vi += vec_step()) {
    const int64_t first = vi * V;
    a.load(first);
#pragma unroll
    for (int j = 0; j < V; j++) r.set(j, unary_op<C>(op, a.get(j)));
    r.store(first);
  }
  for (int64_t i = nvec * V + vec_thread(); i < n; i += vec_step())
    r.store_one(i, unary_op<C>(op, a.get_one(i)));
}

template <int D>
__global__ void clamp_vec_kernel(cuda_geom g, bool has_lo, typename dtype_traits<D>::compute lo,
                                 bool has_hi, typename dtype_traits<D>::compute hi) {
  typedef typename dtype_traits<D>::compute C;
  constexpr int V = vec_width<D, D>::value;
  vec_in<C, D, V> a(g, 1);
  vec_out<C, D, V> r(g);
  const int64_t n = g.numel, nvec = n / V;
  for (int64_t vi = vec_thread(); vi < nvec; vi += vec_step()) {
    const int64_t first = vi * V;
    a.load(first);
#pragma unroll
    for (int j = 0; j < V; j++) r.set(j, clamp_apply<C>(a.get(j), has_lo, lo, has_hi, hi));
    r.store(first);
  }
  for (int64_t i = nvec * V + vec_thread(); i < n; i += vec_step())
    r.store_one(i, clamp_apply<C>(a.get_one(i), has_lo, lo, has_hi, hi));
}

// Both value vectors are loaded (the strided kernel reads only the chosen
// element); the value stored is the chosen one, converted the same way.
template <int D> __global__ void where_vec_kernel(cuda_geom g) {
  typedef typename dtype_traits<D>::compute C;
  constexpr int V = vec_width<D, D>::value;
  vec_cond<V> cond(g);
  vec_in<C, D, V> a(g, 2), b(g, 3);
  vec_out<C, D, V> r(g);
  const int64_t n = g.numel, nvec = n / V;
  for (int64_t vi = vec_thread(); vi < nvec; vi += vec_step()) {
    const int64_t first = vi * V;
    cond.load(first);
    a.load(first);
    b.load(first);
#pragma unroll
    for (int j = 0; j < V; j++) r.set(j, cond.get(j) ? a.get(j) : b.get(j));
    r.store(first);
  }
  for (int64_t i = nvec * V + vec_thread(); i < n; i += vec_step())
    r.store_one(i, cond.get_one(i) ? a.get_one(i) : b.get_one(i));
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

// The vector path's precondition, on the host. Conservative: whatever it
// does not prove takes the strided path. want[k] is the dtype operand k must
// have when contiguous (the vector kernel reads it as that dtype), or -1 for
// where's condition, read as raw bytes with stride 1 whatever its dtype.
//  - one merged dim covering numel elements;
//  - the output contiguous (stride == element size), dtype want[0];
//  - each input contiguous with dtype want[k], or one broadcast element
//    (stride 0), loaded once per thread;
//  - every contiguous pointer 16-byte aligned, hence every V-element chunk
//    aligned to its own size (a power of two dividing 16);
//  - no input overlapping the output's bytes, except one that is exactly the
//    output (in place, element i at the same address): a thread reads its
//    whole chunk before writing it, so that is safe, while a shifted overlap
//    (racy on the strided path too) or a broadcast element inside the output
//    (loaded once here, per element there) could differ.
static bool vec_path_ok(const cuda_geom &g, const int *want) {
  if (g.ndim != 1 || g.numel < 1 || g.shape[0] != g.numel || g.nops < 2) return false;
  if (want[0] < 0 || g.dtype[0] != want[0]) return false;
  const int64_t n = g.numel;
  const int64_t out_size = (int64_t)lt_dtype_size((lt_dtype)want[0]);
  const uintptr_t out_lo = (uintptr_t)g.data[0];
  const uintptr_t out_hi = out_lo + (uintptr_t)(n * out_size);
  for (int k = 0; k < g.nops; k++) {
    if (g.data[k] == NULL) return false;
    const int64_t size = want[k] < 0 ? 1 : (int64_t)lt_dtype_size((lt_dtype)want[k]);
    const int64_t stride = g.stride[k][0];
    bool contig;
    if (stride == size && (want[k] < 0 || g.dtype[k] == want[k]))
      contig = true;
    else if (stride == 0 && k > 0)
      contig = false;
    else
      return false;
    if (contig && ((uintptr_t)g.data[k] & 15) != 0) return false;
    if (k == 0) continue;
    // A broadcast operand's bytes: its one element, in its own dtype.
    const int64_t bytes = contig ? n * size : (int64_t)lt_dtype_size((lt_dtype)g.dtype[k]);
    const uintptr_t lo = (uintptr_t)g.data[k];
    const uintptr_t hi = lo + (uintptr_t)bytes;
    const bool overlaps = lo < out_hi && out_lo < hi;
    if (overlaps && !(contig && lo == out_lo && size == out_size)) return false;
  }
  return true;
}

// The dtype the vector kernel is built for: that of the first contiguous
// input among ops [first, last] (a broadcast one is read with its own dtype),
// or of ops[first] when all are broadcast.
static int vec_input_dtype(const cuda_geom &g, int first, int last) {
  for (int k = first; k <= last && k < g.nops; k++)
    if (g.stride[k][0] != 0) return g.dtype[k];
  return g.dtype[first];
}

// Whether each entry point may take its vector path: vec_path_ok plus the
// dtype rules its vector kernel is built on. Separate from the launches so
// that the decision can be tested on the host.

// Contiguous inputs of one dtype *di whose kind is the compute kind (so the
// kernel's compute type is the strided kernel's); the output of that dtype,
// or bool for a comparison (binary_vec_apply relies on that).
static bool binary_vec_plan(const cuda_geom &g, lt_binary_op op, lt_dtype compute, int *di) {
  *di = vec_input_dtype(g, 1, 2);
  const int dout = g.dtype[0];
  const bool is_comparison = lt_binary_is_comparison(op);
  if (kind_of((lt_dtype)*di) != kind_of(compute)) return false;
  if (!(dout == *di || (dout == LT_BOOL && is_comparison))) return false;
  const int want[3] = {dout, *di, *di};
  return vec_path_ok(g, want);
}

// As binary's; a bool output from another dtype only for logical_not
// (unary_vec_kernel relies on that).
static bool unary_vec_plan(const cuda_geom &g, lt_unary_op op, lt_dtype compute) {
  const int di = g.dtype[1], dout = g.dtype[0];
  if (kind_of((lt_dtype)di) != kind_of(compute)) return false;
  if (!(dout == di || (dout == LT_BOOL && op == LT_OP_LOGICAL_NOT))) return false;
  const int want[2] = {dout, di};
  return vec_path_ok(g, want);
}

// Input and output of one dtype whose kind is the compute kind.
static bool clamp_vec_plan(const cuda_geom &g, lt_dtype compute) {
  const int d = g.dtype[0];
  if (kind_of((lt_dtype)d) != kind_of(compute)) return false;
  const int want[2] = {d, d};
  return vec_path_ok(g, want);
}

// Values of the output's dtype (which sets the compute kind, as on the
// strided path), the condition raw bytes.
static bool where_vec_plan(const cuda_geom &g) {
  const int d = g.dtype[0];
  const int want[4] = {d, -1, d, d};
  return vec_path_ok(g, want);
}

// Calls f(dtype_tag<D>()) for the runtime dtype d, so that a generic lambda
// can instantiate a vector kernel for it. False for an unknown dtype.
template <int D> struct dtype_tag {
  static constexpr int value = D;
};

template <typename F> static bool with_dtype(int d, F f) {
  switch (d) {
    case LT_FLOAT32: f(dtype_tag<LT_FLOAT32>()); return true;
    case LT_FLOAT64: f(dtype_tag<LT_FLOAT64>()); return true;
    case LT_FLOAT16: f(dtype_tag<LT_FLOAT16>()); return true;
    case LT_BFLOAT16: f(dtype_tag<LT_BFLOAT16>()); return true;
    case LT_INT64: f(dtype_tag<LT_INT64>()); return true;
    case LT_INT32: f(dtype_tag<LT_INT32>()); return true;
    case LT_UINT8: f(dtype_tag<LT_UINT8>()); return true;
    case LT_BOOL: f(dtype_tag<LT_BOOL>()); return true;
    default: return false;
  }
}

// A host scalar as compute type C, as the strided launches convert it.
template <typename C> static C scalar_as(lt_scalar s);
template <> float scalar_as<float>(lt_scalar s) { return (float)s.f; }
template <> double scalar_as<double>(lt_scalar s) { return s.f; }
template <> int64_t scalar_as<int64_t>(lt_scalar s) { return s.i; }

template <int DI, int DO> static unsigned vec_blocks(int64_t numel) {
  return cuda_blocks_for(numel / vec_width<DI, DO>::value);
}

lt_status cuda_binary(lt_binary_op op, lt_dtype compute, lt_tensor *out, const lt_tensor *a,
                      const lt_tensor *b, lt_scalar s, bool scalar_first) {
  if (!binary_has_math(op, kind_of(compute) == KIND_I64))
    return lt_error(LT_ERR_INTERNAL, "cuda: no %s kernel for binary op %s",
                    lt_dtype_name(compute), lt_binary_op_name(op));
  const lt_tensor *ops[3] = {out, a, b};
  cuda_geom g;
  cuda_geom_init(&g, ops, b ? 3 : 2);
  if (g.numel == 0) return LT_OK;
  cuda_device_guard guard(out->storage->device);
  const cudaStream_t stream = cuda_stream(); // once per op: one op, one stream
  const bool has_b = b != NULL;
  const bool sf = !b && scalar_first;

  int di;
  if (binary_vec_plan(g, op, compute, &di)) {
    const int dout = g.dtype[0];
    const bool launched = with_dtype(di, [&](auto tag) {
      constexpr int DI = decltype(tag)::value;
      typedef typename dtype_traits<DI>::compute C;
      if (dout == DI)
        binary_vec_kernel<DI, DI><<<vec_blocks<DI, DI>(g.numel), CUDA_THREADS, 0, stream>>>(
            g, op, has_b, sf, scalar_as<C>(s));
      else
        binary_vec_kernel<DI, LT_BOOL>
            <<<vec_blocks<DI, LT_BOOL>(g.numel), CUDA_THREADS, 0, stream>>>(
                g, op, has_b, sf, scalar_as<C>(s));
    });
    if (launched) return cuda_check_launch("binary op", "binary_vec_kernel");
  }

  const unsigned blocks = cuda_blocks_for(g.numel);
  switch (kind_of(compute)) {
    case KIND_F32:
      binary_kernel<float><<<blocks, CUDA_THREADS, 0, stream>>>(g, op, has_b, sf, (float)s.f);
      break;
    case KIND_F64:
      binary_kernel<double><<<blocks, CUDA_THREADS, 0, stream>>>(g, op, has_b, sf, s.f);
      break;
    case KIND_I64:
      binary_kernel<int64_t><<<blocks, CUDA_THREADS, 0, stream>>>(g, op, has_b, sf, s.i);
      break;
  }
  return cuda_check_launch("binary op", "binary_kernel");
}

lt_status cuda_unary(lt_unary_op op, lt_dtype compute, lt_tensor *out, const lt_tensor *a) {
  if (!unary_has_math(op, kind_of(compute) == KIND_I64))
    return lt_error(LT_ERR_INTERNAL, "cuda: no %s kernel for unary op %s", lt_dtype_name(compute),
                    lt_unary_op_name(op));
  const lt_tensor *ops[2] = {out, a};
  cuda_geom g;
  cuda_geom_init(&g, ops, 2);
  if (g.numel == 0) return LT_OK;
  cuda_device_guard guard(out->storage->device);
  const cudaStream_t stream = cuda_stream(); // once per op: one op, one stream

  if (unary_vec_plan(g, op, compute)) {
    const int di = g.dtype[1], dout = g.dtype[0];
    const bool launched = with_dtype(di, [&](auto tag) {
      constexpr int DI = decltype(tag)::value;
      if (dout == DI)
        unary_vec_kernel<DI, DI><<<vec_blocks<DI, DI>(g.numel), CUDA_THREADS, 0, stream>>>(
            g, op);
      else
        unary_vec_kernel<DI, LT_BOOL>
            <<<vec_blocks<DI, LT_BOOL>(g.numel), CUDA_THREADS, 0, stream>>>(g, op);
    });
    if (launched) return cuda_check_launch("unary op", "unary_vec_kernel");
  }

  const unsigned blocks = cuda_blocks_for(g.numel);
  switch (kind_of(compute)) {
    case KIND_F32: unary_kernel<float><<<blocks, CUDA_THREADS, 0, stream>>>(g, op); break;
    case KIND_F64: unary_kernel<double><<<blocks, CUDA_THREADS, 0, stream>>>(g, op); break;
    case KIND_I64: unary_kernel<int64_t><<<blocks, CUDA_THREADS, 0, stream>>>(g, op); break;
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
  const cudaStream_t stream = cuda_stream(); // once per op: one op, one stream

  if (clamp_vec_plan(g, compute)) {
    const bool launched = with_dtype(g.dtype[0], [&](auto tag) {
      constexpr int D = decltype(tag)::value;
      typedef typename dtype_traits<D>::compute C;
      clamp_vec_kernel<D><<<vec_blocks<D, D>(g.numel), CUDA_THREADS, 0, stream>>>(
          g, has_lo, scalar_as<C>(lo), has_hi, scalar_as<C>(hi));
    });
    if (launched) return cuda_check_launch("clamp", "clamp_vec_kernel");
  }

  const unsigned blocks = cuda_blocks_for(g.numel);
  switch (kind_of(compute)) {
    case KIND_F32:
      clamp_kernel<float>
          <<<blocks, CUDA_THREADS, 0, stream>>>(g, has_lo, (float)lo.f, has_hi, (float)hi.f);
      break;
    case KIND_F64:
      clamp_kernel<double><<<blocks, CUDA_THREADS, 0, stream>>>(g, has_lo, lo.f, has_hi, hi.f);
      break;
    case KIND_I64:
      clamp_kernel<int64_t><<<blocks, CUDA_THREADS, 0, stream>>>(g, has_lo, lo.i, has_hi, hi.i);
      break;
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
  const cudaStream_t stream = cuda_stream(); // once per op: one op, one stream

  if (where_vec_plan(g)) {
    const bool launched = with_dtype(g.dtype[0], [&](auto tag) {
      constexpr int D = decltype(tag)::value;
      where_vec_kernel<D><<<vec_blocks<D, D>(g.numel), CUDA_THREADS, 0, stream>>>(g);
    });
    if (launched) return cuda_check_launch("where", "where_vec_kernel");
  }

  const unsigned blocks = cuda_blocks_for(g.numel);
  switch (kind_of(out->dtype)) {
    case KIND_F32: where_kernel<float><<<blocks, CUDA_THREADS, 0, stream>>>(g); break;
    case KIND_F64: where_kernel<double><<<blocks, CUDA_THREADS, 0, stream>>>(g); break;
    case KIND_I64: where_kernel<int64_t><<<blocks, CUDA_THREADS, 0, stream>>>(g); break;
  }
  return cuda_check_launch("where", "where_kernel");
}
