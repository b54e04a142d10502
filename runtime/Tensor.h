//===- Tensor.h - element types and tensor views of the runtime -*- C++ -*-===//
//
// A TensorRef is a view: the memory belongs to an arena of the executor.
// DType numbers are those of runtime/program.proto.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_TENSOR_H
#define CLEAVE_RUNTIME_TENSOR_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cleave::runtime {

enum class DType : int {
  Undefined = 0,
  F32 = 1,
  F16 = 2,
  BF16 = 3,
  F64 = 4,
  I64 = 5,
  I32 = 6,
  I16 = 7,
  I8 = 8,
  U8 = 9,
  Bool = 10, // one byte per element, 0 or 1
  U16 = 11,
  U32 = 12,
  U64 = 13,
};

/// Bytes per element; 0 for Undefined.
size_t dtypeSize(DType dtype);
const char *dtypeName(DType dtype);

/// Element `i` of `data`, of element type `dtype`, as a double (16-bit
/// floats widened; NaN for Undefined).
double loadElement(const void *data, DType dtype, int64_t i);
/// Stores `v` as element `i` of `data`: floats rounded to the type
/// (16-bit ones to nearest even through float), integers converted as C
/// converts a double.
void storeElement(void *data, DType dtype, int64_t i, double v);

struct TensorRef {
  void *data = nullptr; // null: an absent optional operand
  std::vector<int64_t> shape;
  DType dtype = DType::Undefined;

  int64_t numElements() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  size_t sizeBytes() const { return numElements() * dtypeSize(dtype); }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  template <typename T> T *as() const { return static_cast<T *>(data); }
};

} // namespace cleave::runtime

#endif // CLEAVE_RUNTIME_TENSOR_H
