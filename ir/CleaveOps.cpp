//===- CleaveOps.cpp - verifiers, shape inference and folders ------------===//
//
// Shape rules live here once: the frontend builds ops without computing
// result types, and the verifier compares a printed type with the same rule.
// Messages say what was expected and what was found.
//
//===----------------------------------------------------------------------===//

#include "ir/AttrNames.h"
#include "ir/CleaveOps.h"
#include "ir/DistributionOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <sstream>

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// "2x8x64" for a shape, "scalar" for rank 0.
std::string shapeString(ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "scalar";
  std::string s;
  llvm::raw_string_ostream os(s);
  llvm::interleave(shape, os, "x");
  return os.str();
}

RankedTensorType tensorType(Value v) {
  return v.getType().cast<RankedTensorType>();
}

LogicalResult emitOptional(std::optional<Location> loc, const Twine &message) {
  return emitOptionalError(loc, message);
}

} // namespace

FailureOr<SmallVector<int64_t>>
mlir::cleave::broadcastShapes(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> result(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t x = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t y = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (x != y && x != 1 && y != 1)
      return failure();
    result[i] = x == 1 ? y : x;
  }
  return result;
}

LogicalResult mlir::cleave::inferBroadcastResult(
    std::optional<Location> loc, ValueRange operands, Type resultElementType,
    SmallVectorImpl<Type> &inferred) {
  SmallVector<int64_t> shape;
  Type valueElementType;
  // select's first operand is the i1 condition; its element type is not the
  // result's, but it takes part in the broadcast.
  bool isSelect = operands.size() == 3;
  for (auto [i, operand] : llvm::enumerate(operands)) {
    auto type = tensorType(operand);
    if (!(isSelect && i == 0)) {
      if (!valueElementType)
        valueElementType = type.getElementType();
      else if (valueElementType != type.getElementType())
        return emitOptional(loc, llvm::formatv(
            "operands have different element types: {0} and {1}",
            valueElementType, type.getElementType()).str());
    }
    auto merged = broadcastShapes(shape, type.getShape());
    if (failed(merged))
      return emitOptional(loc, "operand shapes " + shapeString(shape) +
                                   " and " + shapeString(type.getShape()) +
                                   " do not broadcast");
    shape = *merged;
  }
  inferred.push_back(RankedTensorType::get(
      shape, resultElementType ? resultElementType : valueElementType));
  return success();
}

LogicalResult mlir::cleave::inferReduceResult(std::optional<Location> loc,
                                              Value x, ArrayRef<int64_t> axes,
                                              bool keepdims,
                                              SmallVectorImpl<Type> &inferred) {
  auto type = tensorType(x);
  int64_t rank = type.getRank();
  SmallVector<bool> reduced(rank, false);
  for (auto [i, axis] : llvm::enumerate(axes)) {
    if (axis < 0 || axis >= rank)
      return emitOptional(loc, llvm::formatv("reduction axis {0} is out of "
                                             "range for rank {1}",
                                             axis, rank)
                                   .str());
    if (i > 0 && axes[i - 1] >= axis)
      return emitOptional(loc, "reduction axes must be sorted and unique");
    reduced[axis] = true;
  }
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[d])
      shape.push_back(type.getDimSize(d));
    else if (keepdims)
      shape.push_back(1);
  }
  inferred.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

