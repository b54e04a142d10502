//===- OnnxShapes.h - ONNX shape rules shared by folding and import -*- C++ -*-===//
//
// The rules by which ONNX ops turn their (constant) shape operands into
// static shapes: Reshape's 0 and -1, Slice's clamping, Squeeze/Unsqueeze
// axes, Split sizes. The host evaluator and the IR builder both use them, so
// a folded and an imported node agree by construction. Each returns a
// message on bad input; the caller adds the node's name.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_FRONTEND_ONNXSHAPES_H
#define CLEAVE_FRONTEND_ONNXSHAPES_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"
#include <vector>

namespace cleave {

using Shape = llvm::SmallVector<int64_t, 4>;

/// Normalizes a possibly negative `axis` for `rank`.
llvm::Expected<int64_t> normalizeAxis(int64_t axis, int64_t rank);

/// Sorted, unique, non-negative axes.
llvm::Expected<std::vector<int64_t>> normalizeAxes(llvm::ArrayRef<int64_t> axes,
                                                   int64_t rank);

/// ONNX Reshape: `0` copies the input dimension (unless allowzero), one `-1`
/// is inferred.
llvm::Expected<Shape> reshapeTarget(llvm::ArrayRef<int64_t> input,
                                    llvm::ArrayRef<int64_t> requested,
                                    bool allowZero);

/// ONNX Flatten: dimensions before `axis` (in [-rank, rank]; negative
/// counts from the end) become the rows, the rest the columns.
llvm::Expected<Shape> flattenShape(llvm::ArrayRef<int64_t> input,
                                   int64_t axis);

llvm::Expected<Shape> unsqueezeShape(llvm::ArrayRef<int64_t> input,
                                     llvm::ArrayRef<int64_t> axes);

/// ONNX Squeeze; empty `axes` removes every dimension of size 1.
llvm::Expected<Shape> squeezeShape(llvm::ArrayRef<int64_t> input,
                                   llvm::ArrayRef<int64_t> axes);

/// A normalized slice: one start/limit/step per dimension.
struct SliceBounds {
  std::vector<int64_t> start, limit, step;
  Shape resultShape;
};

/// ONNX Slice (starts, ends, optional axes and steps) clamped as the spec
/// says, for every dimension of `input`.
llvm::Expected<SliceBounds> sliceBounds(llvm::ArrayRef<int64_t> input,
                                        llvm::ArrayRef<int64_t> starts,
                                        llvm::ArrayRef<int64_t> ends,
                                        llvm::ArrayRef<int64_t> axes,
                                        llvm::ArrayRef<int64_t> steps);

/// Sizes of the outputs of ONNX Split along a dimension of size `dim`:
/// explicit `split` sizes, or `numOutputs` parts (the last one smaller when
/// it does not divide).
llvm::Expected<std::vector<int64_t>> splitSizes(int64_t dim,
                                                llvm::ArrayRef<int64_t> split,
                                                int64_t numOutputs);

/// Checks that graph input `name` of `shape` has a byte size (with
/// `elementBytes` an element) that a 64-bit plan can hold; the error names
/// the dimension at which it stops fitting.
llvm::Error checkInputSize(llvm::StringRef name, llvm::ArrayRef<int64_t> shape,
                           int64_t elementBytes);

/// The largest dimension a tensor may have (2^40).
constexpr int64_t kMaxDimension = int64_t(1) << 40;

/// Checks the rule every shape the importer makes obeys: each dimension is
/// in [0, kMaxDimension] and the dimensions other than 0 multiply to at
/// most 2^62. A tensor with no elements can otherwise carry dimensions
/// whose sums (Concat) or products (Flatten, Tile) overflow 64 bits; with
/// it, shape arithmetic on any product of dimensions stays exact. The
/// error names `what` and the shape.
llvm::Error checkShape(llvm::StringRef what, llvm::ArrayRef<int64_t> shape);

/// "2x8x64" ("scalar" for rank 0), for messages.
std::string shapeToString(llvm::ArrayRef<int64_t> shape);

} // namespace cleave

#endif // CLEAVE_FRONTEND_ONNXSHAPES_H
