// chain.h: the pointer-chasing chains of helpers/measure/gpu_chase.py, in plain C.
//
// Slot k of a buffer starts at element k * SLOT_BYTES / 8. Trial t uses the slots with
// k % parts == t, visited in the order of splitmix64(k + (t << 40)) (ascending; splitmix64 is a
// bijection, so there are no ties), as one cycle: each used slot holds the element index of the
// next. gpu_chase.chain_order computes the same order with NumPy, so the course and bwcheck
// chase the same chains; tests/ch03_dma_and_copy_engines compiles this header with gcc and
// compares the orders. No CUDA here, so it builds with any C compiler.
#ifndef BWCHECK_CHAIN_H
#define BWCHECK_CHAIN_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SLOT_BYTES 256
#define CHASE_PARTS 3
#define CHAIN_HEAD 4           // slots per trial reported as the chain's fingerprint
#define SEED_SHIFT 40
#define L2_MULTIPLE 4          // the device chain's buffer is at least this many L2s
#define FLUSH_MULTIPLE 2       // this many L2s of other memory are written before each trial
#define MIN_DEVICE_BYTES ((size_t)64 << 20)

static uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

struct keyed_slot {
  uint64_t key;
  long long slot;
};

static int cmp_keyed(const void *a, const void *b) {
  uint64_t x = ((const struct keyed_slot *)a)->key, y = ((const struct keyed_slot *)b)->key;
  return (x > y) - (x < y);
}

// The smallest power of two >= L2_MULTIPLE * l2 bytes, at least MIN_DEVICE_BYTES.
static size_t device_chain_bytes(size_t l2) {
  size_t want = L2_MULTIPLE * l2 > MIN_DEVICE_BYTES ? L2_MULTIPLE * l2 : MIN_DEVICE_BYTES, n = 1;
  while (n < want) n <<= 1;
  return n;
}

// Trial `part`'s slots in visiting order; *count gets how many. The caller frees the result.
static long long *chain_order(size_t nbytes, int part, int parts, size_t *count) {
  size_t nslots = 0, total = nbytes / SLOT_BYTES;
  for (size_t k = part; k < total; k += parts) nslots++;
  struct keyed_slot *ks = (struct keyed_slot *)malloc(sizeof(*ks) * (nslots ? nslots : 1));
  long long *order = (long long *)malloc(sizeof(long long) * (nslots ? nslots : 1));
  if (!ks || !order) {
    free(ks);
    free(order);
    *count = 0;
    return NULL;
  }
  for (size_t i = 0; i < nslots; i++) {
    ks[i].slot = part + (long long)i * parts;
    ks[i].key = splitmix64((uint64_t)ks[i].slot + ((uint64_t)part << SEED_SHIFT));
  }
  qsort(ks, nslots, sizeof(*ks), cmp_keyed);
  for (size_t i = 0; i < nslots; i++) order[i] = ks[i].slot;
  free(ks);
  *count = nslots;
  return order;
}

// Write all CHASE_PARTS chains into `chain` (nbytes, zeroed by the caller); starts[t] and the
// first CHAIN_HEAD slots of each trial (head[t][i]) are filled in. Returns 0, or -1 if out of memory.
static int build_chains(long long *chain, size_t nbytes, long long starts[CHASE_PARTS],
                        long long head[CHASE_PARTS][CHAIN_HEAD]) {
  const size_t per = SLOT_BYTES / sizeof(long long);
  for (int t = 0; t < CHASE_PARTS; t++) {
    size_t n;
    long long *order = chain_order(nbytes, t, CHASE_PARTS, &n);
    if (!order || n < 2) {
      free(order);
      return -1;
    }
    for (size_t i = 0; i < n; i++) chain[order[i] * per] = order[(i + 1) % n] * (long long)per;
    starts[t] = order[0] * (long long)per;
    for (int i = 0; i < CHAIN_HEAD; i++) head[t][i] = i < (int)n ? order[i] : -1;
    free(order);
  }
  return 0;
}

#endif