LogicalResult mlir::cleave::inferLossResult(std::optional<Location> loc,
                                            Value input, Value target,
                                            LossReduction reduction,
                                            SmallVectorImpl<Type> &inferred) {
  auto inputType = tensorType(input);
  auto targetType = tensorType(target);
  if (inputType.getRank() < 2)
    return emitOptional(loc, "expected input of shape [N, C, d...], got " +
                                 shapeString(inputType.getShape()));
  SmallVector<int64_t> expected{inputType.getDimSize(0)};
  llvm::append_range(expected, inputType.getShape().drop_front(2));
  if (targetType.getShape() != ArrayRef<int64_t>(expected))
    return emitOptional(loc, "expected target of shape " +
                                 shapeString(expected) + " for input " +
                                 shapeString(inputType.getShape()) + ", got " +
                                 shapeString(targetType.getShape()));
  ArrayRef<int64_t> shape;
  if (reduction == LossReduction::none)
    shape = expected;
  inferred.push_back(RankedTensorType::get(shape, inputType.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Parameters and constants
//===----------------------------------------------------------------------===//

LogicalResult ParameterOp::verify() {
  auto value = getValueAttr();
  // After cleave-partition-tensor the type is the rank's slice and the
  // value stays the full tensor (params.bin holds it whole; each rank
  // reads its boxes).
  Type valueType = getType();
  if (auto full = (*this)->getAttrOfType<TypeAttr>(kFullTypeAttr))
    valueType = full.getValue();
  // A padded vocabulary (cleave-pad-vocabulary): the value holds the real
  // rows; the padding is more rows only.
  if (auto unpadded =
          (*this)->getAttrOfType<DenseI64ArrayAttr>(kUnpaddedShapeAttr)) {
    auto padded = valueType.cast<RankedTensorType>();
    ArrayRef<int64_t> shape = unpadded.asArrayRef();
    if (shape.size() != size_t(padded.getRank()) || shape.empty() ||
        shape[0] > padded.getDimSize(0) ||
        !llvm::equal(shape.drop_front(), padded.getShape().drop_front()))
      return emitOpError() << kUnpaddedShapeAttr << " " << unpadded
                           << " is not " << padded
                           << " less some of its first dimension's rows";
    valueType = RankedTensorType::get(shape, padded.getElementType());
  }
  if (value && value.getType() != valueType)
    return emitOpError() << "initial value of type " << value.getType()
                         << " does not match the parameter type "
                         << valueType;
  if (auto init = getInit()) {
    double std;
    bool ok = *init == "zeros" || *init == "ones" ||
              (init->startswith("normal:") &&
               !init->drop_front(7).getAsDouble(std) && std >= 0);
    if (!ok)
      return emitOpError() << "init must be \"zeros\", \"ones\" or "
                              "\"normal:STD\", got \""
                           << *init << "\"";
  }
  if (!getType().cast<RankedTensorType>().getElementType().isa<FloatType>())
    return emitOpError() << "parameters are floating point, got "
                         << getType();
  return success();
}

LogicalResult
GetParamOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto param = symbolTable.lookupNearestSymbolFrom<ParameterOp>(
      *this, getNameAttr());
  if (!param)
    return emitOpError() << "no cleave.parameter named " << getNameAttr();
  // A parameter with a working copy (ZeRO-1's sharded masters) is read in
  // the copy's type.
  Type expected = readType(param);
  if (expected != getType())
    return emitOpError() << "result type " << getType()
                         << " differs from the type of parameter "
                         << getNameAttr() << ", " << expected;
  if (param->hasAttr(kParamAxisAttr))
    return emitOpError() << "parameter " << getNameAttr()
                         << " is sharded (cleave.param_axis): this rank holds "
                            "one chunk of it; read it with cleave.gather_param";
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValueAttr(); }

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult SelectOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attributes, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  return inferBroadcastResult(loc, operands, {}, inferred);
}

LogicalResult GeluOp::verify() {
  if (getApproximate() != "none" && getApproximate() != "tanh")
    return emitOpError() << "approximate must be \"none\" or \"tanh\", got \""
                         << getApproximate() << "\"";
  return success();
}

LogicalResult DropoutOp::verify() {
  double ratio = getRatio().convertToDouble();
  if (!(ratio > 0 && ratio < 1)) {
    std::ostringstream got; // 1, not 1.000000e+00
    got << ratio;
    return emitOpError() << "ratio must be in (0, 1), got " << got.str();
  }
  if (getStream().empty())
    return emitOpError() << "needs a stream name (the ONNX node's)";
  auto type = getX().getType().cast<RankedTensorType>();
  if (type.getRank() == 0)
    return emitOpError() << "needs a tensor with samples along dimension 0, "
                            "got a scalar";
  if (std::optional<ArrayRef<int64_t>> full = getFullShape()) {
    if ((int64_t)full->size() != type.getRank())
      return emitOpError() << "full_shape has " << full->size()
                           << " dimensions, the operand " << type.getRank();
    for (auto [f, l] : llvm::zip(*full, type.getShape()))
      if (l <= 0 || f < l || f % l != 0)
        return emitOpError() << "the operand " << type
                             << " is not a slice of full_shape";
  }
  if (getSplit().has_value() != getFullShape().has_value())
    return emitOpError() << "full_shape and split come together";
  return success();
}

//===----------------------------------------------------------------------===//
// Matrix products, reductions, normalizations
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attributes, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attributes);
  auto lhs = tensorType(operands[0]);
  auto rhs = tensorType(operands[1]);
  bool transLhs = adaptor.getTransposeLhs(), transRhs = adaptor.getTransposeRhs();
  if (lhs.getRank() < 2 || rhs.getRank() < 2)
    return emitOptional(loc, "operands must have rank 2 or more, got " +
                                 shapeString(lhs.getShape()) + " and " +
                                 shapeString(rhs.getShape()));
  if (lhs.getElementType() != rhs.getElementType())
    return emitOptional(loc, llvm::formatv("operands have different element "
                                           "types: {0} and {1}",
                                           lhs.getElementType(),
                                           rhs.getElementType())
                                 .str());
  int64_t lhsRows = lhs.getDimSize(lhs.getRank() - 2);
  int64_t lhsCols = lhs.getShape().back();
  int64_t rhsRows = rhs.getDimSize(rhs.getRank() - 2);
  int64_t rhsCols = rhs.getShape().back();
  int64_t k = transLhs ? lhsRows : lhsCols;
  int64_t rhsK = transRhs ? rhsCols : rhsRows;
  if (k != rhsK)
    return emitOptional(loc, llvm::formatv("contracting dimensions differ: "
                                           "{0} has K = {1}, {2} has K = {3}",
                                           shapeString(lhs.getShape()), k,
                                           shapeString(rhs.getShape()), rhsK)
                                 .str());
  auto batch = broadcastShapes(lhs.getShape().drop_back(2),
                               rhs.getShape().drop_back(2));
  if (failed(batch))
    return emitOptional(loc, "batch dimensions of " +
                                 shapeString(lhs.getShape()) + " and " +
                                 shapeString(rhs.getShape()) +
                                 " do not broadcast");
  SmallVector<int64_t> shape = *batch;
  shape.push_back(transLhs ? lhsCols : lhsRows);
  shape.push_back(transRhs ? rhsRows : rhsCols);
  inferred.push_back(RankedTensorType::get(shape, lhs.getElementType()));
  return success();
}

