/* Which BLAS for lt's GEMM: times OpenBLAS's cblas_sgemm against oneDNN's
 * dnnl_sgemm on the shapes of the Fashion MLP and CNN training steps (forward
 * and both backward products), at the thread count in OMP_NUM_THREADS.
 * Build and run: scripts/bench/blas_choice.sh */
#include <cblas.h>
#include <dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct { int m, n, k; const char *what; } shape;

int main(void) {
  const shape shapes[] = {
      {128, 256, 784, "MLP fc1 forward"},   {784, 256, 128, "MLP fc1 weight grad"},
      {128, 128, 256, "MLP fc2 forward"},   {128, 10, 128, "MLP fc3 forward"},
      {128 * 196, 64, 288, "CNN conv2 im2col"}, {128 * 784, 32, 9, "CNN conv1 im2col"},
      {128, 128, 3136, "CNN fc1 forward"},
  };
  float *a = malloc(sizeof(float) * 8000000), *b = malloc(sizeof(float) * 3136 * 256),
        *c = malloc(sizeof(float) * 128 * 784 * 64);
  for (int i = 0; i < 8000000; i++) a[i] = (float)(i % 17) * 0.01f;
  for (int i = 0; i < 3136 * 256; i++) b[i] = (float)(i % 13) * 0.01f;
  printf("%-22s %12s %12s %8s\n", "shape (m n k)", "openblas us", "onednn us", "ratio");
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
    shape sh = shapes[s];
    int reps = 20;
    double best_o = 1e9, best_d = 1e9;
    for (int r = 0; r < reps; r++) {
      double t0 = now();
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, sh.m, sh.n, sh.k, 1.0f, a, sh.k, b,
                  sh.n, 0.0f, c, sh.n);
      double t1 = now();
      dnnl_sgemm('N', 'N', sh.m, sh.n, sh.k, 1.0f, a, sh.k, b, sh.n, 0.0f, c, sh.n);
      double t2 = now();
      if (t1 - t0 < best_o) best_o = t1 - t0;
      if (t2 - t1 < best_d) best_d = t2 - t1;
    }
    char dims[64];
    snprintf(dims, sizeof dims, "%d %d %d", sh.m, sh.n, sh.k);
    printf("%-22s %12.1f %12.1f %8.2f  %s\n", dims, best_o * 1e6, best_d * 1e6, best_d / best_o,
           sh.what);
  }
  free(a), free(b), free(c);
  return 0;
}
