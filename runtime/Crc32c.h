//===- Crc32c.h - CRC-32C of checkpoint tensors ----------------*- C++ -*-===//
//
// CRC-32C (Castagnoli, the iSCSI and ext4 checksum), fed in pieces. A
// checkpoint's manifest gives each tensor's bytes one, so that a reader of
// one tensor of a rank file (resharding) checks what it read without
// hashing the whole file; the file as a whole has its SHA-256. With SSE4.2
// the crc32 instruction computes it at several GB/s (a fifth of a SHA-256
// pass); elsewhere a table.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_CRC32C_H
#define CLEAVE_RUNTIME_CRC32C_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace cleave::runtime {

class Crc32c {
public:
  /// `allowHardware` false: the table even where the instruction exists
  /// (tests compare the two).
  explicit Crc32c(bool allowHardware = true);
  /// Whether this CPU has the crc32 instruction (SSE4.2).
  static bool hardwareAvailable();
  void update(const void *data, size_t size);
  uint32_t value() const { return ~crc_; }
  /// The checksum as 8 lowercase hex digits.
  std::string hexDigest() const;

private:
  bool hardware_ = false;
  uint32_t crc_ = ~0u;
};

} // namespace cleave::runtime

#endif // CLEAVE_RUNTIME_CRC32C_H