/// Checks `axis` against `rank`, and that `param` (when present) has shape
/// `x.shape[axis:]`.
static LogicalResult verifyNormalizedShape(Operation *op, RankedTensorType x,
                                           int64_t axis, Value param,
                                           StringRef paramName) {
  if (axis < 0 || axis >= x.getRank())
    return op->emitOpError() << "axis " << axis << " is out of range for "
                             << x;
  if (!param)
    return success();
  auto expected = x.getShape().drop_front(axis);
  auto found = tensorType(param);
  if (found.getShape() != expected)
    return op->emitOpError()
           << paramName << " must have shape " << shapeString(expected)
           << " (x.shape[" << axis << ":]), got "
           << shapeString(found.getShape());
  if (found.getElementType() != x.getElementType())
    return op->emitOpError() << paramName << " has element type "
                             << found.getElementType() << ", x has "
                             << x.getElementType();
  return success();
}

LogicalResult LayerNormOp::verify() {
  auto x = getX().getType().cast<RankedTensorType>();
  if (getResult().getType() != x)
    return emitOpError() << "result type " << getResult().getType()
                         << " differs from the input type " << x;
  // The assembly format can only spell a bias after a scale (ONNX
  // LayerNormalization always has one), so a bias alone would not round-trip.
  if (getBias() && !getScale())
    return emitOpError() << "a bias needs a scale; pass a scale of ones";
  if (failed(verifyNormalizedShape(*this, x, getAxis(), getScale(), "scale")) ||
      failed(verifyNormalizedShape(*this, x, getAxis(), getBias(), "bias")))
    return failure();
  return success();
}

