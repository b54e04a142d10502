//===- TrainingOps.cpp - verifiers of the gradient and optimizer ops ------===//
//
// The ops the training passes write (ir/CleaveOps.td, "Gradients",
// "Training state and the optimizer", "Communication"): each verifier checks
// that a gradient has the type of what it is the gradient of, so a wrong
// rule fails at the op that it built.
//
//===----------------------------------------------------------------------===//

#include "ir/AttrNames.h"
#include "ir/CleaveOps.h"
#include "ir/DistributionOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/FunctionInterfaces.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mlir::cleave;

namespace {

RankedTensorType typeOf(Value v) {
  return v.getType().cast<RankedTensorType>();
}

/// `what` must have type `expected`.
LogicalResult expectType(Operation *op, StringRef what, Type found,
                         Type expected) {
  if (found == expected)
    return success();
  return op->emitOpError() << what << " must be " << expected << ", got "
                           << found;
}

LogicalResult expectAxis(Operation *op, int64_t axis, int64_t rank) {
  if (axis >= 0 && axis < rank)
    return success();
  return op->emitOpError() << "axis " << axis << " is out of range for rank "
                           << rank;
}

/// The parameter `name` refers to, with a type equal to `type`.
LogicalResult verifyParameterUse(Operation *op, FlatSymbolRefAttr name,
                                 Type type, SymbolTableCollection &symbols) {
  auto param = symbols.lookupNearestSymbolFrom<ParameterOp>(op, name);
  if (!param)
    param = lookupParameter(op, name);
  if (!param)
    return op->emitOpError() << "no cleave.parameter named " << name;
  if (param.getType() != type)
    return op->emitOpError() << "gradient type " << type
                             << " differs from the type of parameter " << name
                             << ", " << param.getType();
  return success();
}

/// An optimizer update's gradient: the parameter's type, or, for a
/// parameter whose state is split (ZeRO-1), one chunk of it.
LogicalResult verifyUpdateGrad(Operation *op, FlatSymbolRefAttr name,
                               Type type, SymbolTableCollection &symbols) {
  ParameterOp param = lookupParameter(op, name);
  std::optional<StateShards> shards = param ? stateShards(param) : std::nullopt;
  if (!shards)
    return verifyParameterUse(op, name, type, symbols);
  return expectType(op, "the gradient of a parameter with split optimizer "
                        "state",
                    type, chunkType(param, *shards));
}

/// A bucket of parameters whose optimizer state is split over `group`.
LogicalResult verifySplitBucket(Operation *op, ArrayAttr params,
                                StringRef group) {
  if (params.empty())
    return op->emitOpError() << "an empty bucket";
  for (Attribute name : params) {
    ParameterOp param = lookupParameter(op, name.cast<FlatSymbolRefAttr>());
    if (!param)
      return op->emitOpError() << "no cleave.parameter named " << name;
    std::optional<StateShards> shards = stateShards(param);
    if (!shards || shards->axis != group)
      return op->emitOpError()
             << "parameter " << name << " does not split its optimizer state "
             << "over \"" << group << "\" (its cleave.state_axis)";
  }
  return success();
}

/// The learning-rate schedule and clipping attributes of an optimizer op.
template <typename OptimizerOp> LogicalResult verifyOptimizer(OptimizerOp op) {
  if (!(op.getLr().convertToDouble() >= 0))
    return op.emitOpError() << "lr must be non-negative";
  if (!(op.getMaxNorm().convertToDouble() >= 0))
    return op.emitOpError() << "max_norm must be non-negative (0: off)";
  if (static_cast<int64_t>(op.getWarmupSteps()) < 0 ||
      static_cast<int64_t>(op.getDecaySteps()) < 0)
    return op.emitOpError() << "warmup_steps and decay_steps must be "
                               "non-negative";
  if (op.getMaxNorm().convertToDouble() > 0 && !op.getSumSquares())
    return op.emitOpError() << "max_norm needs the global sum of squares "
                               "(`norm %s`)";
  return success();
}

} // namespace

LogicalResult GeluGradOp::verify() {
  if (getApproximate() != "none" && getApproximate() != "tanh")
    return emitOpError() << "approximate must be \"none\" or \"tanh\", got \""
                         << getApproximate() << "\"";
  return success();
}

LogicalResult SoftmaxGradOp::verify() {
  return expectAxis(*this, getAxis(), typeOf(getY()).getRank());
}

LogicalResult LogSoftmaxGradOp::verify() {
  return expectAxis(*this, getAxis(), typeOf(getY()).getRank());
}

