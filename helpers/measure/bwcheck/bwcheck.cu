// bwcheck: an independent C/CUDA measurement of pinned host<->device copy bandwidth.
//
// The course's Python helpers time copies with CUDA events through CuPy; this program does
// the same job with the CUDA runtime directly, so the two can be compared in one run
// (`make bwcheck`, and the recorder's crosscheck.bwcheck experiment). It prints one JSON
// object on stdout.
//
//   bwcheck [nbytes=268435456] [reps=30]      large pinned copies, bandwidth
//   bwcheck --small [reps=200]                small pinned copies (4 B .. 4 KiB), device time
//   bwcheck --latency [dev] [steps] [host]    one thread chasing pointers from every SM in turn: ns
//                                             per read over mapped pinned host memory (host bytes,
//                                             128 MiB) and over device memory (dev bytes; 0 = at
//                                             least 4 x the L2), the mean over the SMs
//   bwcheck --smcopy [nbytes] [reps] [blocks] a grid-stride kernel copying through mapped pinned
//                                             host memory (SM copies), GB/s both directions
//
// --latency chases exactly the chains of helpers/measure/gpu_chase.py (chain.h: slots 256 B apart,
// visited in splitmix64 order, 3 trials on disjoint slots, the L2 flushed before each trial by
// writing 2 x L2 of other memory) and, from every SM in turn (a grid of one single-thread block per
// SM, only block `sm` chasing, as nvbandwidth's host_device_latency_sm), times runs of `steps` and
// 2*`steps` reads: the difference over `steps` is that SM's ns per read, and a trial's figure is the
// mean over the SMs. Indices are read as unsigned, as the course's uint64 chain. It prints each trial's first slots (order_head) so the course can check
// that both sides chased the same chains. --smcopy is the kernel of helpers/ch03_dma_and_copy_engines/engine_vs_sm.py
// (8-byte elements, grid-stride loop, `blocks` x 256 threads), timed with events.
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

#include "chain.h"

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

__global__ void chase_kernel(const unsigned long long *nxt, unsigned long long j, long long n,
                             unsigned long long *out, int sm) {
  if ((int)blockIdx.x != sm) return;
  for (long long i = 0; i < n; i++) j = nxt[j];
  *out = j;
}

__global__ void copy_kernel(unsigned long long *dst, const unsigned long long *src, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    dst[i] = src[i];
}

// The L2 flush of gpu_chase.flush_l2: a grid-stride int64 fill of other memory, 264 x 256 threads.
__global__ void fill_kernel(long long *a, size_t n, long long v) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    a[i] = v;
}

static void flush_l2(long long *scratch, size_t nbytes, long long v) {
  if (!nbytes) return;
  fill_kernel<<<264, 256>>>(scratch, nbytes / sizeof(long long), v);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
}

// Reads one trial may make: a 1-read warm-up, then runs of steps and 2*steps from each SM.
static long long reads_per_trial(long long steps, int sms) { return 1 + 3 * steps * (long long)sms; }

// ns per read over `nxt` (a device-visible pointer), the mean over the SMs, as the course does: a
// 1-read warm-up, then from each SM runs of steps and 2*steps, each going on where the last stopped.
static double chase_ns(const long long *nxt, long long start, long long steps, int sms,
                       unsigned long long *out_dev, unsigned long long *out_host) {
  const unsigned long long *u = (const unsigned long long *)nxt;
  cudaEvent_t a, b;
  float ms[2];
  double sum = 0;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  chase_kernel<<<sms, 1>>>(u, (unsigned long long)start, 1, out_dev, 0);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  for (int sm = 0; sm < sms; sm++) {
    long long runs[2] = {steps, 2 * steps};
    for (int r = 0; r < 2; r++) {
      unsigned long long j = *(volatile unsigned long long *)out_host;
      CK(cudaEventRecord(a, 0));
      chase_kernel<<<sms, 1>>>(u, j, runs[r], out_dev, sm);
      CK(cudaGetLastError());
      CK(cudaEventRecord(b, 0));
      CK(cudaEventSynchronize(b));
      CK(cudaEventElapsedTime(&ms[r], a, b));
    }
    sum += (ms[1] - ms[0]) * 1e6 / steps;
  }
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return sum / sms;
}

