//===- DistributionOps.cpp - collectives, transfers and their token -------===//
//
// What ODS cannot say about the ops of ir/DistributionOps.td: their groups
// and peers exist in the enclosing module's mesh, their shapes agree with
// the group's size, and every started transfer is waited for once.
//
//===----------------------------------------------------------------------===//

#include "ir/DistributionOps.h"

#include "ir/AttrNames.h"
#include "ir/TensorGroups.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/FunctionInterfaces.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::cleave;

#define GET_TYPEDEF_CLASSES
#include "ir/CleaveTypes.cpp.inc"

#define GET_OP_CLASSES
#include "ir/DistributionOps.cpp.inc"

void CleaveDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "ir/CleaveTypes.cpp.inc"
      >();
}

void CleaveDialect::registerDistributionOps() {
  addOperations<
#define GET_OP_LIST
#include "ir/DistributionOps.cpp.inc"
      >();
}

namespace {

/// The mesh `op`'s group or peer is named in, or an error saying where to
/// declare it.
FailureOr<MeshAttr> meshOf(Operation *op) {
  if (MeshAttr mesh = lookupMesh(op))
    return mesh;
  op->emitOpError() << "needs a cleave.mesh on an enclosing module to "
                       "resolve its mesh axes";
  return failure();
}

/// The size of the group spanned by `axes`, checked against the mesh.
FailureOr<int64_t> verifyGroup(Operation *op, ArrayAttr axes) {
  FailureOr<MeshAttr> mesh = meshOf(op);
  if (failed(mesh))
    return failure();
  SmallVector<StringRef> names = llvm::to_vector(llvm::map_range(
      axes.getAsRange<StringAttr>(), [](StringAttr a) { return a.getValue(); }));
  return groupSize(names, *mesh, [op] { return op->emitOpError(); });
}

LogicalResult verifyReduce(Operation *op, StringRef reduce) {
  if (reduce == "sum" || reduce == "mean" || reduce == "max")
    return success();
  return op->emitOpError() << "reduce must be \"sum\", \"mean\" or \"max\", "
                              "got \""
                           << reduce << "\"";
}

/// `result` is `input` with dimension `dim` multiplied (a gather) or
/// divided (a scatter) by the `n` ranks of the group.
LogicalResult verifyResized(Operation *op, Type inputType, Type resultType,
                            int64_t dim, int64_t n, bool gather) {
  auto input = inputType.cast<RankedTensorType>();
  auto result = resultType.dyn_cast<RankedTensorType>();
  if (!result)
    return op->emitOpError() << "delivers a tensor, got " << resultType;
  if (dim < 0 || dim >= input.getRank())
    return op->emitOpError() << "dim " << dim << " is not a dimension of "
                             << input;
  if (input.getElementType() != result.getElementType() ||
      input.getRank() != result.getRank())
    return op->emitOpError() << "result " << result
                             << " must have the rank and element type of the "
                                "input "
                             << input;
  int64_t expected = input.getDimSize(dim) * n;
  if (!gather) {
    if (input.getDimSize(dim) % n != 0)
      return op->emitOpError()
             << "dimension " << dim << " of " << input << " (size "
             << input.getDimSize(dim) << ") is not divisible by the " << n
             << " ranks of the group";
    expected = input.getDimSize(dim) / n;
  }
  for (int64_t d = 0; d < input.getRank(); ++d) {
    int64_t want = d == dim ? expected : input.getDimSize(d);
    if (result.getDimSize(d) != want)
      return op->emitOpError()
             << "result " << result << " must have size " << want
             << " in dimension " << d << " (input " << input << ", "
             << (gather ? "gathered" : "scattered") << " over " << n
             << " ranks along dim " << dim << ")";
  }
  return success();
}

/// The type `token` delivers; an error unless it has one.
FailureOr<Type> tokenValue(Operation *op, Value token) {
  Type value = token.getType().cast<AsyncTokenType>().getValueType();
  if (value)
    return value;
  op->emitOpError() << "returns a token that delivers a value: "
                       "!cleave.async_token<tensor<...>>";
  return failure();
}

/// A started transfer is waited for exactly once.
LogicalResult verifyWaitedOnce(Operation *op, Value token) {
  int64_t waits = 0;
  for (Operation *user : token.getUsers()) {
    if (!isa<WaitOp>(user))
      return op->emitOpError() << "token is used by '" << user->getName()
                               << "'; only cleave.wait takes a token";
    ++waits;
  }
  if (waits != 1)
    return op->emitOpError() << "token must be waited for exactly once, it is "
                                "waited for "
                             << waits << " times";
  return success();
}

LogicalResult verifyPeer(Operation *op, StringRef axis, int64_t peer,
                         int64_t tag) {
  FailureOr<MeshAttr> mesh = meshOf(op);
  if (failed(mesh))
    return failure();
  std::optional<int64_t> size = mesh->getAxisSize(axis);
  if (!size)
    return op->emitOpError() << "mesh axis \"" << axis
                             << "\" is not in the mesh " << *mesh;
  if (peer < 0 || peer >= *size)
    return op->emitOpError() << "peer " << peer << " is not a coordinate of "
                             << "mesh axis \"" << axis << "\" (size " << *size
                             << ")";
  if (tag < 0)
    return op->emitOpError() << "tag must be non-negative, got " << tag;
  return success();
}

} // namespace

