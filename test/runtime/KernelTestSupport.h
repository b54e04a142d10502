//===- KernelTestSupport.h - tensors and references for kernel tests -*- C++
//-*-===//
//
// Owning tensors that read and write any element type as double, random
// fills, attribute builders, and numpy-broadcast indexing for the naive
// double-precision references the tests compare against.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_TEST_RUNTIME_KERNELTESTSUPPORT_H
#define CLEAVE_TEST_RUNTIME_KERNELTESTSUPPORT_H

#include "runtime/ops/KernelArgs.h"
#include "runtime/cpu/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace cleave::runtime::test {

using ops::Shape;

/// A tensor that owns its bytes.
struct Buf {
  DType dtype = DType::F32;
  Shape shape;
  std::vector<uint8_t> bytes;

  Buf() = default;
  Buf(DType dtype, Shape shape) : dtype(dtype), shape(std::move(shape)) {
    bytes.assign(size() * dtypeSize(dtype) + 1, 0); // never empty: data != null
  }
  int64_t size() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  TensorRef ref() const {
    TensorRef t;
    t.data = const_cast<uint8_t *>(bytes.data());
    t.shape = shape;
    t.dtype = dtype;
    return t;
  }
  template <typename T> T *as() { return reinterpret_cast<T *>(bytes.data()); }
  template <typename T> const T *as() const {
    return reinterpret_cast<const T *>(bytes.data());
  }

  double at(int64_t i) const {
    switch (dtype) {
    case DType::F32:
      return as<float>()[i];
    case DType::F64:
      return as<double>()[i];
    case DType::F16:
      return ops::halfToFloat(as<ops::Half>()[i]);
    case DType::BF16:
      return ops::bf16ToFloat(as<ops::BFloat16>()[i]);
    case DType::I64:
      return double(as<int64_t>()[i]);
    case DType::I32:
      return as<int32_t>()[i];
    case DType::I16:
      return as<int16_t>()[i];
    case DType::I8:
      return as<int8_t>()[i];
    case DType::U8:
      return as<uint8_t>()[i];
    case DType::U16:
      return as<uint16_t>()[i];
    case DType::U32:
      return as<uint32_t>()[i];
    case DType::U64:
      return double(as<uint64_t>()[i]);
    case DType::Bool:
      return as<uint8_t>()[i] != 0;
    default:
      return 0;
    }
  }
  int64_t intAt(int64_t i) const {
    switch (dtype) {
    case DType::I64:
      return as<int64_t>()[i];
    case DType::U64:
      return int64_t(as<uint64_t>()[i]);
    default:
      return int64_t(at(i));
    }
  }
  void set(int64_t i, double v) {
    switch (dtype) {
    case DType::F32:
      as<float>()[i] = float(v);
      break;
    case DType::F64:
      as<double>()[i] = v;
      break;
    case DType::F16:
      as<ops::Half>()[i] = ops::floatToHalf(float(v));
      break;
    case DType::BF16:
      as<ops::BFloat16>()[i] = ops::floatToBf16(float(v));
      break;
    case DType::I64:
      as<int64_t>()[i] = int64_t(v);
      break;
    case DType::I32:
      as<int32_t>()[i] = int32_t(v);
      break;
    case DType::I16:
      as<int16_t>()[i] = int16_t(v);
      break;
    case DType::I8:
      as<int8_t>()[i] = int8_t(v);
      break;
    case DType::U8:
      as<uint8_t>()[i] = uint8_t(v);
      break;
    case DType::U16:
      as<uint16_t>()[i] = uint16_t(v);
      break;
    case DType::U32:
      as<uint32_t>()[i] = uint32_t(v);
      break;
    case DType::U64:
      as<uint64_t>()[i] = uint64_t(v);
      break;
    case DType::Bool:
      as<uint8_t>()[i] = v != 0;
      break;
    default:
      break;
    }
  }
};

inline Buf make(DType dtype, Shape shape,
                const std::vector<double> &values = {}) {
  Buf b(dtype, std::move(shape));
  for (size_t i = 0; i < values.size() && int64_t(i) < b.size(); ++i)
    b.set(int64_t(i), values[i]);
  return b;
}

/// Uniform values in [lo, hi), integral for integer types; fixed seed.
inline Buf random(DType dtype, Shape shape, double lo = -2, double hi = 2,
                  unsigned seed = 1) {
  Buf b(dtype, std::move(shape));
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  bool integral = !(dtype == DType::F32 || dtype == DType::F64 ||
                    dtype == DType::F16 || dtype == DType::BF16);
  for (int64_t i = 0; i < b.size(); ++i) {
    double v = dist(gen);
    b.set(i, integral ? std::floor(v) : v);
  }
  return b;
}

