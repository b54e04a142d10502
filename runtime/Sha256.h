//===- Sha256.h - SHA-256 of checkpoint files ------------------*- C++ -*-===//
//
// FIPS 180-4 SHA-256, fed in pieces, so a checkpoint file is hashed as it is
// written or read (one pass over its bytes). The runtime links no crypto
// library: this is the plain algorithm, and on x86 CPUs with the SHA
// extensions the same rounds with their instructions (about 5x faster:
// hashing is most of a checkpoint's save time otherwise).
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
  /// `allowHardware` false: the portable rounds even where the SHA
  /// instructions exist (tests compare the two).
  explicit Sha256(bool allowHardware = true);
  /// Whether this CPU has the SHA instructions the fast path uses.
  static bool hardwareAvailable();
  void update(const void *data, size_t size);
  /// The digest as 64 lowercase hex digits; the hasher is spent after it.
  std::string hexDigest();

private:
  void block(const uint8_t *p);
  void blocks(const uint8_t *p, size_t count);
  bool hardware_ = false;
  uint32_t state_[8];
  uint8_t pending_[64];
  size_t pendingSize_ = 0;
  uint64_t totalBytes_ = 0;
};

} // namespace cleave::runtime

#endif // CLEAVE_RUNTIME_SHA256_H