LogicalResult RmsNormOp::verify() {
  auto x = getX().getType().cast<RankedTensorType>();
  if (getResult().getType() != x)
    return emitOpError() << "result type " << getResult().getType()
                         << " differs from the input type " << x;
  return verifyNormalizedShape(*this, x, getAxis(), getScale(), "scale");
}

LogicalResult RotaryOp::verify() {
  auto x = getX().getType().cast<RankedTensorType>();
  auto cos = getCos().getType().cast<RankedTensorType>();
  auto sin = getSin().getType().cast<RankedTensorType>();
  if (getResult().getType() != x)
    return emitOpError() << "result type " << getResult().getType()
                         << " differs from the input type " << x;
  if (x.getRank() < 2 || x.getShape().back() % 2 != 0)
    return emitOpError() << "x must be [..., seq, head_dim] with an even "
                            "head_dim, got "
                         << shapeString(x.getShape());
  ArrayRef<int64_t> table = x.getShape().take_back(2);
  if (cos != sin || cos.getShape() != table ||
      cos.getElementType() != x.getElementType())
    return emitOpError() << "cos and sin must both be " << shapeString(table)
                         << " of " << x.getElementType() << ", got " << cos
                         << " and " << sin;
  return success();
}

template <typename SoftmaxLike>
static LogicalResult verifySoftmaxAxis(SoftmaxLike op) {
  int64_t rank = op.getX().getType().template cast<RankedTensorType>().getRank();
  // I64Attr's getter returns uint64_t; a negative axis must print as one.
  int64_t axis = op.getAxis();
  if (axis < 0 || axis >= rank)
    return op.emitOpError()
           << "axis " << axis << " is out of range for rank " << rank;
  return success();
}

LogicalResult SoftmaxOp::verify() { return verifySoftmaxAxis(*this); }
LogicalResult CumsumOp::verify() { return verifySoftmaxAxis(*this); }
LogicalResult LogSoftmaxOp::verify() { return verifySoftmaxAxis(*this); }

