//===- TensorAxisOps.h - collectives and slices over the tensor axis --*- C++ -*-===//
//
// The small op sequences that the tensor partition and sequence
// parallelism both build on the local program of a tensor-parallel rank:
// a gather or reduce-scatter over the `tensor` axis along any dimension
// (the runtime's collectives are flat, so the dimension is brought to the
// front and back), and a rank's rows of a replicated value (a gather at
// indices offset by the rank's coordinate).
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_PASSES_TENSORAXISOPS_H
#define CLEAVE_PASSES_TENSORAXISOPS_H

#include "mlir/IR/Builders.h"

namespace mlir::cleave {

/// The permutation that brings `dim` of a rank-`rank` value to the front,
/// the others after it in order (empty when `dim` is 0).
SmallVector<int64_t> toFront(int64_t rank, int64_t dim);

/// The inverse of permutation `perm`.
SmallVector<int64_t> inversePermutation(ArrayRef<int64_t> perm);

/// `v` all-gathered (`gather`, `cleave.sp_all_gather`, with `split_grad`
/// when `splitGrad`) or reduce-scattered (`cleave.sp_reduce_scatter`)
/// along `dim` over the `tensor` axis of `degree` ranks, `dim` transposed
/// to the front and back when it is not there.
Value tensorAxisCollective(OpBuilder &b, Location loc, Value v, int64_t dim,
                           int64_t degree, bool gather, bool splitGrad = false);

/// The indices along `dim` this tensor rank holds of `whole`: a
/// `cleave.gather` of `base + r * step`, r the rank's coordinate on the
/// `tensor` axis (`cleave.axis_index`).
Value tensorRankRows(OpBuilder &b, Location loc, Value whole, int64_t dim,
                     ArrayRef<int64_t> base, int64_t step);

} // namespace mlir::cleave

#endif // CLEAVE_PASSES_TENSORAXISOPS_H
