//===- ElementTypes.h - the element types as host code reads them - C++ -*-===//
//
// IEEE binary16 and bfloat16 stored as their bits, their conversions to and
// from float (round-to-nearest-even), and the type each storage type is
// computed in. Backend-neutral: the CPU kernels compute with them, the CUDA
// backend's host code and tests convert with them, the communicator reduces
// 16-bit buffers with them. Plain C++17: no MLIR, no OpenMP.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_OPS_ELEMENTTYPES_H
#define CLEAVE_RUNTIME_OPS_ELEMENTTYPES_H

#include <cstdint>
#include <cstring>
#include <type_traits>


/// For the scalar math helpers called in loops that must vectorize: GCC
/// otherwise keeps them out of line once a file has many callers.
#define CLEAVE_ALWAYS_INLINE inline __attribute__((always_inline))

namespace cleave::runtime::ops {


/// IEEE binary16 and bfloat16, stored as their bits. Kernels load them as
/// float and store with round-to-nearest-even.
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};
/// DType::Bool: one byte, 0 or 1 (any nonzero byte reads as true). It is
/// the same C++ type as U8's elements, so code that must tell the two apart
/// (cast) goes by the DType, not the type.
using Bool = uint8_t;

CLEAVE_ALWAYS_INLINE uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
CLEAVE_ALWAYS_INLINE float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float halfToFloat(Half h) {
  // F. Giesen's conversion: rebias the exponent, fix up Inf/NaN and
  // subnormals.
  const uint32_t shiftedExp = 0x7c00u << 13;
  uint32_t o = (uint32_t(h.bits) & 0x7fffu) << 13;
  uint32_t exp = shiftedExp & o;
  o += (127 - 15) << 23;
  float f;
  if (exp == shiftedExp) {
    o += (128 - 16) << 23;
    f = bitsFloat(o);
  } else if (exp == 0) {
    o += 1 << 23;
    f = bitsFloat(o) - bitsFloat(113u << 23);
  } else {
    f = bitsFloat(o);
  }
  return bitsFloat(floatBits(f) | ((uint32_t(h.bits) & 0x8000u) << 16));
}

inline Half floatToHalf(float value) {
  uint32_t f = floatBits(value);
  uint32_t sign = f & 0x80000000u;
  f ^= sign;
  uint16_t o;
  if (f >= (127u + 16) << 23) { // Inf, NaN or too large: Inf
    o = f > (255u << 23) ? 0x7e00 : 0x7c00;
  } else if (f < 113u << 23) { // a subnormal half or zero
    const uint32_t magic = ((127 - 15) + (23 - 10) + 1) << 23;
    o = uint16_t(floatBits(bitsFloat(f) + bitsFloat(magic)) - magic);
  } else {
    uint32_t mantissaOdd = (f >> 13) & 1;
    f += (uint32_t(15 - 127) << 23) + 0xfff + mantissaOdd;
    o = uint16_t(f >> 13);
  }
  return Half{uint16_t(o | (sign >> 16))};
}

inline float bf16ToFloat(BFloat16 b) {
  return bitsFloat(uint32_t(b.bits) << 16);
}

inline BFloat16 floatToBf16(float value) {
  uint32_t u = floatBits(value);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return BFloat16{uint16_t((u >> 16) | 0x40)}; // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1);
  return BFloat16{uint16_t(u >> 16)};
}

/// The type a kernel computes in for storage type T.
template <typename T> struct ComputeOf { using type = T; };
template <> struct ComputeOf<Half> { using type = float; };
template <> struct ComputeOf<BFloat16> { using type = float; };
template <typename T> using Compute = typename ComputeOf<T>::type;

template <typename T> inline Compute<T> load(T v) { return v; }
template <> inline float load<Half>(Half v) { return halfToFloat(v); }
template <> inline float load<BFloat16>(BFloat16 v) { return bf16ToFloat(v); }

template <typename T> inline T store(Compute<T> v) { return v; }
template <> inline Half store<Half>(float v) { return floatToHalf(v); }
template <> inline BFloat16 store<BFloat16>(float v) { return floatToBf16(v); }

template <typename T> constexpr bool isFloating() {
  return std::is_floating_point_v<T> || std::is_same_v<T, Half> ||
         std::is_same_v<T, BFloat16>;
}

} // namespace cleave::runtime::ops

#endif // CLEAVE_RUNTIME_OPS_ELEMENTTYPES_H
