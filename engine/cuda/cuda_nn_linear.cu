// linear on cuBLAS: out [M, O] = x [M, K] w [O, K]^T + b [O].
//
// Forward with a bias, for float32/float16/bfloat16: one cublasLtMatmul with
// the CUBLASLT_EPILOGUE_BIAS epilogue (the bias is added inside the GEMM's
// epilogue, before the single rounding to the output type). Otherwise (no
// bias, float64 (cuBLASLt has no double bias epilogue), or cuBLASLt finding
// no algorithm) as the CPU does it: the output rows start as copies of b and
// cuda_gemm accumulates into them with beta = 1.
//
// Backward: gx = go w and gw = go^T x through cuda_gemm; gb = the column
// sums of go, a two-pass tree reduction (partial sums of row chunks, then
// the chunks added in order) accumulating in double as cpu_nn_linear.c does
// for every dtype it sees: deterministic, no atomics.
//
// cuBLAS is column-major: the row-major [R, C] matrix is the column-major
// C x R one with leading dimension C. So out (column-major O x M, ld O) =
// op_T(w: column-major K x O, ld K) * (x: column-major K x M, ld K).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "cuda/cuda_blas.h"
#include "cuda/cuda_nn_kernels.h"

// ---- bias rows: out[i, :] = b ----

// A raw copy: U is the unsigned integer of the element's size, so one kernel
// serves every dtype and the copy is exact.
template <typename U>
__global__ void bias_rows_kernel(U *out, const U *b, int64_t rows, int64_t cols) {
  const int64_t total = rows * cols;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (int64_t)blockDim.x * gridDim.x)
    out[i] = b[i % cols];
}

static lt_status bias_rows(const char *op, lt_tensor *out, const lt_tensor *b, int64_t rows,
                           int64_t cols) {
  const int64_t total = rows * cols;
  if (total == 0) return LT_OK;
  const unsigned blocks = cuda_blocks_for(total);
  const cudaStream_t stream = cuda_stream();
  switch (lt_dtype_size(out->dtype)) {
    case 8:
      bias_rows_kernel<uint64_t><<<blocks, CUDA_THREADS, 0, stream>>>(
          (uint64_t *)cuda_bytes(out), (const uint64_t *)cuda_bytes(b), rows, cols);
      break;
    case 4:
      bias_rows_kernel<uint32_t><<<blocks, CUDA_THREADS, 0, stream>>>(
          (uint32_t *)cuda_bytes(out), (const uint32_t *)cuda_bytes(b), rows, cols);
      break;
    case 2:
      bias_rows_kernel<uint16_t><<<blocks, CUDA_THREADS, 0, stream>>>(
          (uint16_t *)cuda_bytes(out), (const uint16_t *)cuda_bytes(b), rows, cols);
      break;
    default:
      return lt_error(LT_ERR_INTERNAL, "cuda: %s: no bias copy for %s", op,
                      lt_dtype_name(out->dtype));
  }
  return cuda_check_launch(op, "bias_rows_kernel");
}

// ---- forward through cuBLASLt with a fused bias ----

// The largest power of two (up to 256) dividing p's address: cuBLASLt
// assumes 256-byte-aligned operands unless told otherwise and would then
// pick kernels that fault on a view starting mid-storage.
static uint32_t pointer_alignment(const void *p) {
  const uintptr_t a = (uintptr_t)p;
  uint32_t align = 256;
  while (align > 1 && (a & (align - 1)) != 0) align >>= 1;
  return align;
}

// Descriptors destroyed however the call ends.
struct lt_descs {
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t a, b, d;
  cublasLtMatmulPreference_t pref;
  lt_descs() : op(NULL), a(NULL), b(NULL), d(NULL), pref(NULL) {}
  ~lt_descs() {
    if (pref) (void)cublasLtMatmulPreferenceDestroy(pref);
    if (d) (void)cublasLtMatrixLayoutDestroy(d);
    if (b) (void)cublasLtMatrixLayoutDestroy(b);
    if (a) (void)cublasLtMatrixLayoutDestroy(a);
    if (op) (void)cublasLtMatmulDescDestroy(op);
  }
  lt_descs(const lt_descs &) = delete;
  lt_descs &operator=(const lt_descs &) = delete;
};