/// dy, x and dx of one type; the parameter gradients x.shape[axis:].
static LogicalResult verifyNormGrad(Operation *op, Value dy, Value x,
                                    Value scale, int64_t axis,
                                    ValueRange paramGrads) {
  auto xType = typeOf(x);
  if (failed(expectType(op, "dy", dy.getType(), xType)) ||
      failed(expectType(op, "dx", op->getResult(0).getType(), xType)) ||
      failed(expectAxis(op, axis, xType.getRank())))
    return failure();
  auto paramType = RankedTensorType::get(xType.getShape().drop_front(axis),
                                         xType.getElementType());
  if (scale && failed(expectType(op, "scale", scale.getType(), paramType)))
    return failure();
  for (Value grad : paramGrads)
    if (failed(expectType(op, "a parameter gradient", grad.getType(),
                          paramType)))
      return failure();
  return success();
}

LogicalResult LayerNormGradOp::verify() {
  return verifyNormGrad(*this, getDy(), getX(), getScale(), getAxis(),
                        {getDscale(), getDbias()});
}

LogicalResult RmsNormGradOp::verify() {
  return verifyNormGrad(*this, getDy(), getX(), getScale(), getAxis(),
                        {getDscale()});
}

LogicalResult AttentionGradOp::verify() {
  auto q = typeOf(getQ()), k = typeOf(getK()), v = typeOf(getV());
  if (q.getRank() != 4 || k != v || k.getRank() != 4)
    return emitOpError() << "q must be [B, H, Tq, D] and k, v one type "
                            "[B, Hkv, Tk, D], got "
                         << q << ", " << k << ", " << v;
  if (failed(expectType(*this, "dy", getDy().getType(), q)) ||
      failed(expectType(*this, "dq", getDq().getType(), q)) ||
      failed(expectType(*this, "dk", getDk().getType(), k)) ||
      failed(expectType(*this, "dv", getDv().getType(), v)))
    return failure();
  return success();
}

LogicalResult EmbeddingGradOp::verify() {
  auto dy = typeOf(getDy()), ids = typeOf(getIds()),
       table = typeOf(getResult());
  if (table.getRank() != 2 || dy.getRank() != ids.getRank() + 1 ||
      dy.getShape().drop_back() != ids.getShape() ||
      dy.getShape().back() != table.getDimSize(1) ||
      dy.getElementType() != table.getElementType())
    return emitOpError() << "dy must be [ids..., D] and the result [V, D], got "
                         << dy << ", ids " << ids << " and " << table;
  return verifyPaddingIdx(*this, getPaddingIdx(), table.getDimSize(0));
}

LogicalResult GatherGradOp::verify() {
  auto data = typeOf(getResult());
  int64_t axis = getAxis();
  if (failed(expectAxis(*this, axis, data.getRank())))
    return failure();
  SmallVector<int64_t> shape(data.getShape().take_front(axis));
  llvm::append_range(shape, typeOf(getIndices()).getShape());
  llvm::append_range(shape, data.getShape().drop_front(axis + 1));
  return expectType(*this, "dy", getDy().getType(),
                    RankedTensorType::get(shape, data.getElementType()));
}

/// dloss has the loss's type: the loss of `input` and `target` reduced by
/// `reduction`.
static LogicalResult verifyLossGrad(Operation *op, Value dloss, Value input,
                                    Value target, Type inputType,
                                    LossReduction reduction) {
  SmallVector<Type> loss;
  if (failed(inferLossResult(op->getLoc(), input, target, reduction, loss)))
    return failure();
  if (failed(expectType(op, "dloss", dloss.getType(), loss.front())))
    return failure();
  return expectType(op, "the result", op->getResult(0).getType(), inputType);
}

LogicalResult SoftmaxCrossEntropyGradOp::verify() {
  return verifyLossGrad(*this, getDloss(), getInput(), getTarget(),
                        getInput().getType(), getReduction());
}

LogicalResult SoftmaxCrossEntropyFusedOp::verify() {
  SmallVector<Type> loss;
  if (failed(inferLossResult(getLoc(), getInput(), getTarget(),
                             getReduction(), loss)) ||
      failed(expectType(*this, "the loss", getLoss().getType(),
                        loss.front())) ||
      failed(expectType(*this, "dloss", getDloss().getType(), loss.front())))
    return failure();
  return expectType(*this, "dinput", getDinput().getType(),
                    getInput().getType());
}

