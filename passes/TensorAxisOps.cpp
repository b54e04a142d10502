//===- TensorAxisOps.cpp - collectives and slices over the tensor axis ---===//
//
// The op sequences of TensorAxisOps.h, shared by cleave-partition-tensor
// and cleave-sequence-parallel.
//
//===----------------------------------------------------------------------===//

#include "passes/TensorAxisOps.h"

#include "ir/AttrNames.h"
#include "ir/CleaveOps.h"
#include "ir/DistributionOps.h"

using namespace mlir;
using namespace mlir::cleave;

SmallVector<int64_t> mlir::cleave::toFront(int64_t rank, int64_t dim) {
  if (dim == 0)
    return {};
  SmallVector<int64_t> perm = {dim};
  for (int64_t d = 0; d < rank; ++d)
    if (d != dim)
      perm.push_back(d);
  return perm;
}

SmallVector<int64_t> mlir::cleave::inversePermutation(ArrayRef<int64_t> perm) {
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  return inverse;
}

Value mlir::cleave::tensorAxisCollective(OpBuilder &b, Location loc, Value v,
                                         int64_t dim, int64_t degree,
                                         bool gather, bool splitGrad) {
  auto type = v.getType().cast<RankedTensorType>();
  SmallVector<int64_t> perm = toFront(type.getRank(), dim);
  if (!perm.empty())
    v = b.create<TransposeOp>(loc, v, perm);
  auto front = v.getType().cast<RankedTensorType>();
  SmallVector<int64_t> shape(front.getShape());
  shape[0] = gather ? shape[0] * degree : shape[0] / degree;
  auto out = RankedTensorType::get(shape, front.getElementType());
  ArrayAttr axes = b.getStrArrayAttr({kTensorAxis});
  v = gather ? b.create<SpAllGatherOp>(loc, out, v, axes,
                                       b.getI64IntegerAttr(0),
                                       splitGrad ? b.getUnitAttr() : UnitAttr())
                   .getResult()
             : b.create<SpReduceScatterOp>(loc, out, v, axes,
                                           b.getI64IntegerAttr(0))
                   .getResult();
  if (!perm.empty())
    v = b.create<TransposeOp>(loc, v, inversePermutation(perm));
  return v;
}

Value mlir::cleave::tensorRankRows(OpBuilder &b, Location loc, Value whole,
                                   int64_t dim, ArrayRef<int64_t> base,
                                   int64_t step) {
  auto indexType = RankedTensorType::get({int64_t(base.size())}, b.getI64Type());
  auto scalar = RankedTensorType::get({}, b.getI64Type());
  Value rows = b.create<ConstantOp>(loc, DenseElementsAttr::get(indexType, base));
  Value r = b.create<AxisIndexOp>(loc, scalar, b.getStringAttr(kTensorAxis));
  Value first = b.create<MulOp>(
      loc, r,
      b.create<ConstantOp>(
          loc, DenseElementsAttr::get(scalar, b.getI64IntegerAttr(step))));
  Value indices = b.create<AddOp>(loc, rows, first);
  return b.create<GatherOp>(loc, whole, indices, b.getI64IntegerAttr(dim));
}