#define LT_CALL(call)                                                   \
  do {                                                                  \
    const cublasStatus_t lt_call_s_ = (call);                           \
    if (lt_call_s_ != CUBLAS_STATUS_SUCCESS) {                          \
      *unsupported = lt_call_s_ == CUBLAS_STATUS_NOT_SUPPORTED;         \
      return *unsupported ? LT_OK : cuda_cublas_fail("linear", #call, lt_call_s_); \
    }                                                                   \
  } while (0)

// out = x w^T + b in one cublasLtMatmul. Sets *unsupported (and returns
// LT_OK, having launched nothing) when cuBLASLt has no algorithm for the
// problem, so that the caller falls back.
static lt_status linear_lt(lt_tensor *out, const lt_tensor *x, const lt_tensor *w,
                           const lt_tensor *b, int64_t m, int64_t k, int64_t o,
                           bool *unsupported) {
  *unsupported = false;
  const lt_device dev = out->storage->device;
  cudaDataType_t type;
  cublasComputeType_t ct;
  if (!cuda_blas_types(out->dtype, &type, &ct) || ct == CUBLAS_COMPUTE_64F) {
    *unsupported = true;
    return LT_OK;
  }
  cublasLtHandle_t h;
  LT_TRY(cuda_cublaslt_handle(dev, &h));
  // cuBLASLt takes the stream and the workspace per call: the current
  // stream, and the workspace cuBLAS uses on it (cuda_blas.h), which calls
  // queued on one stream share safely.
  const cudaStream_t stream = cuda_stream();
  void *ws;
  size_t ws_bytes;
  LT_TRY(cuda_blas_workspace("linear", dev, stream, &ws, &ws_bytes));

  lt_descs dd;
  LT_CALL(cublasLtMatmulDescCreate(&dd.op, ct, CUDA_R_32F));
  const int32_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  LT_CALL(cublasLtMatmulDescSetAttribute(dd.op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a,
                                         sizeof trans_a));
  LT_CALL(cublasLtMatmulDescSetAttribute(dd.op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b,
                                         sizeof trans_b));
  // EPILOGUE_BIAS adds a packed vector as long as D has rows (O here), the
  // same value down each column (each of the M samples). Its type defaults to
  // D's, which is b's dtype.
  const uint32_t epilogue = CUBLASLT_EPILOGUE_BIAS;
  LT_CALL(cublasLtMatmulDescSetAttribute(dd.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                         sizeof epilogue));
  const void *bias = lt_data(b);
  LT_CALL(cublasLtMatmulDescSetAttribute(dd.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                         sizeof bias));
  // Layouts describe the stored matrices (before TRANSA/TRANSB), column-major.
  LT_CALL(cublasLtMatrixLayoutCreate(&dd.a, type, (uint64_t)k, (uint64_t)o, k));
  LT_CALL(cublasLtMatrixLayoutCreate(&dd.b, type, (uint64_t)k, (uint64_t)m, k));
  LT_CALL(cublasLtMatrixLayoutCreate(&dd.d, type, (uint64_t)o, (uint64_t)m, o));

  LT_CALL(cublasLtMatmulPreferenceCreate(&dd.pref));
  const uint64_t max_ws = ws_bytes;
  LT_CALL(cublasLtMatmulPreferenceSetAttribute(dd.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                               &max_ws, sizeof max_ws));
  const uint32_t align_w = pointer_alignment(lt_data(w)), align_x = pointer_alignment(lt_data(x)),
                 align_out = pointer_alignment(lt_data(out));
  LT_CALL(cublasLtMatmulPreferenceSetAttribute(dd.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                               &align_w, sizeof align_w));
  LT_CALL(cublasLtMatmulPreferenceSetAttribute(dd.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                               &align_x, sizeof align_x));
  LT_CALL(cublasLtMatmulPreferenceSetAttribute(dd.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                               &align_out, sizeof align_out));
  LT_CALL(cublasLtMatmulPreferenceSetAttribute(dd.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                               &align_out, sizeof align_out));
  if (out->dtype == LT_FLOAT16 || out->dtype == LT_BFLOAT16) {
    // As the classic handle's CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION:
    // split-K partial sums stay in float32 (in the workspace), never in the
    // 16-bit output ("in place" and "output type" schemes); algorithms
    // without split-K (scheme NONE, 0) stay allowed.
    const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    LT_CALL(cublasLtMatmulPreferenceSetAttribute(dd.pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                 &schemes, sizeof schemes));
  }

  cublasLtMatmulHeuristicResult_t heur;
  int found = 0;
  LT_CALL(cublasLtMatmulAlgoGetHeuristic(h, dd.op, dd.a, dd.b, dd.d, dd.d, dd.pref, 1, &heur,
                                         &found));
  if (found < 1 || heur.state != CUBLAS_STATUS_SUCCESS) {
    *unsupported = true;
    return LT_OK;
  }
  // beta = 0: C (the output itself, same layout) is not read.
  const float one = 1.0f, zero = 0.0f;
  void *od = lt_data(out);
  LT_CALL(cublasLtMatmul(h, dd.op, &one, lt_data(w), dd.a, lt_data(x), dd.b, &zero, od, dd.d, od,
                         dd.d, &heur.algo, ws_bytes ? ws : NULL, ws_bytes, stream));
  return LT_OK;
}

#undef LT_CALL

lt_status cuda_nn_linear(lt_tensor *out, const lt_tensor *x, const lt_tensor *w,
                         const lt_tensor *b) {
  cuda_device_guard guard(out->storage->device);
  const int64_t m = x->shape[0], k = x->shape[1], o = w->shape[0];
  if (m == 0 || o == 0) return LT_OK;
  const lt_dtype dt = out->dtype;
  // The fused epilogue wants a real GEMM (k > 0), a dtype it has a bias
  // epilogue for, cuBLASLt's int dimensions, and a bias aligned for vector
  // loads (16 bytes, as the output of nn_prepare normally is).
  if (b && k > 0 && dt != LT_FLOAT64 && m <= INT32_MAX && k <= INT32_MAX && o <= INT32_MAX &&
      pointer_alignment(lt_data(b)) >= 16) {
    bool unsupported = false;
    LT_TRY(linear_lt(out, x, w, b, m, k, o, &unsupported));
    if (!unsupported) return LT_OK;
  }
  if (b) LT_TRY(bias_rows("linear", out, b, m, o));
  const int64_t ldk = k > 1 ? k : 1, ldo = o > 1 ? o : 1;
  return cuda_gemm("linear", out->storage->device, dt, false, true, m, o, k, lt_data(x), ldk,
                   lt_data(w), ldk, b ? 1.0 : 0.0, lt_data(out), ldo);
}

// ---- backward: column sums for gb ----

__device__ inline double to_acc(float v) { return v; }
__device__ inline double to_acc(double v) { return v; }
__device__ inline double to_acc(__half v) { return __half2float(v); }
__device__ inline double to_acc(__nv_bfloat16 v) { return __bfloat162float(v); }

// double -> T as lt converts (16-bit through float, as cuda_store does).
template <typename T> __device__ inline T from_acc(double v);
template <> __device__ inline float from_acc<float>(double v) { return (float)v; }
template <> __device__ inline double from_acc<double>(double v) { return v; }
template <> __device__ inline __half from_acc<__half>(double v) { return __float2half_rn((float)v); }
template <> __device__ inline __nv_bfloat16 from_acc<__nv_bfloat16>(double v) {
  return __float2bfloat16_rn((float)v);
}

#define COLSUM_X 32 // columns per block: one warp reads 32 adjacent elements of a row
#define COLSUM_Y 8  // row lanes per block, folded by a shared-memory tree

// dst[c] = the sum rounded to T, or with add dst[c] + that (rounded again):
// what a separate add of the sums would give.
template <typename T>
__device__ void store_sum(T *dst, int64_t c, double sum, bool add) {
  const T rounded = from_acc<T>(sum);
  dst[c] = add ? from_acc<T>(to_acc(dst[c]) + to_acc(rounded)) : rounded;
}

// Pass 1: block (bx, by) sums columns [bx * 32, +32) over the rows of chunk
// by ([by * chunk, +chunk)); lane ty takes rows ty, ty + 8, ... of the chunk
// in order. The per-chunk sums go to partial [chunks, cols] (double), or,
// with one chunk, straight to dst (added with add).
template <typename T>
__global__ void colsum_partial_kernel(const T *src, int64_t rows, int64_t cols, int64_t chunk,
                                      double *partial, T *dst, bool add) {
  __shared__ double s[COLSUM_Y][COLSUM_X];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t c = (int64_t)blockIdx.x * COLSUM_X + tx;
  const int64_t r0 = (int64_t)blockIdx.y * chunk;
  const int64_t r1 = r0 + chunk < rows ? r0 + chunk : rows;
  double acc = 0.0;
  if (c < cols)
    for (int64_t r = r0 + ty; r < r1; r += COLSUM_Y) acc += to_acc(src[r * cols + c]);
  s[ty][tx] = acc;
  __syncthreads();
  for (int half = COLSUM_Y / 2; half > 0; half /= 2) {
    if (ty < half) s[ty][tx] += s[ty + half][tx];
    __syncthreads();
  }
  if (ty == 0 && c < cols) {
    if (partial)
      partial[(int64_t)blockIdx.y * cols + c] = s[0][tx];
    else
      store_sum(dst, c, s[0][tx], add);
  }
}

// Pass 2: each column's chunk sums added in chunk order.
template <typename T>
__global__ void colsum_finish_kernel(const double *partial, int64_t chunks, int64_t cols, T *dst,
                                     bool add) {
  for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols;
       c += (int64_t)blockDim.x * gridDim.x) {
    double acc = 0.0;
    for (int64_t j = 0; j < chunks; j++) acc += partial[j * cols + c];
    store_sum(dst, c, acc, add);
  }
}