LogicalResult NllLossGradOp::verify() {
  return verifyLossGrad(*this, getDloss(), getResult(), getTarget(),
                        getResult().getType(), getReduction());
}

LogicalResult SliceGradOp::verify() {
  auto x = typeOf(getResult());
  auto start = getStart(), limit = getLimit(), step = getStep();
  int64_t rank = x.getRank();
  if ((int64_t)start.size() != rank || (int64_t)limit.size() != rank ||
      (int64_t)step.size() != rank)
    return emitOpError() << "start, limit and step need one entry per "
                            "dimension of "
                         << x;
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    if (step[d] == 0)
      return emitOpError() << "step " << d << " is zero";
    int64_t span = limit[d] - start[d];
    int64_t n = step[d] > 0 ? (span + step[d] - 1) / step[d]
                            : (-span - step[d] - 1) / -step[d];
    shape.push_back(std::max<int64_t>(0, n));
  }
  return expectType(*this, "dy", getDy().getType(),
                    RankedTensorType::get(shape, x.getElementType()));
}

LogicalResult
AccumulateGradOp::verifySymbolUses(SymbolTableCollection &symbols) {
  // A sharded parameter (cleave.param_axis) accumulates into its chunk.
  ParameterOp param = lookupParameter(*this, getNameAttr());
  std::optional<StateShards> shards =
      param && param->hasAttr(kParamAxisAttr) ? stateShards(param)
                                              : std::nullopt;
  if (shards)
    return expectType(*this, "the gradient chunk of a sharded parameter",
                      getGrad().getType(), chunkType(param, *shards));
  return verifyParameterUse(*this, getNameAttr(), getGrad().getType(), symbols);
}

LogicalResult GetGradOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyParameterUse(*this, getNameAttr(), getResult().getType(),
                            symbols);
}

LogicalResult GetGradShardOp::verifySymbolUses(SymbolTableCollection &) {
  ParameterOp param = lookupParameter(*this, getNameAttr());
  if (!param)
    return emitOpError() << "no cleave.parameter named " << getNameAttr();
  std::optional<StateShards> shards = stateShards(param);
  if (!shards)
    return emitOpError() << "parameter " << getNameAttr()
                         << " has no cleave.state_axis: its gradient is not "
                            "split; use cleave.get_grad";
  return expectType(*this, "the result", getResult().getType(),
                    chunkType(param, *shards));
}

LogicalResult CastMasterChunkOp::verifySymbolUses(SymbolTableCollection &) {
  ParameterOp param = lookupParameter(*this, getNameAttr());
  if (!param)
    return emitOpError() << "no cleave.parameter named " << getNameAttr();
  if (!param->hasAttr(kWorkingTypeAttr))
    return emitOpError() << "parameter " << getNameAttr()
                         << " has no cleave.working_type: its fp32 value is "
                            "the parameter itself, not a master chunk";
  return success();
}

LogicalResult GatherParamOp::verifySymbolUses(SymbolTableCollection &) {
  ParameterOp param = lookupParameter(*this, getNameAttr());
  if (!param)
    return emitOpError() << "no cleave.parameter named " << getNameAttr();
  auto axis = param->getAttrOfType<StringAttr>(kParamAxisAttr);
  std::optional<StateShards> shards = stateShards(param);
  if (!axis || !shards || shards->axis != axis.getValue())
    return emitOpError() << "parameter " << getNameAttr()
                         << " is not sharded (it needs a cleave.param_axis "
                            "equal to its cleave.state_axis); read it with "
                            "cleave.get_param";
  return expectType(*this, "the result", getResult().getType(),
                    param.getType());
}

LogicalResult GatherParamOp::verify() {
  if (!getEvent())
    return success();
  if (*getEvent() <= 0)
    return emitOpError() << "event must be positive, got " << *getEvent();
  WaitParamOp wait;
  for (Operation *user : getResult().getUsers())
    if (auto w = dyn_cast<WaitParamOp>(user)) {
      if (wait)
        return emitOpError() << "started gather (event " << *getEvent()
                             << ") has more than one cleave.wait_param";
      wait = w;
    }
  if (!wait)
    return emitOpError() << "started gather (event " << *getEvent()
                         << ") has no cleave.wait_param";
  int nextHops = 0;
  for (Operation *user : getResult().getUsers())
    nextHops += isa<GatherNextHopOp>(user);
  if (nextHops > 1)
    return emitOpError() << "started gather (event " << *getEvent()
                         << ") has more than one cleave.gather_next_hop";
  return success();
}