LogicalResult AttentionOp::verify() {
  auto q = getQ().getType().cast<RankedTensorType>();
  auto k = getK().getType().cast<RankedTensorType>();
  auto v = getV().getType().cast<RankedTensorType>();
  if (q.getRank() != 4 || k.getRank() != 4 || v.getRank() != 4)
    return emitOpError() << "q, k and v must be [batch, heads, seq, head_dim], "
                            "got "
                         << shapeString(q.getShape()) << ", "
                         << shapeString(k.getShape()) << " and "
                         << shapeString(v.getShape());
  if (k.getElementType() != q.getElementType() ||
      v.getElementType() != q.getElementType())
    return emitOpError() << "q, k and v must have one element type, got "
                         << q.getElementType() << ", " << k.getElementType()
                         << " and " << v.getElementType();
  if (k.getShape() != v.getShape())
    return emitOpError() << "k and v shapes differ: "
                         << shapeString(k.getShape()) << " and "
                         << shapeString(v.getShape());
  if (q.getDimSize(0) != k.getDimSize(0) || q.getDimSize(3) != k.getDimSize(3))
    return emitOpError() << "q " << shapeString(q.getShape())
                         << " and k " << shapeString(k.getShape())
                         << " differ in batch or head_dim";
  // Zero key/value heads would divide by zero below.
  if (k.getDimSize(1) == 0 || q.getDimSize(1) % k.getDimSize(1) != 0)
    return emitOpError() << "query heads (" << q.getDimSize(1)
                         << ") must be a multiple of key/value heads ("
                         << k.getDimSize(1) << ")";
  if (getResult().getType() != q)
    return emitOpError() << "result type " << getResult().getType()
                         << " differs from q's type " << q;
  if (getMask()) {
    SmallVector<int64_t> scores{q.getDimSize(0), q.getDimSize(1),
                                q.getDimSize(2), k.getDimSize(2)};
    // A float mask may be wider than q: under autocast an f32 mask added
    // to bf16 scores is added in f32, as the kernels add every mask.
    auto maskType = tensorType(getMask());
    if (!maskType.getElementType().isInteger(1) &&
        !maskType.getElementType().isa<FloatType>())
      return emitOpError() << "mask must be i1 (true keeps) or a float "
                              "type (added to the scores), got "
                           << maskType.getElementType();
    auto maskShape = maskType.getShape();
    auto merged = broadcastShapes(maskShape, scores);
    if (failed(merged) || ArrayRef<int64_t>(*merged) != ArrayRef(scores))
      return emitOpError() << "mask of shape " << shapeString(maskShape)
                           << " does not broadcast to the scores' shape "
                           << shapeString(scores);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Lookups
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attributes, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  auto table = tensorType(operands[0]);
  auto ids = tensorType(operands[1]);
  if (table.getRank() != 2)
    return emitOptional(loc, "embedding table must be [vocab, dim], got " +
                                 shapeString(table.getShape()));
  SmallVector<int64_t> shape(ids.getShape());
  shape.push_back(table.getDimSize(1));
  inferred.push_back(RankedTensorType::get(shape, table.getElementType()));
  return success();
}

LogicalResult mlir::cleave::verifyPaddingIdx(Operation *op,
                                             std::optional<int64_t> row,
                                             int64_t vocab) {
  if (row && (*row < 0 || *row >= vocab))
    return op->emitOpError() << "padding_idx " << *row
                             << " is not a row of the table (0 to "
                             << vocab - 1 << ")";
  return success();
}

LogicalResult EmbeddingOp::verify() {
  auto table = tensorType(getTable());
  if (table.getRank() != 2) // the inferred type's check reports it
    return success();
  return verifyPaddingIdx(*this, getPaddingIdx(), table.getDimSize(0));
}

LogicalResult GatherOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attributes, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attributes);
  auto data = tensorType(adaptor.getData());
  auto indices = tensorType(adaptor.getIndices());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= data.getRank())
    return emitOptional(loc, llvm::formatv("gather axis {0} is out of range "
                                           "for rank {1}",
                                           axis, data.getRank())
                                 .str());
  SmallVector<int64_t> shape(data.getShape().take_front(axis));
  llvm::append_range(shape, indices.getShape());
  llvm::append_range(shape, data.getShape().drop_front(axis + 1));
  inferred.push_back(RankedTensorType::get(shape, data.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  auto in = getX().getType().cast<RankedTensorType>();
  auto out = getResult().getType().cast<RankedTensorType>();
  if (in.getNumElements() != out.getNumElements())
    return emitOpError() << "cannot reshape " << shapeString(in.getShape())
                         << " (" << in.getNumElements() << " elements) to "
                         << shapeString(out.getShape()) << " ("
                         << out.getNumElements() << " elements)";
  if (in.getElementType() != out.getElementType())
    return emitOpError() << "element type changes from "
                         << in.getElementType() << " to "
                         << out.getElementType();
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getX().getType() == getType())
    return getX();
  if (auto producer = getX().getDefiningOp<ReshapeOp>()) {
    getXMutable().assign(producer.getX());
    return getResult();
  }
  return {};
}