// Enough blocks to fill a large GPU (a few hundred), each chunk at least 512
// rows; the split depends only on the shape, so results repeat run to run.
#define COLSUM_TARGET_BLOCKS 512
#define COLSUM_MIN_CHUNK 512

template <typename T>
static lt_status column_sums_t(lt_device dev, T *dst, const T *src, int64_t rows, int64_t cols,
                               bool add) {
  const int64_t col_blocks = (cols + COLSUM_X - 1) / COLSUM_X;
  int64_t chunks = (rows + COLSUM_MIN_CHUNK - 1) / COLSUM_MIN_CHUNK;
  const int64_t want = (COLSUM_TARGET_BLOCKS + col_blocks - 1) / col_blocks;
  if (chunks > want) chunks = want;
  if (chunks < 1) chunks = 1;
  const int64_t chunk = (rows + chunks - 1) / chunks;
  chunks = rows > 0 ? (rows + chunk - 1) / chunk : 1; // no empty trailing chunk
  if (col_blocks > 0x7fffffff)
    return lt_error(LT_ERR_ARG, "cuda: linear_backward: %lld bias columns are too many",
                    (long long)cols);
  cuda_workspace ws;
  double *partial = NULL;
  if (chunks > 1) {
    LT_TRY(ws.get(dev, (size_t)chunks * (size_t)cols * sizeof(double)));
    partial = (double *)ws.ptr;
  }
  // The partial sums' workspace is given back at scope end while the kernels
  // may still be queued: safe on the stream it was taken on (cuda_internal.h).
  const cudaStream_t stream = cuda_stream();
  const dim3 grid((unsigned)col_blocks, (unsigned)chunks), block(COLSUM_X, COLSUM_Y);
  colsum_partial_kernel<T><<<grid, block, 0, stream>>>(src, rows, cols, chunk, partial, dst, add);
  LT_TRY(cuda_check_launch("linear_backward", "colsum_partial_kernel"));
  if (!partial) return LT_OK;
  colsum_finish_kernel<T><<<cuda_blocks_for(cols), CUDA_THREADS, 0, stream>>>(
      partial, chunks, cols, dst, add);
  return cuda_check_launch("linear_backward", "colsum_finish_kernel");
}

