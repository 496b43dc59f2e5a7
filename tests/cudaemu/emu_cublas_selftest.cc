// Self-test of the reference cuBLAS (emu_cublas.cc): a few GEMMs against
// results worked out by hand, and the statuses of some misuses. It includes
// the implementation directly (no library, no dlopen), so it can also look
// at a handle's state.
//
//   g++ -std=c++17 -I/usr/local/cuda/include emu_cublas_selftest.cc -o emu_cublas_selftest
//
// The misuse cases make the emulator print its "emu_cublas: ..." lines on
// stderr; that is expected. The verdict is the last line on stdout.
#include "emu_cublas.cc"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

static int checks, failures;

#define CHECK(cond)                                                   \
  do {                                                                \
    checks++;                                                         \
    if (!(cond)) {                                                    \
      failures++;                                                     \
      fprintf(stdout, "FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                 \
  } while (0)

#define CHECK_STATUS(call, want) CHECK((call) == (want))

static const cublasStatus_t OK = CUBLAS_STATUS_SUCCESS, INVALID = CUBLAS_STATUS_INVALID_VALUE,
                            UNSUPPORTED = CUBLAS_STATUS_NOT_SUPPORTED,
                            NOT_INIT = CUBLAS_STATUS_NOT_INITIALIZED;

template <typename T> static bool equal(const T *got, std::initializer_list<double> want) {
  size_t i = 0;
  for (double w : want)
    if (static_cast<double>(got[i++]) != w) return false;
  return true;
}

static uint16_t h(float f) { return __half_as_ushort(__float2half_rn(f)); }
static float from_h(uint16_t b) { return __half2float(__ushort_as_half(b)); }
static uint16_t bf(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }

// Memory with a chosen alignment, as cudaMalloc's (256 bytes) or worse.
struct buffer {
  void *base;
  explicit buffer(size_t bytes) { base = aligned_alloc(256, (bytes + 255) / 256 * 256 + 256); }
  ~buffer() { free(base); }
  template <typename T> T *at(size_t byte_offset = 0) {
    return reinterpret_cast<T *>(static_cast<char *>(base) + byte_offset);
  }
};

static void classic_tests() {
  cublasHandle_t hd = nullptr;
  CHECK_STATUS(cublasCreate(&hd), OK);
  CHECK_STATUS(cublasSetMathMode(hd, static_cast<cublasMath_t>(
                                         CUBLAS_DEFAULT_MATH |
                                         CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
               OK);
  const float one = 1.0f, zero = 0.0f;

  // Row-major C[2x2] = A[2x3] B[3x2] through the column-major trick: a
  // row-major matrix is its transpose column-major, so C^T = B^T A^T, with B
  // passed first and the row lengths as leading dimensions.
  {
    const float A[] = {1, 2, 3, 4, 5, 6}, B[] = {7, 8, 9, 10, 11, 12};
    float C[4] = {NAN, NAN, NAN, NAN};  // beta = 0: never read
    CHECK_STATUS(cublasGemmEx(hd, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, B, CUDA_R_32F, 2, A,
                              CUDA_R_32F, 3, &zero, C, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT),
                 OK);
    CHECK(equal(C, {58, 64, 139, 154}));
    // The same with lda too small for the stored A (3 columns per row-major row).
    CHECK_STATUS(cublasGemmEx(hd, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, B, CUDA_R_32F, 2, A,
                              CUDA_R_32F, 2, &zero, C, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT),
                 INVALID);
    // ldc below m.
    CHECK_STATUS(cublasGemmEx(hd, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, B, CUDA_R_32F, 2, A,
                              CUDA_R_32F, 3, &zero, C, CUDA_R_32F, 1, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT),
                 INVALID);
  }

  // A transposed operand, in float64 (alpha and beta are doubles for
  // CUBLAS_COMPUTE_64F), accumulating into C with beta = 1: row-major
  // C[2x2] += A^T B with A stored [3x2], B [3x2].
  {
    const double A[] = {1, 2, 3, 4, 5, 6}, B[] = {1, 0, 0, 1, 1, 1}, d1 = 1.0;
    double C[] = {1, 1, 1, 1};
    // A^T B = [[6, 8], [8, 10]]; op(A) for cuBLAS is the second operand, T.
    CHECK_STATUS(cublasGemmEx(hd, CUBLAS_OP_N, CUBLAS_OP_T, 2, 2, 3, &d1, B, CUDA_R_64F, 2, A,
                              CUDA_R_64F, 2, &d1, C, CUDA_R_64F, 2, CUBLAS_COMPUTE_64F,
                              CUBLAS_GEMM_DEFAULT),
                 OK);
    CHECK(equal(C, {7, 9, 9, 11}));
    // float32 data with the float64 compute type is not in the table.
    const float fa[6] = {}, fb[6] = {};
    float fc[4] = {};
    CHECK_STATUS(cublasGemmEx(hd, CUBLAS_OP_N, CUBLAS_OP_T, 2, 2, 3, &d1, fb, CUDA_R_32F, 2, fa,
                              CUDA_R_32F, 2, &d1, fc, CUDA_R_32F, 2, CUBLAS_COMPUTE_64F,
                              CUBLAS_GEMM_DEFAULT),
                 UNSUPPORTED);
  }

  // Strided batch: two row-major 2x2 products A_e B with one B for both
  // (stride 0); C starts as NaN and beta is 0.
  {
    const float A[] = {1, 2, 3, 4, 0, 1, 1, 0}, B[] = {5, 6, 7, 8};
    float C[8];
    for (float &c : C) c = NAN;
    CHECK_STATUS(cublasGemmStridedBatchedEx(hd, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, B,
                                            CUDA_R_32F, 2, 0, A, CUDA_R_32F, 2, 4, &zero, C,
                                            CUDA_R_32F, 2, 4, 2, CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT),
                 OK);
    CHECK(equal(C, {19, 22, 43, 50, 7, 8, 5, 6}));
    // Output batch entries overlapping (strideC 2 < one 2x2 matrix): undefined.
    CHECK_STATUS(cublasGemmStridedBatchedEx(hd, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, B,
                                            CUDA_R_32F, 2, 0, A, CUDA_R_32F, 2, 4, &zero, C,
                                            CUDA_R_32F, 2, 2, 2, CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT),
                 INVALID);
    CHECK_STATUS(cublasGemmStridedBatchedEx(hd, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, B,
                                            CUDA_R_32F, 2, 0, A, CUDA_R_32F, 2, 4, &zero, C,
                                            CUDA_R_32F, 2, 4, -1, CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT),
                 INVALID);
    // The output written over an input: undefined.
    float AC[8] = {1, 2, 3, 4, 0, 1, 1, 0};
    CHECK_STATUS(cublasGemmStridedBatchedEx(hd, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, B,
                                            CUDA_R_32F, 2, 0, AC, CUDA_R_32F, 2, 4, &zero, AC,
                                            CUDA_R_32F, 2, 4, 2, CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT),
                 INVALID);
  }

  // float16 in, float16 out, float32 compute (lt's float16 GEMM), and
  // bfloat16 in with a float32 output.
  {
    const uint16_t A[] = {h(1), h(2), h(3), h(4)}, B[] = {h(0.5f), h(1), h(1.5f), h(2)};
    uint16_t C[4] = {0x7e00, 0x7e00, 0x7e00, 0x7e00};  // NaN
    CHECK_STATUS(cublasGemmEx(hd, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, B, CUDA_R_16F, 2, A,
                              CUDA_R_16F, 2, &zero, C, CUDA_R_16F, 2, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT),
                 OK);
    // [[1,2],[3,4]] [[0.5,1],[1.5,2]] = [[3.5, 5], [7.5, 11]]
    CHECK(from_h(C[0]) == 3.5f && from_h(C[1]) == 5 && from_h(C[2]) == 7.5f && from_h(C[3]) == 11);
    const uint16_t Ab[] = {bf(1), bf(2), bf(3), bf(4)}, Bb[] = {bf(0.5f), bf(1), bf(1.5f), bf(2)};
    float Cf[4];
    CHECK_STATUS(cublasGemmEx(hd, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, Bb, CUDA_R_16BF, 2, Ab,
                              CUDA_R_16BF, 2, &zero, Cf, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT),
                 OK);
    CHECK(equal(Cf, {3.5, 5, 7.5, 11}));
    // float16 inputs into a float64 C is no row of the table.
    double Cd[4];
    CHECK_STATUS(cublasGemmEx(hd, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, B, CUDA_R_16F, 2, A,
                              CUDA_R_16F, 2, &zero, Cd, CUDA_R_64F, 2, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT),
                 UNSUPPORTED);
  }

  // k = 0: C = beta C; with beta 0 a NaN C becomes zeros.
  {
    float C[4] = {NAN, NAN, NAN, NAN};
    CHECK_STATUS(cublasGemmEx(hd, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 0, &one, nullptr, CUDA_R_32F, 2,
                              nullptr, CUDA_R_32F, 1, &zero, C, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT),
                 OK);
    CHECK(equal(C, {0, 0, 0, 0}));
    float D[4] = {1, 2, 3, 4};
    const float two = 2.0f;
    CHECK_STATUS(cublasGemmEx(hd, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 0, &one, nullptr, CUDA_R_32F, 2,
                              nullptr, CUDA_R_32F, 1, &two, D, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT),
                 OK);
    CHECK(equal(D, {2, 4, 6, 8}));
  }

  // Argument checks.
  {
    float A[4] = {}, B[4] = {}, C[4] = {};
    CHECK_STATUS(cublasGemmEx(nullptr, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, A, CUDA_R_32F, 2,
                              B, CUDA_R_32F, 2, &zero, C, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT),
                 NOT_INIT);
    CHECK_STATUS(cublasGemmEx(hd, CUBLAS_OP_N, CUBLAS_OP_N, -1, 2, 2, &one, A, CUDA_R_32F, 2, B,
                              CUDA_R_32F, 2, &zero, C, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT),
                 INVALID);
    CHECK_STATUS(cublasGemmEx(hd, CUBLAS_OP_CONJG, CUBLAS_OP_N, 2, 2, 2, &one, A, CUDA_R_32F, 2,
                              B, CUDA_R_32F, 2, &zero, C, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT),
                 INVALID);
    CHECK_STATUS(cublasGemmEx(hd, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, nullptr, A, CUDA_R_32F, 2, B,
                              CUDA_R_32F, 2, &zero, C, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT),
                 INVALID);
    CHECK_STATUS(cublasGemmEx(hd, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, A, CUDA_R_32F, 2, B,
                              CUDA_R_32F, 2, &zero, C, CUDA_R_32F, 2, CUBLAS_COMPUTE_32I,
                              CUBLAS_GEMM_DEFAULT),
                 UNSUPPORTED);
    CHECK_STATUS(cublasSetMathMode(hd, static_cast<cublasMath_t>(99)), INVALID);
  }

  // Workspace: 256-byte alignment, and cublasSetStream resets it (documented).
  {
    buffer ws(4096);
    CHECK_STATUS(cublasSetWorkspace(hd, ws.at<char>(16), 1024), INVALID);
    CHECK_STATUS(cublasSetWorkspace(hd, ws.at<char>(), 4096), OK);
    CHECK(hd->workspace == ws.base && hd->workspace_bytes == 4096);
    CHECK_STATUS(cublasSetStream(hd, reinterpret_cast<cudaStream_t>(0x1234)), OK);
    CHECK(hd->workspace == nullptr && hd->stream == reinterpret_cast<cudaStream_t>(0x1234));
  }

  CHECK_STATUS(cublasDestroy(hd), OK);
  float A[4] = {}, C[4] = {};
  CHECK_STATUS(cublasGemmEx(hd, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, A, CUDA_R_32F, 2, A,
                            CUDA_R_32F, 2, &zero, C, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT),
               NOT_INIT);  // destroyed handle
}

// ---- cuBLASLt: lt's fused linear, out[M, O] = x[M, K] w[O, K]^T + b[O] ----

struct lt_call {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~lt_call() {
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(d);
    cublasLtMatrixLayoutDestroy(b);
    cublasLtMatrixLayoutDestroy(a);
    cublasLtMatmulDescDestroy(op);
  }
};

// Sets up the descriptors as engine/cuda/cuda_nn_linear.cu does: w is
// column-major K x O read transposed, x column-major K x M, D column-major
// O x M, bias of D's type, alignments from the pointers.
static cublasStatus_t setup_linear(lt_call &c, cudaDataType_t type, cublasComputeType_t ct,
                                   cudaDataType_t scale, const void *x, const void *w,
                                   const void *bias, const void *out, int64_t m, int64_t k,
                                   int64_t o, uint64_t max_ws) {
  cublasStatus_t s;
#define TRY(call) \
  if ((s = (call)) != OK) return s
  TRY(cublasLtMatmulDescCreate(&c.op, ct, scale));
  const int32_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  TRY(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  TRY(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  const uint32_t epi = CUBLASLT_EPILOGUE_BIAS;
  TRY(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
  TRY(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  TRY(cublasLtMatrixLayoutCreate(&c.a, type, k, o, k));
  TRY(cublasLtMatrixLayoutCreate(&c.b, type, k, m, k));
  TRY(cublasLtMatrixLayoutCreate(&c.d, type, o, m, o));
  TRY(cublasLtMatmulPreferenceCreate(&c.pref));
  TRY(cublasLtMatmulPreferenceSetAttribute(c.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &max_ws, sizeof max_ws));
  const uint32_t aw = alignment_of(w), ax = alignment_of(x), ao = alignment_of(out);
  TRY(cublasLtMatmulPreferenceSetAttribute(c.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aw,
                                           sizeof aw));
  TRY(cublasLtMatmulPreferenceSetAttribute(c.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ax,
                                           sizeof ax));
  TRY(cublasLtMatmulPreferenceSetAttribute(c.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ao,
                                           sizeof ao));
  TRY(cublasLtMatmulPreferenceSetAttribute(c.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ao,
                                           sizeof ao));
#undef TRY
  return OK;
}

static void lt_tests() {
  cublasLtHandle_t lh = nullptr;
  CHECK_STATUS(cublasLtCreate(&lh), OK);
  const float one = 1.0f, zero = 0.0f;
  // x = [[1,2,3],[4,5,6]], w = [[1,0,1],[0,1,0]], b = [10, 20]:
  // x w^T = [[4, 2], [10, 5]], + b = [[14, 22], [20, 25]].
  buffer mem(4096), ws(8192);
  float *x = mem.at<float>(0), *w = mem.at<float>(256), *b = mem.at<float>(512),
        *out = mem.at<float>(768);
  const float xv[] = {1, 2, 3, 4, 5, 6}, wv[] = {1, 0, 1, 0, 1, 0}, bv[] = {10, 20};
  memcpy(x, xv, sizeof xv), memcpy(w, wv, sizeof wv), memcpy(b, bv, sizeof bv);
  for (int i = 0; i < 4; i++) out[i] = NAN;
  {
    lt_call c;
    CHECK_STATUS(setup_linear(c, CUDA_R_32F, CUBLAS_COMPUTE_32F, CUDA_R_32F, x, w, b, out, 2, 3, 2,
                              4096),
                 OK);
    cublasLtMatmulHeuristicResult_t r;
    int found = -1;
    CHECK_STATUS(cublasLtMatmulAlgoGetHeuristic(lh, c.op, c.a, c.b, c.d, c.d, c.pref, 1, &r, &found),
                 OK);
    CHECK(found == 1 && r.state == OK && r.workspaceSize <= 4096);
    memset(ws.base, 0, 8192);
    CHECK_STATUS(cublasLtMatmul(lh, c.op, &one, w, c.a, x, c.b, &zero, out, c.d, out, c.d, &r.algo,
                                ws.base, 4096, nullptr),
                 OK);
    CHECK(equal(out, {14, 22, 20, 25}));
    CHECK(ws.at<unsigned char>()[0] == 0xff);  // the workspace was used as scratch

    // Misuses of the same problem.
    CHECK_STATUS(cublasLtMatmul(lh, c.op, &one, w, c.a, x, c.b, &zero, out, c.d, out, c.d, &r.algo,
                                ws.base, 1024, nullptr),
                 INVALID);  // less workspace than the heuristic's answer
    CHECK_STATUS(cublasLtMatmul(lh, c.op, &one, w, c.a, x, c.b, &zero, out, c.d, out, c.d, &r.algo,
                                ws.at<char>(64), 4096, nullptr),
                 INVALID);  // workspace not 256-byte aligned
    float *x_off = mem.at<float>(1024 + 4);  // 4-byte aligned only; the algo assumed 256
    memcpy(x_off, xv, sizeof xv);
    CHECK_STATUS(cublasLtMatmul(lh, c.op, &one, w, c.a, x_off, c.b, &zero, out, c.d, out, c.d,
                                &r.algo, ws.base, 4096, nullptr),
                 INVALID);
    cublasLtMatmulAlgo_t junk;
    memset(&junk, 0, sizeof junk);
    CHECK_STATUS(cublasLtMatmul(lh, c.op, &one, w, c.a, x, c.b, &zero, out, c.d, out, c.d, &junk,
                                ws.base, 4096, nullptr),
                 INVALID);
    CHECK_STATUS(cublasLtMatmulAlgoGetHeuristic(lh, c.op, c.a, c.b, c.d, c.d, c.pref, 0, &r, &found),
                 INVALID);
    // In place with a C layout other than D's.
    cublasLtMatrixLayout_t wide = nullptr;
    CHECK_STATUS(cublasLtMatrixLayoutCreate(&wide, CUDA_R_32F, 2, 2, 3), OK);
    CHECK_STATUS(cublasLtMatmul(lh, c.op, &one, w, c.a, x, c.b, &zero, out, wide, out, c.d,
                                nullptr, nullptr, 0, nullptr),
                 INVALID);
    // op(B) with the wrong k (4 rows where op(A) has 3 columns).
    cublasLtMatrixLayout_t bad_b = nullptr;
    CHECK_STATUS(cublasLtMatrixLayoutCreate(&bad_b, CUDA_R_32F, 4, 2, 4), OK);
    CHECK_STATUS(cublasLtMatmulAlgoGetHeuristic(lh, c.op, c.a, bad_b, c.d, c.d, c.pref, 1, &r,
                                                &found),
                 INVALID);
    cublasLtMatrixLayoutDestroy(bad_b);
    cublasLtMatrixLayoutDestroy(wide);

    // Attribute sizes and names.
    const int64_t t64 = CUBLAS_OP_T;
    CHECK_STATUS(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_TRANSA, &t64, sizeof t64),
                 INVALID);
    const int32_t t32 = CUBLAS_OP_T;
    CHECK_STATUS(cublasLtMatmulDescSetAttribute(c.op, static_cast<cublasLtMatmulDescAttributes_t>(9),
                                                &t32, sizeof t32),
                 INVALID);
    CHECK_STATUS(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_TRANSA, nullptr, 4),
                 INVALID);
    const uint32_t ws32 = 4096;
    CHECK_STATUS(cublasLtMatmulPreferenceSetAttribute(c.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                      &ws32, sizeof ws32),
                 INVALID);
    // Scaling pointers are for fp8.
    const void *scale_ptr = &one;
    CHECK_STATUS(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                                &scale_ptr, sizeof scale_ptr),
                 OK);
    CHECK_STATUS(cublasLtMatmulAlgoGetHeuristic(lh, c.op, c.a, c.b, c.d, c.d, c.pref, 1, &r, &found),
                 INVALID);
  }

  // An epilogue this emulator does not have, and a bias type off the table.
  {
    lt_call c;
    CHECK_STATUS(setup_linear(c, CUDA_R_32F, CUBLAS_COMPUTE_32F, CUDA_R_32F, x, w, b, out, 2, 3, 2,
                              0),
                 OK);
    const uint32_t gelu = CUBLASLT_EPILOGUE_GELU_BIAS;
    CHECK_STATUS(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &gelu,
                                                sizeof gelu),
                 OK);
    cublasLtMatmulHeuristicResult_t r;
    int found = -1;
    CHECK_STATUS(cublasLtMatmulAlgoGetHeuristic(lh, c.op, c.a, c.b, c.d, c.d, c.pref, 1, &r, &found),
                 UNSUPPORTED);
    CHECK(found == 0);
  }

  // float16 (lt's float16 linear), with a float32 bias type: not in the
  // table, then with the default (D's type).
  {
    uint16_t *xh = mem.at<uint16_t>(2048), *wh = mem.at<uint16_t>(2304),
             *bh = mem.at<uint16_t>(2560), *oh = mem.at<uint16_t>(2816);
    for (int i = 0; i < 6; i++) xh[i] = h(xv[i]), wh[i] = h(wv[i]);
    bh[0] = h(10), bh[1] = h(20);
    lt_call c;
    CHECK_STATUS(setup_linear(c, CUDA_R_16F, CUBLAS_COMPUTE_32F, CUDA_R_32F, xh, wh, bh, oh, 2, 3,
                              2, 4096),
                 OK);
    const int32_t f32 = CUDA_R_32F, unset = -1;
    CHECK_STATUS(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &f32,
                                                sizeof f32),
                 OK);
    cublasLtMatmulHeuristicResult_t r;
    int found = -1;
    CHECK_STATUS(cublasLtMatmulAlgoGetHeuristic(lh, c.op, c.a, c.b, c.d, c.d, c.pref, 1, &r, &found),
                 UNSUPPORTED);
    CHECK_STATUS(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &unset,
                                                sizeof unset),
                 OK);
    CHECK_STATUS(cublasLtMatmulAlgoGetHeuristic(lh, c.op, c.a, c.b, c.d, c.d, c.pref, 1, &r, &found),
                 OK);
    CHECK_STATUS(cublasLtMatmul(lh, c.op, &one, wh, c.a, xh, c.b, &zero, oh, c.d, oh, c.d, &r.algo,
                                ws.base, r.workspaceSize, nullptr),
                 OK);
    CHECK(from_h(oh[0]) == 14 && from_h(oh[1]) == 22 && from_h(oh[2]) == 20 && from_h(oh[3]) == 25);
  }

  // float64 with the bias epilogue: in the documented table (scale type
  // double), so the heuristic finds an algorithm.
  {
    double *xd = mem.at<double>(0), *wd = mem.at<double>(256), *bd = mem.at<double>(512),
           *od = mem.at<double>(768);
    for (int i = 0; i < 6; i++) xd[i] = xv[i], wd[i] = wv[i];
    bd[0] = 10, bd[1] = 20;
    lt_call c;
    CHECK_STATUS(setup_linear(c, CUDA_R_64F, CUBLAS_COMPUTE_64F, CUDA_R_64F, xd, wd, bd, od, 2, 3,
                              2, 0),
                 OK);
    cublasLtMatmulHeuristicResult_t r;
    int found = -1;
    CHECK_STATUS(cublasLtMatmulAlgoGetHeuristic(lh, c.op, c.a, c.b, c.d, c.d, c.pref, 1, &r, &found),
                 OK);
    const double d1 = 1.0, d0 = 0.0;
    CHECK_STATUS(cublasLtMatmul(lh, c.op, &d1, wd, c.a, xd, c.b, &d0, od, c.d, od, c.d, &r.algo,
                                nullptr, 0, nullptr),
                 OK);
    CHECK(equal(od, {14, 22, 20, 25}));
    // A float32 scale type with the float64 compute type is not in the table.
    lt_call c2;
    CHECK_STATUS(setup_linear(c2, CUDA_R_64F, CUBLAS_COMPUTE_64F, CUDA_R_32F, xd, wd, bd, od, 2, 3,
                              2, 0),
                 OK);
    CHECK_STATUS(cublasLtMatmulAlgoGetHeuristic(lh, c2.op, c2.a, c2.b, c2.d, c2.d, c2.pref, 1, &r,
                                                &found),
                 UNSUPPORTED);
  }

  CHECK_STATUS(cublasLtDestroy(lh), OK);
  CHECK_STATUS(cublasLtDestroy(lh), NOT_INIT);
}

int main() {
  classic_tests();
  lt_tests();
  printf("%s: %d checks, %d failed\n", failures ? "FAIL" : "PASS", checks, failures);
  return failures ? 1 : 0;
}
