// bwcheck: an independent C/CUDA measurement of pinned host<->device copy bandwidth.
//
// The course's Python helpers time copies with CUDA events through CuPy; this program does
// the same job with the CUDA runtime directly, so the two can be compared in one run
// (`make bwcheck`, and the recorder's crosscheck.bwcheck experiment). It prints one JSON
// object on stdout.
//
//   bwcheck [nbytes=268435456] [reps=30]      large pinned copies, bandwidth
//   bwcheck --small [reps=200]                small pinned copies (4 B .. 4 KiB), device time
//
// --small times each size two ways, as helpers/copy_engines.py and helpers/transfers.py do:
// isolated (event, copy, event, wait; median of reps) and gated (a kernel spins on a flag in
// mapped pinned memory while `reps` copies are enqueued between events, as NVIDIA's
// nvbandwidth does; the spin gives up after a timeout so nothing can hang). It also reports
// the host-side time of each cudaMemcpyAsync call made while the stream is gated.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GATE_TIMEOUT_NS 5000000000ULL  // 5 s: the gate opens by itself after this

// Hold the stream until the host sets flag[0]; give up (and set flag[1]) after timeout_ns.
__global__ void gate_kernel(volatile int *flag, unsigned long long timeout_ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  while (flag[0] == 0) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start > timeout_ns) {
      flag[1] = 1;
      __threadfence_system();
      return;
    }
  }
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

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

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median_d(double *v, int k) {
  qsort(v, k, sizeof(double), cmp_double);
  return k % 2 ? v[k / 2] : 0.5 * (v[k / 2 - 1] + v[k / 2]);
}

// Small pinned copies: isolated and gated device time, and gated enqueue time, per size.
static int small_mode(int reps) {
  static const size_t sizes[] = {4, 64, 1024, 4096};
  const int nsizes = sizeof(sizes) / sizeof(sizes[0]), warm = 3;
  void *h, *d;
  int *flag, *flag_dev;
  cudaStream_t s;
  struct cudaDeviceProp prop;
  float *ms = (float *)malloc(sizeof(float) * reps);
  double *dev_s = (double *)malloc(sizeof(double) * reps), *enq_s = (double *)malloc(sizeof(double) * reps);
  cudaEvent_t *ev = (cudaEvent_t *)malloc(sizeof(cudaEvent_t) * (reps + 1));
  CK(cudaGetDeviceProperties(&prop, 0));
  CK(cudaHostAlloc(&h, 4096, cudaHostAllocDefault));
  CK(cudaMalloc(&d, 4096));
  CK(cudaHostAlloc((void **)&flag, 2 * sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
  CK(cudaHostGetDevicePointer((void **)&flag_dev, flag, 0));
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int i = 0; i <= reps; i++) CK(cudaEventCreate(&ev[i]));
  printf("{\n  \"tool\": \"bwcheck\", \"mode\": \"small\", \"device\": \"%s\", \"reps\": %d, \"host\": \"cudaHostAlloc\",\n",
         prop.name, reps);
  for (int dir = 0; dir < 2; dir++) {
    cudaMemcpyKind kind = dir == 0 ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    void *dst = dir == 0 ? d : h, *src = dir == 0 ? h : d;
    printf("  \"%s\": {", dir == 0 ? "h2d" : "d2h");
    for (int k = 0; k < nsizes; k++) {
      size_t n = sizes[k];
      time_copies(dst, src, n, kind, warm, reps, s, ms);  // isolated
      qsort(ms, reps, sizeof(float), cmp_float);
      double iso = (reps % 2 ? ms[reps / 2] : 0.5 * (ms[reps / 2 - 1] + ms[reps / 2])) / 1e3;
      flag[0] = flag[1] = 0;  // gated
      gate_kernel<<<1, 1, 0, s>>>(flag_dev, GATE_TIMEOUT_NS);
      CK(cudaGetLastError());
      CK(cudaEventRecord(ev[0], s));
      for (int i = 0; i < reps; i++) {
        double t = now_s();
        CK(cudaMemcpyAsync(dst, src, n, kind, s));
        enq_s[i] = now_s() - t;
        CK(cudaEventRecord(ev[i + 1], s));
      }
      int held = cudaEventQuery(ev[reps]) == cudaErrorNotReady;
      *(volatile int *)flag = 1;
      CK(cudaEventSynchronize(ev[reps]));
      if (flag[1]) {
        fprintf(stderr, "bwcheck: the gate timed out before it was released; gated timings invalid\n");
        return 3;
      }
      float span_ms;
      for (int i = 0; i < reps; i++) {
        CK(cudaEventElapsedTime(&ms[i], ev[i], ev[i + 1]));
        dev_s[i] = ms[i] / 1e3;
      }
      CK(cudaEventElapsedTime(&span_ms, ev[0], ev[reps]));
      printf("%s\n    \"%zu\": {\"isolated_median_s\": %.6e, \"gated_median_s\": %.6e, "
             "\"gated_per_copy_s\": %.6e, \"enqueue_median_s\": %.6e, \"gate_held\": %s}",
             k ? "," : "", n, iso, median_d(dev_s, reps), span_ms / 1e3 / reps, median_d(enq_s, reps),
             held ? "true" : "false");
    }
    printf("\n  }%s\n", dir == 0 ? "," : "");
  }
  printf("}\n");
  for (int i = 0; i <= reps; i++) CK(cudaEventDestroy(ev[i]));
  CK(cudaStreamDestroy(s));
  CK(cudaFreeHost(flag));
  CK(cudaFree(d));
  CK(cudaFreeHost(h));
  free(ms);
  free(dev_s);
  free(enq_s);
  free(ev);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--small") == 0) {
    int reps = argc > 2 ? atoi(argv[2]) : 200;
    if (reps < 1 || reps > 2000) {
      fprintf(stderr, "usage: bwcheck --small [reps 1..2000]\n");
      return 2;
    }
    return small_mode(reps);
  }
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
