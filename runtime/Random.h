//===- Random.h - the counter-based random streams of a run -----*- C++ -*-===//
//
// Every random number Cleave draws is a pure function of a key and a
// counter (no generator state): splitmix64 (Steele, Lea and Flood 2014,
// the finalizer of java.util.SplittableRandom) of the key xor the mixed
// counter, its top 53 bits as a double in (0, 1). The key mixes the run's
// seed with the stream's name (fnv1a64). So a value depends on which
// element it is, never on which rank draws it or in which order: the
// parameter initialization (Parameters.cpp, Executor.h) and dropout's
// mask (ops/DropoutStream.h, docs/dropout.md) are reproducible across
// layouts. Header only, callable from CUDA device code too.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_RANDOM_H
#define CLEAVE_RUNTIME_RANDOM_H

#include <cstdint>
#include <string>

#if defined(__CUDACC__)
#define CLEAVE_HOST_DEVICE __host__ __device__
#else
#define CLEAVE_HOST_DEVICE
#endif

namespace cleave::runtime {

/// splitmix64's output function of state `z` (one step of the generator).
CLEAVE_HOST_DEVICE inline uint64_t splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// FNV-1a, 64 bits: a stream's name as a number.
inline uint64_t fnv1a64(const std::string &s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

/// The key of stream `name` under `seed`.
inline uint64_t streamKey(uint64_t seed, const std::string &name) {
  return splitmix64(seed ^ fnv1a64(name));
}

/// Draw `counter` of the stream keyed `key`: uniform in (0, 1),
/// ((splitmix64(key ^ splitmix64(counter)) >> 11) + 0.5) / 2^53.
CLEAVE_HOST_DEVICE inline double uniform53(uint64_t key, uint64_t counter) {
  return (double(splitmix64(key ^ splitmix64(counter)) >> 11) + 0.5) *
         0x1.0p-53;
}

} // namespace cleave::runtime

#endif // CLEAVE_RUNTIME_RANDOM_H
