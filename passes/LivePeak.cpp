//===- LivePeak.cpp - the live tensor bytes a stage's functions hold ------===//
//
// LivePeak.h says what is counted and why. Two replays of the stage's
// functions (forward, backward, optimizer): the first finds which values
// the emitted program ever frees, the second counts the others as always
// live (from the second step on they are) and follows the rest.
//
//===----------------------------------------------------------------------===//

#include "passes/LivePeak.h"

#include "ir/AttrNames.h"
#include "ir/CleaveOps.h"
#include "ir/DistributionOps.h"
#include "passes/ForwardBackward.h"
#include "passes/Layout.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// Ops that read values but after which the emitter frees nothing: their
/// operands stay live (a send does not wait for its receiver; a return
/// hands its values on; the gradient buckets name parameters).
bool freesNothing(Operation &op) {
  return isa<SendOp, func::ReturnOp, AllReduceGradsOp, ReduceScatterGradsOp,
             AllGatherParamsOp, AllReduceGradsStartOp,
             ReduceScatterGradsStartOp, WaitGradsOp, RecvOp>(op);
}

/// Ops whose results are no tensors of their own (views of parameters and
/// gradients) or always live (constants, counted as persistent).
bool isStorage(Operation &op) {
  return isa<ConstantOp, AxisIndexOp, GetParamOp, GetGradOp, GetGradShardOp>(
      op);
}

/// The bytes of the runtime tensor that holds `v`: a gathered parameter's
/// padded space (its whole is a view of it).
int64_t bytesOf(Value v) {
  if (auto gather = v.getDefiningOp<GatherParamOp>())
    if (ParameterOp param = lookupParameter(gather, gather.getNameAttr()))
      if (std::optional<StateShards> shards = stateShards(param))
        return shards->padded() *
               elementBytes(
                   param.getType().cast<RankedTensorType>().getElementType());
  return tensorBytes(v.getType());
}

/// The memory space of the tensor the emitter makes for `v`: only an
/// offload writes the host arena.
int spaceOf(Value v) { return v.getDefiningOp<OffloadOp>() ? 1 : 0; }

/// An input the runtime fills (so that it is live): the token ids and
/// targets per microbatch, the step and the loss scale per step.
bool isFilled(func::FuncOp func, unsigned index) {
  auto role = func.getArgAttrOfType<StringAttr>(index, "cleave.role");
  return role && (role.getValue() == "tokens" ||
                  role.getValue() == "targets" || role.getValue() == "step" ||
                  role.getValue() == "loss_scale");
}

/// The planned offset of `v` (an op result's cleave.offsets entry or an
/// argument's cleave.offset), or -1.
int64_t plannedOffset(Value v) {
  if (auto arg = v.dyn_cast<BlockArgument>()) {
    auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
    auto at = func ? func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                         "cleave.offset")
                   : IntegerAttr();
    return at ? at.getInt() : -1;
  }
  auto result = v.cast<OpResult>();
  auto offsets =
      result.getOwner()->getAttrOfType<DenseI64ArrayAttr>("cleave.offsets");
  return offsets && result.getResultNumber() < offsets.size()
             ? offsets[result.getResultNumber()]
             : -1;
}

class Replay {
public:
  /// First replay: only which values get freed.
  llvm::DenseSet<Value> freed;
  bool counting = false;
  std::array<int64_t, 2> current = {0, 0}, peak = {0, 0};
  /// Written and never freed; filled inputs; constants.
  std::array<int64_t, 2> neverFreed = {0, 0};
  int64_t inputs = 0, constants = 0;

  void run(func::FuncOp func) {
    Block &body = func.getBody().front();
    llvm::DenseMap<Value, Operation *> lastUser;
    for (Operation &op : body)
      for (Value operand : op.getOperands())
        lastUser[operand] = &op;
    llvm::DenseSet<Value> freeable;
    func::FuncOp forward = forwardOf(func);
    for (BlockArgument arg : body.getArguments()) {
      auto from = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                     "cleave.saved_from");
      if (!from) {
        if (isFilled(func, arg.getArgNumber()))
          inputs += tensorBytes(arg.getType());
        continue;
      }
      if (!forward)
        continue;
      Operation *ret = forward.getBody().front().getTerminator();
      if (from.getInt() < 0 || from.getInt() >= ret->getNumOperands())
        continue;
      Value source = canonical(ret->getOperand(from.getInt()));
      alias[arg] = source;
      // The emitter frees a saved value where it is an activation's tensor
      // (not an input's, a constant's or a parameter's).
      if (auto result = source.dyn_cast<OpResult>();
          result && !isStorage(*result.getOwner()))
        freeable.insert(arg);
    }
    for (Value arg : freeable)
      if (!lastUser.count(arg))
        free(arg);
    for (Operation &op : body) {
      if (isa<ConstantOp, AxisIndexOp>(op)) {
        constants += tensorBytes(op.getResult(0).getType());
        continue;
      }
      if (isStorage(op))
        continue;
      if (isa<RecvOp>(op)) {
        write(op.getResult(0));
        continue;
      }
      if (freesNothing(op))
        continue;
      // The fused loss writes the logits' gradient over the logits: those
      // are freed before it.
      if (isa<SoftmaxCrossEntropyFusedOp>(op)) {
        auto offsets = op.getAttrOfType<DenseI64ArrayAttr>("cleave.offsets");
        for (Value v : op.getOperands())
          if (offsets && freeable.contains(v) && lastUser.lookup(v) == &op &&
              llvm::is_contained(offsets.asArrayRef(), plannedOffset(v))) {
            free(v);
            freeable.erase(v);
          }
      }
      // Accumulations and updates write gradients, parameters and state:
      // persistent, counted apart.
      if (!isa<AccumulateGradOp, AdamWOp, SgdOp>(op)) {
        for (Value result : op.getResults()) {
          write(result);
          freeable.insert(result);
        }
      }
      // What the op read last, then its results nobody reads.
      llvm::SmallPtrSet<Value, 4> done;
      for (Value v : op.getOperands())
        if (freeable.contains(v) && lastUser.lookup(v) == &op &&
            done.insert(v).second)
          free(v);
      for (Value result : op.getResults())
        if (!lastUser.count(result))
          free(result);
    }
  }