LogicalResult AllGatherOp::verify() {
  FailureOr<int64_t> n = verifyGroup(*this, getAxes());
  if (failed(n))
    return failure();
  return verifyResized(*this, getInput().getType(), getType(), getDim(), *n,
                       /*gather=*/true);
}

LogicalResult AllGatherStartOp::verify() {
  FailureOr<int64_t> n = verifyGroup(*this, getAxes());
  FailureOr<Type> value = tokenValue(*this, getToken());
  if (failed(n) || failed(value) ||
      failed(verifyResized(*this, getInput().getType(), *value, getDim(), *n,
                           /*gather=*/true)))
    return failure();
  return verifyWaitedOnce(*this, getToken());
}

LogicalResult ReduceScatterOp::verify() {
  FailureOr<int64_t> n = verifyGroup(*this, getAxes());
  if (failed(n) || failed(verifyReduce(*this, getReduce())))
    return failure();
  return verifyResized(*this, getInput().getType(), getType(), getDim(), *n,
                       /*gather=*/false);
}

LogicalResult ReduceScatterStartOp::verify() {
  FailureOr<int64_t> n = verifyGroup(*this, getAxes());
  FailureOr<Type> value = tokenValue(*this, getToken());
  if (failed(n) || failed(value) || failed(verifyReduce(*this, getReduce())) ||
      failed(verifyResized(*this, getInput().getType(), *value, getDim(), *n,
                           /*gather=*/false)))
    return failure();
  return verifyWaitedOnce(*this, getToken());
}

LogicalResult AxisIndexOp::verify() {
  FailureOr<MeshAttr> mesh = meshOf(*this);
  if (failed(mesh))
    return failure();
  if (!mesh->getAxisSize(getAxis()))
    return emitOpError() << "axis \"" << getAxis()
                         << "\" is not an axis of the mesh " << *mesh;
  return success();
}

/// Megatron's f and g: a non-empty group of whole mesh axes, or one
/// sub-axis "tensor:(pre)size" inside its axis (ir/TensorGroups.h).
static LogicalResult verifyTensorParallelGroup(Operation *op, ArrayAttr axes) {
  if (axes.empty())
    return op->emitOpError() << "needs the mesh axes of its group (axes = "
                                "[\"tensor\"])";
  if (axes.size() == 1)
    if (auto name = axes[0].dyn_cast<StringAttr>();
        name && name.getValue().contains(':')) {
      std::optional<AxisRef> ref = parseGroupAxis(name.getValue());
      if (!ref)
        return op->emitOpError() << "group \"" << name.getValue()
                                 << "\" is neither a mesh axis nor a "
                                    "sub-axis \"axis:(pre-size)size\"";
      FailureOr<MeshAttr> mesh = meshOf(op);
      if (failed(mesh))
        return failure();
      std::optional<int64_t> size = mesh->getAxisSize(ref->name);
      if (!size)
        return op->emitOpError() << "mesh axis \"" << ref->name
                                 << "\" is not in the mesh " << *mesh;
      if (*size % (ref->preSize * ref->size) != 0)
        return op->emitOpError()
               << "sub-axis \"" << name.getValue()
               << "\" is not inside the axis's " << *size << " ranks";
      return success();
    }
  return verifyGroup(op, axes);
}

LogicalResult TpCopyOp::verify() {
  return verifyTensorParallelGroup(*this, getAxes());
}

LogicalResult TpReduceOp::verify() {
  return verifyTensorParallelGroup(*this, getAxes());
}

LogicalResult SpAllGatherOp::verify() {
  if (failed(verifyTensorParallelGroup(*this, getAxes())))
    return failure();
  if (getSplitGrad() && getAxes().size() != 1)
    return emitOpError() << "with split_grad gathers over one mesh axis, got "
                         << getAxes();
  FailureOr<int64_t> n = verifyGroup(*this, getAxes());
  return verifyResized(*this, getInput().getType(), getType(), getDim(), *n,
                       /*gather=*/true);
}

