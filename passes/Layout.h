//===- Layout.h - bytes of tensors as the runtime stores them --*- C++ -*-===//
//
// The memory plan and the program emitter must agree on sizes: elements are
// stored densely, row-major, i1 as one byte.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_PASSES_LAYOUT_H
#define CLEAVE_PASSES_LAYOUT_H

#include "mlir/IR/BuiltinTypes.h"

namespace mlir::cleave {

/// Bytes per element of a tensor of `elementType` (i1 takes one byte).
inline int64_t elementBytes(Type elementType) {
  unsigned bits = elementType.getIntOrFloatBitWidth();
  return bits == 1 ? 1 : (bits + 7) / 8;
}

inline int64_t tensorBytes(Type type) {
  auto tensor = type.cast<RankedTensorType>();
  return tensor.getNumElements() * elementBytes(tensor.getElementType());
}

inline int64_t alignUp(int64_t value, int64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

} // namespace mlir::cleave

#endif // CLEAVE_PASSES_LAYOUT_H