private:
  llvm::DenseMap<Value, Value> alias; // a backward's argument -> forward value
  llvm::DenseMap<Value, int64_t> live; // counted values -> bytes

  Value canonical(Value v) const {
    for (auto it = alias.find(v); it != alias.end(); it = alias.find(v))
      v = it->second;
    return v;
  }

  void write(Value v) {
    v = canonical(v);
    int space = spaceOf(v);
    if (!counting) {
      live.try_emplace(v, 0);
      return;
    }
    if (!freed.contains(v)) {
      neverFreed[space] += bytesOf(v);
      return;
    }
    if (!live.try_emplace(v, bytesOf(v)).second)
      return;
    current[space] += bytesOf(v);
    peak[space] = std::max(peak[space], current[space]);
  }

  void free(Value v) {
    v = canonical(v);
    auto it = live.find(v);
    if (it == live.end())
      return; // never written: the runtime's Free of a dead tensor
    if (!counting)
      freed.insert(v);
    else
      current[spaceOf(v)] -= it->second;
    live.erase(it);
  }
};

} // namespace

LiveProfile mlir::cleave::liveProfileOf(ModuleOp stage) {
  LiveProfile profile;
  auto memory = stage->getAttrOfType<DictionaryAttr>("cleave.memory");
  auto slots = memory ? memory.getAs<IntegerAttr>("slots") : IntegerAttr();
  profile.copies = std::max<int64_t>(1, slots ? slots.getInt() : 0);

  // Parameters (a ZeRO-3 parameter: its chunk), their gradients and the
  // optimizer's state, as the emitter's tensors.
  int64_t models = 0;
  for (auto param : stage.getOps<ParameterOp>()) {
    std::optional<StateShards> shards = stateShards(param);
    int64_t bytes = shards && param->hasAttr(kParamAxisAttr)
                        ? tensorBytes(chunkType(param, *shards))
                        : tensorBytes(param.getType());
    if (param->hasAttr(kWorkingTypeAttr)) {
      // ZeRO-1's split masters: the whole working copy and an fp32 chunk.
      models += tensorBytes(readType(param)) +
                tensorBytes(chunkType(param, *shards));
    } else {
      models += bytes;
    }
    if (param->hasAttr("cleave.grad_offset"))
      models += bytes;
  }
  stage.walk([&](Operation *op) {
    auto states = op->getAttrOfType<DenseI64ArrayAttr>("cleave.state_offsets");
    if (states && isa<AdamWOp, SgdOp>(op))
      models += int64_t(states.size()) *
                tensorBytes(op->getOperand(0).getType());
  });

  SmallVector<func::FuncOp> forwards, backwards, optimizers;
  for (auto func : stage.getOps<func::FuncOp>()) {
    if (func.isExternal() || func->hasAttr(kLastMicrobatchOfAttr))
      continue;
    auto kind = func->getAttrOfType<StringAttr>("cleave.kind");
    if (kind && kind.getValue() == "backward")
      backwards.push_back(func);
    else if (kind && kind.getValue() == "optimizer")
      optimizers.push_back(func);
    else
      forwards.push_back(func);
  }

  Replay first;
  for (auto list : {&forwards, &backwards, &optimizers})
    for (func::FuncOp func : *list)
      first.run(func);

  // The second replay, counting: per microbatch (what the emitter copies
  // per slot), then once per step.
  Replay count;
  count.freed = std::move(first.freed);
  count.counting = true;
  auto runAll = [&](ArrayRef<func::FuncOp> funcs) {
    count.peak = count.current;
    for (func::FuncOp func : funcs)
      count.run(func);
    return count.peak;
  };
  profile.forwardPeak = runAll(forwards);
  profile.saved = count.current;
  profile.backwardPeak = runAll(backwards);
  std::array<int64_t, 2> perMicrobatch = count.neverFreed;
  int64_t inputs = count.inputs, constants = count.constants;
  count.neverFreed = {0, 0};
  count.inputs = count.constants = 0;
  // Whatever a forward-only stage leaves is the next microbatch's too.
  count.current = {0, 0};
  profile.optimizerPeak = runAll(optimizers);
  for (int space = 0; space < 2; ++space)
    profile.persistent[space] =
        profile.copies * perMicrobatch[space] + count.neverFreed[space];
  profile.persistent[0] += models +
                           profile.copies * (inputs + constants) +
                           count.inputs + count.constants;
  return profile;
}