inline AttrValue intA(int64_t v) {
  AttrValue a;
  a.kind = AttrValue::Kind::Int;
  a.i = v;
  return a;
}
inline AttrValue floatA(double v) {
  AttrValue a;
  a.kind = AttrValue::Kind::Float;
  a.f = v;
  return a;
}
inline AttrValue stringA(std::string v) {
  AttrValue a;
  a.kind = AttrValue::Kind::String;
  a.s = std::move(v);
  return a;
}
inline AttrValue intsA(std::vector<int64_t> v) {
  AttrValue a;
  a.kind = AttrValue::Kind::Ints;
  a.ints = std::move(v);
  return a;
}

/// An absent optional operand.
inline const Buf &absent() {
  static const Buf none;
  return none;
}

inline Status run(const std::string &op, const Attributes &attrs,
                  const std::vector<const Buf *> &inputs, Buf &out) {
  std::vector<TensorRef> ins;
  for (const Buf *b : inputs)
    ins.push_back(b == &absent() ? TensorRef() : b->ref());
  return runCpuKernel(op, attrs, ins, {out.ref()});
}

/// Runs and expects success.
#define RUN_OK(...)                                                            \
  do {                                                                         \
    Status s_ = run(__VA_ARGS__);                                              \
    ASSERT_TRUE(s_.isOk()) << s_.message();                                    \
  } while (0)

/// Runs and expects an error containing `text`.
#define RUN_ERROR(text, ...)                                                   \
  do {                                                                         \
    Status s_ = run(__VA_ARGS__);                                              \
    ASSERT_FALSE(s_.isOk());                                                   \
    EXPECT_NE(s_.message().find(text), std::string::npos) << s_.message();     \
  } while (0)

/// The flat index into a tensor of shape `in` broadcast to `out` for
/// result element `flat`.
inline int64_t broadcastIndex(const Shape &in, const Shape &out, int64_t flat) {
  int64_t index = 0, stride = 1;
  for (int64_t d = int64_t(out.size()) - 1, k = int64_t(in.size()) - 1; d >= 0;
       --d, --k) {
    int64_t i = flat % out[d];
    flat /= out[d];
    if (k >= 0) {
      if (in[k] != 1)
        index += i * stride;
      stride *= in[k];
    }
  }
  return index;
}

/// Multi-index of `flat` in `shape`.
inline std::vector<int64_t> unflatten(const Shape &shape, int64_t flat) {
  std::vector<int64_t> idx(shape.size());
  for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}
inline int64_t flatten(const Shape &shape, const std::vector<int64_t> &idx) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    flat = flat * shape[d] + idx[d];
  return flat;
}

/// Tolerance for comparing a result of element type `dtype` with a double
/// reference.
inline double relTol(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return 1e-5;
  case DType::F16:
    return 2e-3;
  case DType::BF16:
    return 1.6e-2;
  case DType::F64:
    return 1e-12;
  default:
    return 0;
  }
}

inline ::testing::AssertionResult near(double got, double want, double rel,
                                       double abs) {
  if (std::isnan(want) && std::isnan(got))
    return ::testing::AssertionSuccess();
  if (std::isinf(want) && got == want)
    return ::testing::AssertionSuccess();
  if (std::fabs(got - want) <= abs + rel * std::fabs(want))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "got " << got << ", expected " << want << " (diff "
         << std::fabs(got - want) << ")";
}

/// Compares every element of `out` with `want`.
inline void expectAll(const Buf &out, const std::vector<double> &want,
                      double rel = -1, double abs = -1) {
  if (rel < 0)
    rel = relTol(out.dtype);
  if (abs < 0)
    abs = rel * 0.1;
  ASSERT_EQ(out.size(), int64_t(want.size()));
  int failures = 0;
  for (int64_t i = 0; i < out.size() && failures < 5; ++i) {
    auto r = near(out.at(i), want[i], rel, abs);
    if (!r) {
      ADD_FAILURE() << "element " << i << ": " << r.message();
      ++failures;
    }
  }
}

/// Values of a tensor as doubles.
inline std::vector<double> values(const Buf &b) {
  std::vector<double> v(b.size());
  for (int64_t i = 0; i < b.size(); ++i)
    v[i] = b.at(i);
  return v;
}

} // namespace cleave::runtime::test

#endif // CLEAVE_TEST_RUNTIME_KERNELTESTSUPPORT_H
