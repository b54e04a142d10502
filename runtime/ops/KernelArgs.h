//===- KernelArgs.h - one kernel call as every backend reads it -*- C++ -*-===//
//
// The calling convention of a kernel (KernelArgs): the op's attributes read
// with errors of the form "op: what was expected, what was found", shape
// and element type checks, dispatch over element types, and numpy
// broadcasting of shapes. The CPU kernels (runtime/cpu/) and the CUDA
// kernels (runtime/cuda/) both take a KernelArgs, so it lives here, in
// neither backend's folder. Plain C++17: no MLIR, no OpenMP, no CUDA.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_OPS_KERNELARGS_H
#define CLEAVE_RUNTIME_OPS_KERNELARGS_H

#include "runtime/Status.h"
#include "runtime/Tensor.h"
#include "runtime/ops/ElementTypes.h"
#include "runtime/ops/OpTable.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cleave::runtime::ops {

//===----------------------------------------------------------------------===//
// The call
//===----------------------------------------------------------------------===//

using Shape = std::vector<int64_t>;

/// "[2, 8, 64]".
std::string shapeString(const Shape &shape);

/// One kernel invocation. The dispatcher has checked the operand and result
/// counts against the op's table entry and that required operands have
/// data.
struct KernelArgs {
  const std::string &op;
  const Attributes &attrs;
  const std::vector<TensorRef> &inputs;
  const std::vector<TensorRef> &outputs;

  const TensorRef &in(size_t i) const { return inputs[i]; }
  const TensorRef &out() const { return outputs[0]; }
  /// Result `i` of an op with several (layer_norm_grad's dx, dscale, dbias).
  const TensorRef &out(size_t i) const { return outputs[i]; }
  /// Whether optional operand `i` was given.
  bool has(size_t i) const { return i < inputs.size() && inputs[i].data; }

  /// An error that names the op: "layer_norm: <message>".
  Status error(const std::string &message) const {
    return Status::error(op + ": " + message);
  }
  Status unsupported(DType dtype, const char *what = "x") const {
    return error(std::string("no kernel for element type ") + dtypeName(dtype) +
                 " (" + what + ")");
  }

  /// Attributes; a missing one without a default is an error.
  Status intAttr(const char *name, int64_t &value) const;
  Status intAttr(const char *name, int64_t &value, int64_t byDefault) const;
  Status floatAttr(const char *name, double &value) const;
  Status floatAttr(const char *name, double &value, double byDefault) const;
  Status stringAttr(const char *name, std::string &value,
                    const std::string &byDefault) const;
  Status intsAttr(const char *name, std::vector<int64_t> &value) const;
  bool hasAttr(const char *name) const { return attrs.count(name) != 0; }

  /// Checks the dtype of operand/result against `expected`.
  Status expectDType(const TensorRef &t, DType expected,
                     const char *what) const;
  Status expectShape(const TensorRef &t, const Shape &expected,
                     const char *what) const;
};

/// `axis` in [-rank, rank) to [0, rank).
Status normalizeAxis(const KernelArgs &a, int64_t &axis, int64_t rank,
                     const char *what = "axis");

//===----------------------------------------------------------------------===//
// Dispatch over element types
//===----------------------------------------------------------------------===//

template <typename T> struct Tag { using type = T; };

/// Calls `f(Tag<T>{})` for the storage type of `dtype` when it is one of the
/// floating-point types; otherwise an "unsupported" error.
template <typename F>
Status visitFloat(const KernelArgs &a, DType dtype, F &&f,
                  const char *what = "x") {
  switch (dtype) {
  case DType::F32:
    return f(Tag<float>{});
  case DType::F64:
    return f(Tag<double>{});
  case DType::F16:
    return f(Tag<Half>{});
  case DType::BF16:
    return f(Tag<BFloat16>{});
  default:
    return a.unsupported(dtype, what);
  }
}

