//===- IndexingOps.cpp - shapes of the element- and tuple-indexed ops -----===//
//
// gather_elements and its gradient, scatter_nd and gather_nd: the shape
// rules ODS cannot say.
//
//===----------------------------------------------------------------------===//

#include "ir/CleaveOps.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::cleave;

static RankedTensorType typeOf(Value v) {
  return v.getType().cast<RankedTensorType>();
}

/// gather_elements: `indices` of `data`'s rank, no larger than it off the
/// axis; a message when not.
static std::string checkGatherElements(RankedTensorType data,
                                       RankedTensorType indices, int64_t axis) {
  if (axis < 0 || axis >= data.getRank())
    return llvm::formatv("axis {0} is out of range for rank {1}", axis,
                         data.getRank());
  if (indices.getRank() != data.getRank())
    return llvm::formatv("indices must have the data's rank {0}, got rank {1}",
                         data.getRank(), indices.getRank());
  for (int64_t d = 0; d < data.getRank(); ++d)
    if (d != axis && indices.getDimSize(d) > data.getDimSize(d))
      return llvm::formatv("indices dimension {0} is {1}, larger than the "
                           "data's {2}",
                           d, indices.getDimSize(d), data.getDimSize(d));
  return "";
}

LogicalResult GatherElementsOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attributes, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attributes);
  auto data = typeOf(adaptor.getData());
  auto indices = typeOf(adaptor.getIndices());
  std::string bad =
      checkGatherElements(data, indices, int64_t(adaptor.getAxis()));
  if (!bad.empty())
    return emitOptionalError(loc, "gather_elements: ", bad);
  inferred.push_back(
      RankedTensorType::get(indices.getShape(), data.getElementType()));
  return success();
}

LogicalResult GatherElementsGradOp::verify() {
  auto data = typeOf(getResult()), indices = typeOf(getIndices());
  std::string bad = checkGatherElements(data, indices, int64_t(getAxis()));
  if (!bad.empty())
    return emitOpError() << bad;
  auto dy = RankedTensorType::get(indices.getShape(), data.getElementType());
  if (getDy().getType() != dy)
    return emitOpError() << "dy must be " << dy << ", got "
                         << getDy().getType();
  return success();
}

/// The shape of the slices that `indices` ([..., k]) picks from `data`,
/// one per tuple: indices.shape[:-1] + data.shape[k:]; a message in `bad`
/// when indices cannot index data.
static SmallVector<int64_t>
tupleSlices(RankedTensorType data, RankedTensorType indices, std::string &bad) {
  if (indices.getRank() == 0) {
    bad = "indices must have rank 1 or more (index tuples along the last "
          "dimension)";
    return {};
  }
  int64_t k = indices.getShape().back();
  if (k > data.getRank()) {
    bad = llvm::formatv("index tuples have {0} entries, more than the data's "
                        "rank {1}",
                        k, data.getRank());
    return {};
  }
  SmallVector<int64_t> shape(indices.getShape().drop_back());
  llvm::append_range(shape, data.getShape().drop_front(k));
  return shape;
}

LogicalResult GatherNdOp::inferReturnTypes(MLIRContext *context,
                                           std::optional<Location> loc,
                                           ValueRange operands,
                                           DictionaryAttr attributes,
                                           RegionRange regions,
                                           SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attributes);
  auto data = typeOf(adaptor.getData());
  std::string bad;
  auto shape = tupleSlices(data, typeOf(adaptor.getIndices()), bad);
  if (!bad.empty())
    return emitOptionalError(loc, "gather_nd: ", bad);
  inferred.push_back(RankedTensorType::get(shape, data.getElementType()));
  return success();
}

LogicalResult ScatterNdOp::verify() {
  auto data = typeOf(getData());
  std::string bad;
  auto shape = tupleSlices(data, typeOf(getIndices()), bad);
  if (!bad.empty())
    return emitOpError() << bad;
  auto updates = RankedTensorType::get(shape, data.getElementType());
  if (getUpdates().getType() != updates)
    return emitOpError() << "updates must be " << updates << ", got "
                         << getUpdates().getType();
  StringRef r = getReduction();
  if (r != "none" && r != "add" && r != "mul" && r != "max" && r != "min")
    return emitOpError() << "reduction must be none, add, mul, max or min, "
                            "got '"
                         << r << "'";
  return success();
}