LogicalResult GatherNextHopOp::verify() {
  auto gather = getGathered().getDefiningOp<GatherParamOp>();
  if (!gather || !gather.getEvent() || !gather->hasAttr(kGatherPerHostAttr))
    return emitOpError() << "needs a value that a started hierarchical "
                            "cleave.gather_param (with an event and "
                         << kGatherPerHostAttr << ") defines";
  if (gather->getBlock() != (*this)->getBlock())
    return emitOpError() << "is not in the block of its gather";
  for (Operation *user : getGathered().getUsers()) {
    if (user == *this)
      continue;
    Operation *reader = (*this)->getBlock()->findAncestorOpInBlock(*user);
    if (reader && reader->isBeforeInBlock(*this))
      return emitOpError() << "comes after a "
                           << (isa<WaitParamOp>(user) ? "wait for" : "reader of")
                           << " the gathered parameter "
                           << gather.getNameAttr()
                           << "; the next hop must come first";
  }
  return success();
}

LogicalResult WaitParamOp::verify() {
  auto gather = getGathered().getDefiningOp<GatherParamOp>();
  if (!gather || !gather.getEvent())
    return emitOpError() << "waits for a value that no started "
                            "cleave.gather_param (with an event) defines";
  if (gather->getBlock() != (*this)->getBlock())
    return emitOpError() << "is not in the block of its gather";
  for (Operation *user : getGathered().getUsers())
    if (user != *this && !isa<GatherNextHopOp>(user)) {
      Operation *reader = (*this)->getBlock()->findAncestorOpInBlock(*user);
      if (reader && reader->isBeforeInBlock(*this))
        return emitOpError()
               << "comes after a reader of the gathered parameter "
               << gather.getNameAttr() << "; the wait must come first";
    }
  return success();
}

LogicalResult WaitScatterOp::verify() {
  auto scatter = getScattered().getDefiningOp<ReduceScatterOp>();
  if (!scatter || !scatter->hasAttr(kEventAttr))
    return emitOpError() << "waits for a value that no started "
                            "cleave.reduce_scatter (with a cleave.event) "
                            "defines";
  if (scatter.getInput() != getInput())
    return emitOpError() << "names an input that is not its reduce-scatter's";
  if (scatter->getBlock() != (*this)->getBlock())
    return emitOpError() << "is not in the block of its reduce-scatter";
  for (Operation *user : getScattered().getUsers())
    if (user != *this) {
      Operation *reader = (*this)->getBlock()->findAncestorOpInBlock(*user);
      if (reader && reader->isBeforeInBlock(*this))
        return emitOpError() << "comes after a reader of the reduce-scattered "
                                "value; the wait must come first";
    }
  return success();
}

LogicalResult AdamWOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyUpdateGrad(*this, getNameAttr(), getGrad().getType(), symbols);
}

LogicalResult SgdOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyUpdateGrad(*this, getNameAttr(), getGrad().getType(), symbols);
}

LogicalResult ReduceScatterGradsOp::verify() {
  if (getReduce() != "mean" && getReduce() != "sum")
    return emitOpError() << "reduce must be \"mean\" or \"sum\", got \""
                         << getReduce() << "\"";
  return verifySplitBucket(*this, getParams(), getGroup());
}

LogicalResult AllGatherParamsOp::verify() {
  return verifySplitBucket(*this, getParams(), getGroup());
}

LogicalResult AdamWOp::verify() {
  double b1 = getBeta1().convertToDouble(), b2 = getBeta2().convertToDouble();
  if (!(b1 >= 0 && b1 < 1 && b2 >= 0 && b2 < 1))
    return emitOpError() << "beta1 and beta2 must be in [0, 1), got " << b1
                         << " and " << b2;
  return verifyOptimizer(*this);
}

LogicalResult SgdOp::verify() { return verifyOptimizer(*this); }

LogicalResult AllReduceOp::verify() {
  if (getReduce() != "sum" && getReduce() != "mean" && getReduce() != "max")
    return emitOpError() << "reduce must be \"sum\", \"mean\" or \"max\", "
                            "got \""
                         << getReduce() << "\"";
  if (getGroup().empty())
    return emitOpError() << "needs the name of a mesh group";
  // The group is a mesh axis; checked once the module declares its mesh.
  if (MeshAttr mesh = lookupMesh(*this))
    if (!mesh.getAxisSize(getGroup()))
      return emitOpError() << "group \"" << getGroup()
                           << "\" is not an axis of the mesh " << mesh;
  return success();
}

