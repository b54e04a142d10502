//===- HostTensor.h - small tensors the frontend computes with -*- C++ -*-===//
//
// Traced ONNX exports compute shapes, masks and position tables from
// constants (Shape -> Gather -> Unsqueeze -> Concat -> Reshape, Range, Trilu,
// ...). The frontend evaluates those on the host while importing, so the IR
// it produces has static shapes and plain constants. A HostTensor is such a
// value: integers (and bools) as int64, floating point as double rounded to
// the tensor's own precision after every operation.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_FRONTEND_HOSTTENSOR_H
#define CLEAVE_FRONTEND_HOSTTENSOR_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <string>
#include <vector>

namespace cleave {

/// ONNX element types (onnx::TensorProto_DataType values), spelled out so
/// that this header does not pull in the protobuf headers.
enum class DType : int32_t {
  Undefined = 0,
  F32 = 1,
  U8 = 2,
  I8 = 3,
  U16 = 4,
  I16 = 5,
  I32 = 6,
  I64 = 7,
  String = 8,
  Bool = 9,
  F16 = 10,
  F64 = 11,
  U32 = 12,
  U64 = 13,
  BF16 = 16,
};

bool isFloat(DType t);
bool isSupported(DType t);
std::string dtypeName(DType t);

class HostTensor {
public:
  HostTensor() = default;
  HostTensor(DType dtype, llvm::ArrayRef<int64_t> shape);
  static HostTensor scalarInt(int64_t v, DType dtype = DType::I64);
  static HostTensor ints(llvm::ArrayRef<int64_t> values,
                         DType dtype = DType::I64);

  DType dtype() const { return type; }
  llvm::ArrayRef<int64_t> shape() const { return dims; }
  int64_t rank() const { return dims.size(); }
  int64_t numElements() const;
  bool isFloating() const { return isFloat(type); }

  int64_t getInt(int64_t i) const;
  double getDouble(int64_t i) const;
  /// Stores `v`, converted (and for floats rounded) to this tensor's dtype.
  void setDouble(int64_t i, double v);
  void setInt(int64_t i, int64_t v);

  /// All elements as int64 (for shapes, axes, indices).
  std::vector<int64_t> toInts() const;
  /// The same elements converted to `dtype` as ONNX Cast does.
  HostTensor castTo(DType dtype) const;
  /// The same elements with a new shape of equal element count.
  HostTensor reshaped(llvm::ArrayRef<int64_t> shape) const;

private:
  DType type = DType::Undefined;
  llvm::SmallVector<int64_t, 4> dims;
  std::vector<int64_t> intData;
  std::vector<double> floatData;
};

/// Checks that a tensor of `shape` can be computed on the host: its element
/// count fits in 64 bits and folding it (a HostTensor of 8 bytes an element,
/// its operands' broadcast indices and the IR constant: 32 bytes an element)
/// fits in `limitBytes`, or in this machine's physical memory when it is 0
/// (ImportOptions::foldLimitBytes). Shapes folded from a graph input's size
/// (a causal mask of seq x seq) are checked with it before anything is
/// allocated, so a huge dimension is an error, not an abort.
llvm::Error checkHostTensorSize(llvm::ArrayRef<int64_t> shape,
                                int64_t limitBytes);

/// Row-major strides of `shape`.
llvm::SmallVector<int64_t, 4> stridesOf(llvm::ArrayRef<int64_t> shape);

} // namespace cleave

#endif // CLEAVE_FRONTEND_HOSTTENSOR_H