LogicalResult SpReduceScatterOp::verify() {
  if (failed(verifyTensorParallelGroup(*this, getAxes())))
    return failure();
  FailureOr<int64_t> n = verifyGroup(*this, getAxes());
  return verifyResized(*this, getInput().getType(), getType(), getDim(), *n,
                       /*gather=*/false);
}

LogicalResult AllReduceStartOp::verify() {
  FailureOr<int64_t> n = verifyGroup(*this, getAxes());
  FailureOr<Type> value = tokenValue(*this, getToken());
  if (failed(n) || failed(value) || failed(verifyReduce(*this, getReduce())))
    return failure();
  if (*value != getInput().getType())
    return emitOpError() << "delivers " << *value << ", an all-reduce of "
                         << getInput().getType() << " delivers the same type";
  return verifyWaitedOnce(*this, getToken());
}

LogicalResult SendOp::verify() {
  return verifyPeer(*this, getAxis(), getPeer(), getTag());
}

LogicalResult SendStartOp::verify() {
  if (failed(verifyPeer(*this, getAxis(), getPeer(), getTag())))
    return failure();
  if (Type value = getToken().getType().getValueType())
    return emitOpError() << "a send delivers nothing: its token is "
                            "!cleave.async_token, got "
                         << getToken().getType();
  return verifyWaitedOnce(*this, getToken());
}

LogicalResult RecvOp::verify() {
  return verifyPeer(*this, getAxis(), getPeer(), getTag());
}

LogicalResult RecvStartOp::verify() {
  if (failed(verifyPeer(*this, getAxis(), getPeer(), getTag())))
    return failure();
  FailureOr<Type> value = tokenValue(*this, getToken());
  if (failed(value))
    return failure();
  auto tensor = value->dyn_cast<RankedTensorType>();
  if (!tensor || !tensor.hasStaticShape())
    return emitOpError() << "receives a statically shaped tensor, got "
                         << *value;
  return verifyWaitedOnce(*this, getToken());
}

LogicalResult WaitOp::inferReturnTypes(MLIRContext *context,
                                       std::optional<Location> loc,
                                       ValueRange operands,
                                       DictionaryAttr attributes,
                                       RegionRange regions,
                                       SmallVectorImpl<Type> &inferred) {
  auto token = operands[0].getType().dyn_cast<AsyncTokenType>();
  if (!token)
    return emitOptionalError(loc, "cleave.wait takes a !cleave.async_token");
  if (Type value = token.getValueType())
    inferred.push_back(value);
  return success();
}

LogicalResult WaitOp::verify() {
  Operation *start = getToken().getDefiningOp();
  if (!start || !isa<AllGatherStartOp, ReduceScatterStartOp, AllReduceStartOp,
                     SendStartOp, RecvStartOp>(start))
    return emitOpError() << "waits for a token that no cleave.*_start op "
                            "returned";
  return success();
}

//===----------------------------------------------------------------------===//
// Between memory spaces
//===----------------------------------------------------------------------===//

namespace {

/// Whether `v` lives in host memory: its op, or its function argument,
/// carries cleave.memory_space = #cleave.memory_space<host>.
bool isHostValue(Value v) {
  MemorySpaceAttr space;
  if (Operation *def = v.getDefiningOp()) {
    space = def->getAttrOfType<MemorySpaceAttr>(kMemorySpaceAttr);
  } else if (auto arg = v.dyn_cast<BlockArgument>()) {
    auto func = dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp());
    if (func && arg.getOwner()->isEntryBlock())
      space = func.getArgAttrOfType<MemorySpaceAttr>(arg.getArgNumber(),
                                                     kMemorySpaceAttr);
  }
  return space && space.getValue() == MemorySpace::host;
}

} // namespace

LogicalResult OffloadOp::verify() {
  if (!isHostValue(getResult()))
    return emitOpError() << "result lives in host memory: the op needs "
                            "cleave.memory_space = #cleave.memory_space<host>";
  if (isHostValue(getInput()))
    return emitOpError() << "input is already in host memory";
  return success();
}

LogicalResult FetchOp::verify() {
  if (isHostValue(getResult()))
    return emitOpError() << "result lives in device memory: remove its "
                            "cleave.memory_space";
  if (!isHostValue(getInput()))
    return emitOpError() << "input must be a host value (a cleave.offload's "
                            "result, or an argument marked "
                            "cleave.memory_space = #cleave.memory_space<host>)";
  return success();
}