/// A bucket of gradient buffers: parameters, reduced by mean or sum.
static LogicalResult verifyBucket(Operation *op, ArrayAttr params,
                                  StringRef reduce) {
  if (reduce != "mean" && reduce != "sum")
    return op->emitOpError() << "reduce must be \"mean\" or \"sum\", got \""
                             << reduce << "\"";
  if (params.empty())
    return op->emitOpError() << "an empty bucket";
  for (Attribute name : params)
    if (!lookupParameter(op, name.cast<FlatSymbolRefAttr>()))
      return op->emitOpError() << "no cleave.parameter named " << name;
  return success();
}

LogicalResult AllReduceGradsOp::verify() {
  if (failed(verifyBucket(*this, getParams(), getReduce())))
    return failure();
  MeshAttr mesh = lookupMesh(*this);
  std::optional<int64_t> size =
      mesh ? mesh.getAxisSize(getGroup()) : std::nullopt;
  if (mesh && !size)
    return emitOpError() << "group \"" << getGroup()
                         << "\" is not an axis of the mesh " << mesh;
  if (auto members = getMembers()) {
    if (members->empty())
      return emitOpError() << "members must list at least one coordinate";
    llvm::SmallDenseSet<int64_t> seen;
    for (int64_t m : *members) {
      if (m < 0 || (size && m >= *size))
        return emitOpError() << "member " << m << " is not a coordinate of "
                             << "mesh axis \"" << getGroup() << "\"";
      if (!seen.insert(m).second)
        return emitOpError() << "member " << m << " is listed twice";
    }
  }
  return success();
}

/// A started gradient all-reduce and its wait are paired by `event` across
/// the functions of one rank's modules: the start in a backward function, the wait
/// in the optimizer, each exactly once.
static LogicalResult verifyGradientEvent(Operation *op, int64_t event) {
  bool start = isa<AllReduceGradsStartOp, ReduceScatterGradsStartOp>(op);
  if (event < 1)
    return op->emitOpError() << "event must be at least 1, got " << event;
  StringRef expected = start ? "backward" : "optimizer";
  auto func = op->getParentOfType<FunctionOpInterface>();
  auto kind = func ? func->getAttrOfType<StringAttr>("cleave.kind")
                   : StringAttr();
  if (!kind || kind.getValue() != expected)
    return op->emitOpError() << "must be in a function of cleave.kind \""
                             << expected << "\"";
  auto module = func->getParentOfType<ModuleOp>();
  if (!module)
    return success();
  // A rank's stage modules share its events (a merged optimizer waits for
  // what another stage's backward started).
  int64_t starts = 0, waits = 0;
  for (ModuleOp m : rankModules(module))
  for (auto f : m.getOps<FunctionOpInterface>())
    f->walk([&](Operation *o) {
      if (auto s = dyn_cast<AllReduceGradsStartOp>(o))
        starts += int64_t(s.getEvent()) == event;
      else if (auto s = dyn_cast<ReduceScatterGradsStartOp>(o))
        starts += int64_t(s.getEvent()) == event;
      else if (auto w = dyn_cast<WaitGradsOp>(o))
        waits += int64_t(w.getEvent()) == event;
    });
  if (start && waits == 0)
    return op->emitOpError()
           << "event " << event << " is started but never waited for: the "
           << "optimizer needs a cleave.wait_grads event " << event;
  if (!start && starts == 0)
    return op->emitOpError()
           << "event " << event << " is waited for but never started: a "
           << "backward needs a cleave.all_reduce_grads_start with event "
           << event;
  if (starts > 1 || waits > 1)
    return op->emitOpError() << "event " << event << " is started " << starts
                             << " and waited for " << waits
                             << " times on the rank; each event is started "
                                "once and waited for once";
  return success();
}

LogicalResult AllReduceGradsStartOp::verify() {
  if (getGroup().empty())
    return emitOpError() << "needs the name of a mesh group";
  if (failed(verifyBucket(*this, getParams(), getReduce())))
    return failure();
  return verifyGradientEvent(*this, getEvent());
}

LogicalResult WaitGradsOp::verify() {
  return verifyGradientEvent(*this, getEvent());
}

LogicalResult ReduceScatterGradsStartOp::verify() {
  if (getReduce() != "mean" && getReduce() != "sum")
    return emitOpError() << "reduce must be \"mean\" or \"sum\", got \""
                         << getReduce() << "\"";
  if (failed(verifySplitBucket(*this, getParams(), getGroup())))
    return failure();
  return verifyGradientEvent(*this, getEvent());
}
