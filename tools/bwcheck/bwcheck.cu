// bwcheck: an independent C/CUDA measurement of pinned host<->device copy bandwidth.
//
// The course's Python helpers time copies with CUDA events through CuPy; this program does
// the same job with the CUDA runtime directly, so the two can be compared in one run
// (`make bwcheck`, and the recorder's crosscheck.bwcheck experiment). It prints one JSON
// object on stdout.
//
//   bwcheck [nbytes=268435456] [reps=30]
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(call)                                                                  \
  do {                                                                            \
    cudaError_t e_ = (call);                                                      \
    if (e_ != cudaSuccess) {                                                      \
      fprintf(stderr, "bwcheck: %s failed: %s\n", #call, cudaGetErrorString(e_)); \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

// Time `reps` copies (after `warm` untimed ones), each bracketed by events and waited for.
static void time_copies(void *dst, const void *src, size_t n, cudaMemcpyKind kind, int warm,
                        int reps, cudaStream_t s, float *ms_out) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < warm + reps; i++) {
    CK(cudaEventRecord(a, s));
    CK(cudaMemcpyAsync(dst, src, n, kind, s));
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    if (i >= warm) CK(cudaEventElapsedTime(&ms_out[i - warm], a, b));
  }
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
}

static void print_stats(const char *name, size_t n, float *ms, int reps, int last) {
  qsort(ms, reps, sizeof(float), cmp_float);
  double med = reps % 2 ? ms[reps / 2] : 0.5 * (ms[reps / 2 - 1] + ms[reps / 2]);
  printf("  \"%s\": {\"median_s\": %.9e, \"min_s\": %.9e, \"gbps\": %.4f}%s\n", name, med / 1e3,
         ms[0] / 1e3, n / (med / 1e3) / 1e9, last ? "" : ",");
}

int main(int argc, char **argv) {
  size_t n = argc > 1 ? strtoull(argv[1], NULL, 0) : (size_t)256 << 20;
  int reps = argc > 2 ? atoi(argv[2]) : 30, warm = 3;
  if (n == 0 || reps < 1 || reps > 100000) {
    fprintf(stderr, "usage: bwcheck [nbytes>0] [reps 1..100000]\n");
    return 2;
  }
  void *h, *d;
  cudaStream_t s;
  float *ms = (float *)malloc(sizeof(float) * reps);
  struct cudaDeviceProp prop;
  int rt, drv;
  CK(cudaGetDeviceProperties(&prop, 0));
  CK(cudaRuntimeGetVersion(&rt));
  CK(cudaDriverGetVersion(&drv));
  CK(cudaHostAlloc(&h, n, cudaHostAllocDefault));
  CK(cudaMalloc(&d, n));
  memset(h, 0xA5, n);
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  printf("{\n  \"tool\": \"bwcheck\", \"device\": \"%s\", \"cuda_runtime\": %d, \"cuda_driver\": %d,\n",
         prop.name, rt, drv);
  printf("  \"nbytes\": %zu, \"reps\": %d, \"warmup\": %d, \"host\": \"cudaHostAlloc\",\n", n, reps, warm);
  time_copies(d, h, n, cudaMemcpyHostToDevice, warm, reps, s, ms);
  print_stats("h2d", n, ms, reps, 0);
  time_copies(h, d, n, cudaMemcpyDeviceToHost, warm, reps, s, ms);
  print_stats("d2h", n, ms, reps, 1);
  printf("}\n");
  CK(cudaStreamDestroy(s));
  CK(cudaFree(d));
  CK(cudaFreeHost(h));
  free(ms);
  return 0;
}