static void print_head(const char *name, long long head[CHASE_PARTS][CHAIN_HEAD], const char *end) {
  printf("\"%s\": [", name);
  for (int t = 0; t < CHASE_PARTS; t++) {
    printf("%s[", t ? ", " : "");
    for (int i = 0; i < CHAIN_HEAD; i++) printf("%s%lld", i ? ", " : "", head[t][i]);
    printf("]");
  }
  printf("]%s", end);
}

// Host chains (mapped pinned, host_bytes) first, then device chains (dev_bytes), as
// gpu_chase.chase_trials runs them: all trials' chains built once, the L2 flushed before each trial.
static int latency_mode(size_t dev_bytes, long long steps, size_t host_bytes) {
  long long *host, *host_dev, *dev, *scratch = NULL, *chain;
  unsigned long long *out, *out_dev;
  long long starts[CHASE_PARTS], host_head[CHASE_PARTS][CHAIN_HEAD], dev_head[CHASE_PARTS][CHAIN_HEAD];
  double host_ns[CHASE_PARTS], dev_ns[CHASE_PARTS];
  struct cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  size_t l2 = (size_t)prop.l2CacheSize, flush = FLUSH_MULTIPLE * l2;
  int sms = prop.multiProcessorCount;
  if (!dev_bytes) dev_bytes = device_chain_bytes(l2);
  // no slot read twice in a trial, by any SM (gpu_chase.check_chain)
  if (reads_per_trial(steps, sms) > (long long)(dev_bytes / SLOT_BYTES / CHASE_PARTS) ||
      reads_per_trial(steps, sms) > (long long)(host_bytes / SLOT_BYTES / CHASE_PARTS)) {
    fprintf(stderr, "bwcheck: %lld steps from %d SMs need longer chains than %zu / %zu bytes\n", steps, sms,
            dev_bytes, host_bytes);
    return 2;
  }
  CK(cudaHostAlloc((void **)&out, sizeof(unsigned long long), cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer((void **)&out_dev, out, 0));
  if (flush) CK(cudaMalloc((void **)&scratch, flush));
  CK(cudaHostAlloc((void **)&host, host_bytes, cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer((void **)&host_dev, host, 0));
  memset(host, 0, host_bytes);
  if (build_chains(host, host_bytes, starts, host_head)) return 1;
  for (int t = 0; t < CHASE_PARTS; t++) {
    flush_l2(scratch, flush, t);
    host_ns[t] = chase_ns(host_dev, starts[t], steps, sms, out_dev, out);
  }
  CK(cudaFreeHost(host));
  chain = (long long *)calloc(dev_bytes / sizeof(long long), sizeof(long long));
  if (!chain || build_chains(chain, dev_bytes, starts, dev_head)) return 1;
  CK(cudaMalloc((void **)&dev, dev_bytes));
  CK(cudaMemcpy(dev, chain, dev_bytes, cudaMemcpyHostToDevice));
  free(chain);
  for (int t = 0; t < CHASE_PARTS; t++) {
    flush_l2(scratch, flush, t);
    dev_ns[t] = chase_ns(dev, starts[t], steps, sms, out_dev, out);
  }
  printf("{\n  \"tool\": \"bwcheck\", \"mode\": \"latency\", \"device\": \"%s\", \"l2_bytes\": %zu, \"flush_bytes\": %zu,\n",
         prop.name, l2, flush);
  printf("  \"host_nbytes\": %zu, \"device_nbytes\": %zu, \"steps\": %lld, \"slot_bytes\": %d, \"sms\": %d,\n",
         host_bytes, dev_bytes, steps, SLOT_BYTES, sms);
  printf("  \"host_ns\": [%.3f, %.3f, %.3f], \"device_ns\": [%.3f, %.3f, %.3f],\n  ", host_ns[0], host_ns[1],
         host_ns[2], dev_ns[0], dev_ns[1], dev_ns[2]);
  print_head("host_order_head", host_head, ", ");
  print_head("device_order_head", dev_head, ",\n");
  printf("  \"host_median_ns\": %.3f, \"device_median_ns\": %.3f\n}\n", median_d(host_ns, CHASE_PARTS),
         median_d(dev_ns, CHASE_PARTS));
  CK(cudaFree(dev));
  if (scratch) CK(cudaFree(scratch));
  CK(cudaFreeHost(out));
  return 0;
}

static int smcopy_mode(size_t nbytes, int reps, int blocks) {
  size_t items = nbytes / sizeof(unsigned long long);
  unsigned long long *host, *host_dev, *dev;
  float *ms = (float *)malloc(sizeof(float) * reps);
  cudaEvent_t a, b;
  struct cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  CK(cudaHostAlloc((void **)&host, nbytes, cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer((void **)&host_dev, host, 0));
  CK(cudaMalloc((void **)&dev, nbytes));
  memset(host, 0x5A, nbytes);
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  printf("{\n  \"tool\": \"bwcheck\", \"mode\": \"smcopy\", \"device\": \"%s\", \"nbytes\": %zu, \"reps\": %d, "
         "\"blocks\": %d, \"threads\": 256,\n", prop.name, nbytes, reps, blocks);
  for (int dir = 0; dir < 2; dir++) {
    unsigned long long *dst = dir == 0 ? dev : host_dev, *src = dir == 0 ? host_dev : dev;
    for (int i = 0; i <= reps; i++) {  // the first one warms up
      CK(cudaEventRecord(a, 0));
      copy_kernel<<<blocks, 256>>>(dst, src, items);
      CK(cudaGetLastError());
      CK(cudaEventRecord(b, 0));
      CK(cudaEventSynchronize(b));
      if (i) CK(cudaEventElapsedTime(&ms[i - 1], a, b));
    }
    print_stats(dir == 0 ? "h2d" : "d2h", nbytes, ms, reps, dir == 1);
  }
  printf("}\n");
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  CK(cudaFree(dev));
  CK(cudaFreeHost(host));
  free(ms);
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
  if (argc > 1 && strcmp(argv[1], "--latency") == 0) {
    size_t n = argc > 2 ? strtoull(argv[2], NULL, 0) : 0;  // 0: from the L2 size, as the course does
    long long steps = argc > 3 ? atoll(argv[3]) : 256;
    size_t host_n = argc > 4 ? strtoull(argv[4], NULL, 0) : (size_t)128 << 20;
    if ((n && n < SLOT_BYTES * 16) || host_n < SLOT_BYTES * 16 || steps < 1) {
      fprintf(stderr, "usage: bwcheck --latency [device nbytes, 0 = 4 x L2 rounded up to a power of two] [steps] "
                      "[host nbytes], with 1 + 3*steps*SMs <= nbytes/256/3 for both\n");
      return 2;
    }
    return latency_mode(n, steps, host_n);
  }
  if (argc > 1 && strcmp(argv[1], "--smcopy") == 0) {
    size_t n = argc > 2 ? strtoull(argv[2], NULL, 0) : (size_t)64 << 20;
    int reps = argc > 3 ? atoi(argv[3]) : 10, blocks = argc > 4 ? atoi(argv[4]) : 1056;
    if (n < 8 || n % 8 || reps < 1 || reps > 10000 || blocks < 1 || blocks > 65535) {
      fprintf(stderr, "usage: bwcheck --smcopy [nbytes, a multiple of 8] [reps 1..10000] [blocks 1..65535]\n");
      return 2;
    }
    return smcopy_mode(n, reps, blocks);
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