// gb [cols] = the column sums of go [rows, cols] (with add, gb += them);
// zeros when rows is 0 (gb unchanged with add).
static lt_status column_sums(lt_tensor *gb, const lt_tensor *go, int64_t rows, int64_t cols,
                             bool add) {
  if (cols == 0) return LT_OK;
  const lt_device dev = gb->storage->device;
  if (rows == 0) {
    if (add) return LT_OK;
    CUDA_TRY("linear_backward", cudaMemsetAsync(cuda_bytes(gb), 0, lt_nbytes(gb), cuda_stream()));
    return LT_OK;
  }
  // rows <= 65535 chunks always: chunks <= COLSUM_TARGET_BLOCKS.
  switch (gb->dtype) {
    case LT_FLOAT32:
      return column_sums_t<float>(dev, (float *)lt_data(gb), (const float *)lt_data(go), rows, cols,
                                  add);
    case LT_FLOAT64:
      return column_sums_t<double>(dev, (double *)lt_data(gb), (const double *)lt_data(go), rows,
                                   cols, add);
    case LT_FLOAT16:
      return column_sums_t<__half>(dev, (__half *)lt_data(gb), (const __half *)lt_data(go), rows,
                                   cols, add);
    case LT_BFLOAT16:
      return column_sums_t<__nv_bfloat16>(dev, (__nv_bfloat16 *)lt_data(gb),
                                          (const __nv_bfloat16 *)lt_data(go), rows, cols, add);
    default:
      return lt_error(LT_ERR_INTERNAL, "cuda: linear_backward: no column sum for %s",
                      lt_dtype_name(gb->dtype));
  }
}

