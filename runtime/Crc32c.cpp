//===- Crc32c.cpp - CRC-32C of checkpoint tensors -------------------------===//

#include "runtime/Crc32c.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <nmmintrin.h>
#endif
#include <cstdio>
#include <cstring>

using namespace cleave::runtime;

namespace {

/// The reflected Castagnoli polynomial.
constexpr uint32_t kPolynomial = 0x82f63b78;

struct Table {
  uint32_t entries[256];
  Table() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = c & 1 ? (c >> 1) ^ kPolynomial : c >> 1;
      entries[i] = c;
    }
  }
};

uint32_t softwareUpdate(uint32_t crc, const uint8_t *p, size_t size) {
  static const Table table;
  for (; size; --size, ++p)
    crc = table.entries[(crc ^ *p) & 0xff] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t
hardwareUpdate(uint32_t crc, const uint8_t *p, size_t size) {
  uint64_t c = crc;
  for (; size >= 8; size -= 8, p += 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
  }
  uint32_t c32 = uint32_t(c);
  for (; size; --size, ++p)
    c32 = _mm_crc32_u8(c32, *p);
  return c32;
}
#endif

} // namespace

bool Crc32c::hardwareAvailable() {
#if defined(__x86_64__)
  unsigned a, b, c, d;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 20));
#else
  return false;
#endif
}

Crc32c::Crc32c(bool allowHardware) {
  static const bool available = hardwareAvailable();
  hardware_ = allowHardware && available;
}

void Crc32c::update(const void *data, size_t size) {
  const uint8_t *p = static_cast<const uint8_t *>(data);
#if defined(__x86_64__)
  if (hardware_) {
    crc_ = hardwareUpdate(crc_, p, size);
    return;
  }
#endif
  crc_ = softwareUpdate(crc_, p, size);
}

std::string Crc32c::hexDigest() const {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", value());
  return buf;
}