LogicalResult TransposeOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attributes, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attributes);
  auto type = tensorType(adaptor.getX());
  ArrayRef<int64_t> perm = adaptor.getPerm();
  if ((int64_t)perm.size() != type.getRank())
    return emitOptional(loc, llvm::formatv("perm has {0} entries for rank {1}",
                                           perm.size(), type.getRank())
                                 .str());
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= type.getRank() || seen[p])
      return emitOptional(loc, "perm is not a permutation of 0.." +
                                   Twine(type.getRank() - 1));
    seen[p] = true;
    shape.push_back(type.getDimSize(p));
  }
  inferred.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

LogicalResult BroadcastToOp::verify() {
  auto in = getX().getType().cast<RankedTensorType>();
  auto out = getResult().getType().cast<RankedTensorType>();
  auto merged = broadcastShapes(in.getShape(), out.getShape());
  if (failed(merged) || ArrayRef<int64_t>(*merged) != out.getShape())
    return emitOpError() << "cannot broadcast " << shapeString(in.getShape())
                         << " to " << shapeString(out.getShape());
  if (in.getElementType() != out.getElementType())
    return emitOpError() << "element type changes from "
                         << in.getElementType() << " to "
                         << out.getElementType();
  return success();
}

LogicalResult SliceOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attributes, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attributes);
  auto type = tensorType(adaptor.getX());
  ArrayRef<int64_t> start = adaptor.getStart(), limit = adaptor.getLimit(),
                    step = adaptor.getStep();
  int64_t rank = type.getRank();
  if ((int64_t)start.size() != rank || (int64_t)limit.size() != rank ||
      (int64_t)step.size() != rank)
    return emitOptional(loc, llvm::formatv("start, limit and step need {0} "
                                           "entries each (the rank)",
                                           rank)
                                 .str());
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t dim = type.getDimSize(d);
    bool ok = step[d] > 0
                  ? 0 <= start[d] && start[d] <= limit[d] && limit[d] <= dim
                  // An empty slice may start at `dim`: the frontend writes
                  // 0:0:-1 for a dimension of size 0.
                  : step[d] < 0 && -1 <= limit[d] && limit[d] <= start[d] &&
                        (start[d] < dim || start[d] == limit[d]);
    if (!ok)
      return emitOptional(loc, llvm::formatv("slice {0}:{1}:{2} is invalid "
                                             "for dimension {3} of size {4}",
                                             start[d], limit[d], step[d], d,
                                             dim)
                                   .str());
    int64_t extent = step[d] > 0 ? limit[d] - start[d] : start[d] - limit[d];
    int64_t stride = std::abs(step[d]);
    shape.push_back((extent + stride - 1) / stride);
  }
  inferred.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attributes, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attributes);
  if (operands.empty())
    return emitOptional(loc, "concat needs at least one input");
  auto first = tensorType(operands[0]);
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= first.getRank())
    return emitOptional(loc, llvm::formatv("concat axis {0} is out of range "
                                           "for rank {1}",
                                           axis, first.getRank())
                                 .str());
  SmallVector<int64_t> shape(first.getShape());
  shape[axis] = 0;
  for (Value operand : operands) {
    auto type = tensorType(operand);
    if (type.getElementType() != first.getElementType() ||
        type.getRank() != first.getRank())
      return emitOptional(loc, llvm::formatv("concat inputs differ in rank or "
                                             "element type: {0} and {1}",
                                             first, type)
                                   .str());
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (d != axis && type.getDimSize(d) != first.getDimSize(d))
        return emitOptional(loc, "concat inputs " +
                                     shapeString(first.getShape()) + " and " +
                                     shapeString(type.getShape()) +
                                     " differ outside axis " + Twine(axis));
    shape[axis] += type.getDimSize(axis);
  }
  inferred.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

#define GET_OP_CLASSES
#include "ir/CleaveOps.cpp.inc"