/// Floating-point and integer types (not Bool).
template <typename F>
Status visitNumeric(const KernelArgs &a, DType dtype, F &&f,
                    const char *what = "x") {
  switch (dtype) {
  case DType::F32:
    return f(Tag<float>{});
  case DType::F64:
    return f(Tag<double>{});
  case DType::F16:
    return f(Tag<Half>{});
  case DType::BF16:
    return f(Tag<BFloat16>{});
  case DType::I64:
    return f(Tag<int64_t>{});
  case DType::I32:
    return f(Tag<int32_t>{});
  case DType::I16:
    return f(Tag<int16_t>{});
  case DType::I8:
    return f(Tag<int8_t>{});
  case DType::U8:
    return f(Tag<uint8_t>{});
  case DType::U16:
    return f(Tag<uint16_t>{});
  case DType::U32:
    return f(Tag<uint32_t>{});
  case DType::U64:
    return f(Tag<uint64_t>{});
  default:
    return a.unsupported(dtype, what);
  }
}

/// Every type, Bool included (read as uint8_t).
template <typename F>
Status visitAny(const KernelArgs &a, DType dtype, F &&f,
                const char *what = "x") {
  if (dtype == DType::Bool)
    return f(Tag<Bool>{});
  return visitNumeric(a, dtype, std::forward<F>(f), what);
}

/// Index operands (ids, indices, targets).
template <typename F>
Status visitIndex(const KernelArgs &a, DType dtype, F &&f, const char *what) {
  switch (dtype) {
  case DType::I64:
    return f(Tag<int64_t>{});
  case DType::I32:
    return f(Tag<int32_t>{});
  default:
    return a.unsupported(dtype, what);
  }
}

/// A type with the element's size, for kernels that only move elements.
template <size_t Bytes> struct Word;
template <> struct Word<1> { using type = uint8_t; };
template <> struct Word<2> { using type = uint16_t; };
template <> struct Word<4> { using type = uint32_t; };
template <> struct Word<8> { using type = uint64_t; };

template <typename F>
Status visitBytes(const KernelArgs &a, DType dtype, F &&f,
                  const char *what = "x") {
  switch (dtypeSize(dtype)) {
  case 1:
    return f(Tag<uint8_t>{});
  case 2:
    return f(Tag<uint16_t>{});
  case 4:
    return f(Tag<uint32_t>{});
  case 8:
    return f(Tag<uint64_t>{});
  default:
    return a.unsupported(dtype, what);
  }
}

//===----------------------------------------------------------------------===//
// Shapes and broadcasting
//===----------------------------------------------------------------------===//

/// How operands broadcast to a result: the result is walked as `rows` rows
/// of `inner` elements (dimensions merged where every operand allows it);
/// an operand's row starts at rowOffset(k, row) and steps by innerStride[k]
/// (0 for an operand broadcast along the row).
struct BroadcastPlan {
  int64_t rows = 1, inner = 1;
  Shape outerDims;                  // merged dimensions but the last
  std::vector<Shape> outerStrides;  // per operand, per outer dim
  std::vector<int64_t> innerStride; // per operand

  int64_t rowOffset(size_t operand, int64_t row) const {
    int64_t offset = 0;
    const Shape &strides = outerStrides[operand];
    for (int64_t d = int64_t(outerDims.size()) - 1; d >= 0 && row; --d) {
      offset += (row % outerDims[d]) * strides[d];
      row /= outerDims[d];
    }
    return offset;
  }
};

/// Whether `from` broadcasts to `to` (numpy rules, `from` no longer).
bool broadcastsTo(const Shape &from, const Shape &to);
/// The numpy broadcast of two shapes; false when they do not broadcast.
bool broadcastShapes(const Shape &a, const Shape &b, Shape &result);
/// The plan for operands (each broadcasting to `out`).
BroadcastPlan makeBroadcastPlan(const std::vector<Shape> &operands,
                                const Shape &out);

/// The plan for operands read at the given strides (one per result
/// dimension, in elements, possibly 0 or negative).
BroadcastPlan planFromStrides(const Shape &out,
                              const std::vector<Shape> &strides);

/// Row-major strides.
Shape stridesOf(const Shape &shape);
int64_t product(const Shape &shape, size_t begin = 0, size_t end = size_t(-1));

} // namespace cleave::runtime::ops

#endif // CLEAVE_RUNTIME_OPS_KERNELARGS_H
