//===- Sha256.h - SHA-256 of checkpoint files ------------------*- C++ -*-===//
//
// FIPS 180-4 SHA-256, fed in pieces, so a checkpoint file is hashed as it is
// written or read (one pass over its bytes). The runtime links no crypto
// library; this is the plain algorithm.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_SHA256_H
#define CLEAVE_RUNTIME_SHA256_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace cleave::runtime {

class Sha256 {
public:
  Sha256();
  void update(const void *data, size_t size);
  /// The digest as 64 lowercase hex digits; the hasher is spent after it.
  std::string hexDigest();

private:
  void block(const uint8_t *p);
  uint32_t state_[8];
  uint8_t pending_[64];
  size_t pendingSize_ = 0;
  uint64_t totalBytes_ = 0;
};

} // namespace cleave::runtime

#endif // CLEAVE_RUNTIME_SHA256_H