lt_status cuda_nn_linear_backward(lt_tensor *gx, lt_tensor *gw, lt_tensor *gb,
                                  const lt_tensor *go, const lt_tensor *x, const lt_tensor *w,
                                  bool add_gw, bool add_gb) {
  // go is always there (ops/ passes it even when only gb is wanted); x's
  // data is read only for gw and w's only for gx (ops/ passes shape-only
  // stand-ins otherwise).
  cuda_device_guard guard(go->storage->device);
  const lt_device dev = go->storage->device;
  const lt_dtype dt = go->dtype;
  const int64_t m = x->shape[0], k = x->shape[1], o = w->shape[0];
  const int64_t ldk = k > 1 ? k : 1, ldo = o > 1 ? o : 1;
  if (gx) // [m, k] = go [m, o] w [o, k]
    LT_TRY(cuda_gemm("linear_backward", dev, dt, false, false, m, k, o, lt_data(go), ldo,
                     lt_data(w), ldk, 0.0, lt_data(gx), ldk));
  if (gw) // [o, k] = go^T [o, m] x [m, k] (+ gw)
    LT_TRY(cuda_gemm("linear_backward", dev, dt, true, false, o, k, m, lt_data(go), ldo,
                     lt_data(x), ldk, add_gw ? 1.0 : 0.0, lt_data(gw), ldk));
  if (gb) LT_TRY(column_sums(gb, go, m, o, add_gb));
  return LT_OK;
}
