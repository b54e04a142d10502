//===- MemoryPlan.cpp - static offsets from liveness ----------------------===//
//
// Every tensor of a step gets a fixed offset in one arena, so the runtime
// allocates once and the plan's predicted peak is exactly what it uses.
// Parameters, constants and function inputs are live for the whole step;
// activations live from definition to last use and reuse freed space
// first-fit. Results are written as attributes (see Passes.td).
//
// A pipeline stage (`cleave.slots = K`) keeps up to K microbatches in
// flight: the values that outlive a function (what it receives, returns or
// saves for backward) get a slot region of their own, which the emitter
// repeats K times; the activations inside a function share one region.
//
//===----------------------------------------------------------------------===//

#include "ir/AttrNames.h"
#include "ir/CleaveOps.h"
#include "ir/DistributionOps.h"
#include "passes/ForwardBackward.h"
#include "passes/Layout.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

#include <map>

namespace mlir::cleave {
#define GEN_PASS_DEF_MEMORYPLAN
#include "passes/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// First-fit allocation with coalescing free blocks over a growing region;
/// `peak` is the high-water mark.
class Allocator {
public:
  explicit Allocator(int64_t alignment) : alignment(alignment) {}

  /// First fit, or (`bestFit`) the smallest free block that fits.
  int64_t allocate(int64_t size, bool bestFit = false) {
    size = alignUp(std::max<int64_t>(size, 1), alignment);
    auto best = freeBlocks.end();
    if (bestFit)
      for (auto it = freeBlocks.begin(); it != freeBlocks.end(); ++it)
        if (it->second >= size &&
            (best == freeBlocks.end() || it->second < best->second))
          best = it;
    for (auto it = bestFit ? best : freeBlocks.begin(); it != freeBlocks.end();
         ++it) {
      if (it->second < size)
        continue;
      int64_t offset = it->first, left = it->second - size;
      freeBlocks.erase(it);
      if (left > 0)
        freeBlocks[offset + size] = left;
      return offset;
    }
    // Grow, reusing a free block that ends at the top.
    int64_t offset = top;
    if (!freeBlocks.empty()) {
      auto last = std::prev(freeBlocks.end());
      if (last->first + last->second == top) {
        offset = last->first;
        freeBlocks.erase(last);
      }
    }
    top = offset + size;
    peak = std::max(peak, top);
    return offset;
  }

  void release(int64_t offset, int64_t size) {
    size = alignUp(std::max<int64_t>(size, 1), alignment);
    auto next = freeBlocks.lower_bound(offset);
    if (next != freeBlocks.end() && offset + size == next->first) {
      size += next->second;
      next = freeBlocks.erase(next);
    }
    if (next != freeBlocks.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        prev->second += size;
        return;
      }
    }
    freeBlocks[offset] = size;
  }

  /// The end of the space in use: the top, less a free block ending there.
  int64_t inUseExtent() const {
    if (!freeBlocks.empty()) {
      auto last = std::prev(freeBlocks.end());
      if (last->first + last->second == top)
        return last->first;
    }
    return top;
  }

  int64_t peak = 0;

private:
  int64_t alignment;
  int64_t top = 0;
  std::map<int64_t, int64_t> freeBlocks; // offset -> size
};

/// The activations of one step, one first-fit allocator per memory space:
/// a value whose op carries `cleave.memory_space = #cleave.memory_space<host>`
/// (activation offload) takes space in the host arena, every other one in
/// the device arena.
struct SpaceAllocators {
  explicit SpaceAllocators(int64_t alignment)
      : device(alignment), host(alignment) {}
  Allocator device, host;
  llvm::DenseSet<Value> onHost;
  // Whole parameters gathered (ZeRO-3) and live at once, and the most.
  int64_t gathered = 0, gatheredPeak = 0;

  /// A gathered parameter (cleave.gather_param) takes its padded size: the
  /// all-gather writes every rank's whole chunk.
  static int64_t bytesOf(Value v) {
    if (auto gather = v.getDefiningOp<GatherParamOp>())
      if (ParameterOp param = lookupParameter(gather, gather.getNameAttr()))
        if (std::optional<StateShards> shards = stateShards(param))
          return shards->padded() *
                 elementBytes(param.getType()
                                  .cast<RankedTensorType>()
                                  .getElementType());
    return tensorBytes(v.getType());
  }
  static bool isHost(Value v) {
    Operation *def = v.getDefiningOp();
    auto space =
        def ? def->getAttrOfType<MemorySpaceAttr>(kMemorySpaceAttr) : nullptr;
    return space && space.getValue() == MemorySpace::host;
  }
  int64_t allocate(Value v) {
    if (v.getDefiningOp<GatherParamOp>()) {
      gathered += bytesOf(v);
      gatheredPeak = std::max(gatheredPeak, gathered);
    }
    if (isHost(v)) {
      onHost.insert(v);
      return host.allocate(bytesOf(v));
    }
    // A fetched checkpoint is small and comes back while the backward's
    // large values come and go: in the smallest hole that fits, it leaves
    // the large holes whole for them (first fit split the one the fused
    // loss gradient's reshape needed at the backward's start, +7 % on
    // GPT-2 124M).
    return device.allocate(bytesOf(v),
                           v.getDefiningOp<FetchOp>());
  }
  void release(Value v, int64_t offset) {
    if (v.getDefiningOp<GatherParamOp>())
      gathered -= bytesOf(v);
    (onHost.contains(v) ? host : device)
        .release(offset, bytesOf(v));
  }
};

/// An argument the runtime fills once per step (the step number, the loss
/// scale), not per microbatch.
bool isPerStep(func::FuncOp func, unsigned index) {
  auto role = func.getArgAttrOfType<StringAttr>(index, "cleave.role");
  return role && (role.getValue() == "step" || role.getValue() == "loss_scale");
}

/// Optimizer state tensors an update op keeps (AdamW: two moments; SGD:
/// a momentum buffer when it has momentum).
int64_t stateCount(Operation *op) {
  if (isa<AdamWOp>(op))
    return 2;
  if (auto sgd = dyn_cast<SgdOp>(op))
    return sgd.getMomentum().convertToDouble() > 0 ? 1 : 0;
  return 0;
}

struct MemoryPlan : cleave::impl::MemoryPlanBase<MemoryPlan> {
  using MemoryPlanBase::MemoryPlanBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (alignment <= 0 || (alignment & (alignment - 1))) {
      module.emitError() << "cleave-memory-plan: alignment must be a power "
                            "of two, got "
                         << static_cast<int64_t>(alignment);
      return signalPassFailure();
    }
    // ZeRO-1's chunks start at multiples of kStateChunkAlignment bytes
    // within their parameter's buffer: no finer alignment can be promised.
    bool split = false;
    module.walk([&](ParameterOp p) { split |= bool(stateShards(p)); });
    if (split && alignment > kStateChunkAlignment) {
      module.emitError() << "cleave-memory-plan: alignment "
                         << static_cast<int64_t>(alignment)
                         << " is more than the " << kStateChunkAlignment
                         << " bytes the chunks of split optimizer state "
                            "(cleave.state_axis) are aligned to";
      return signalPassFailure();
    }
    if (failed(plan(module)))
      signalPassFailure();
  }

  /// Values with an offset of their own (a pipeline stage's slot region,
  /// in the device arena or, for host values, the host arena).
  llvm::DenseMap<Value, int64_t> fixedOffset;
  /// Where the host arena's activations start: after its slot region.
  int64_t hostActivationBase = 0;

  int64_t aligned(Type type) { return alignUp(tensorBytes(type), alignment); }

  LogicalResult plan(ModuleOp module) {
    Builder b(module.getContext());
    int64_t cursor = 0;

    // Parameters, then their gradients, then optimizer state: shared by
    // every function and live for the whole run.
    // A parameter whose optimizer state is split (ZeRO-1) has its buffers
    // padded to whole chunks, and state of one chunk.
    // A sharded parameter (cleave.param_axis, ZeRO-3) keeps one chunk of
    // itself and of its gradient.
    // With a working copy (cleave.working_type: ZeRO-1's split masters)
    // the parameter's buffer holds the copy, in its type, and the fp32
    // master one chunk, after every parameter (cleave.master_offset); the
    // gradient stays fp32.
    auto storage = [&](ParameterOp param) -> Type {
      std::optional<StateShards> shards = stateShards(param);
      if (!shards)
        return param.getType();
      return RankedTensorType::get(
          {shards->padded()},
          param.getType().cast<RankedTensorType>().getElementType());
    };
    auto gradStorage = [&](ParameterOp param) -> Type {
      std::optional<StateShards> shards = stateShards(param);
      if (shards && param->hasAttr(kParamAxisAttr))
        return chunkType(param, *shards);
      return storage(param);
    };
    auto paramStorage = [&](ParameterOp param) -> Type {
      return gradStorage(param).cast<RankedTensorType>().clone(
          readType(param).getElementType());
    };
    int64_t paramBytes = 0, gradBytes = 0, stateBytes = 0;
    for (auto param : module.getOps<ParameterOp>()) {
      param->setAttr("cleave.offset", b.getI64IntegerAttr(cursor));
      cursor += aligned(paramStorage(param));
      paramBytes += aligned(paramStorage(param));
    }
    for (auto param : module.getOps<ParameterOp>()) {
      if (!param->hasAttr(kWorkingTypeAttr))
        continue;
      Type master = chunkType(param, *stateShards(param));
      param->setAttr("cleave.master_offset", b.getI64IntegerAttr(cursor));
      cursor += aligned(master);
      paramBytes += aligned(master);
    }
    llvm::StringSet<> withGrad;
    module.walk([&](Operation *op) {
      if (auto acc = dyn_cast<AccumulateGradOp>(op))
        withGrad.insert(acc.getName());
      if (auto get = dyn_cast<GetGradOp>(op))
        withGrad.insert(get.getName());
      if (auto get = dyn_cast<GetGradShardOp>(op))
        withGrad.insert(get.getName());
    });
    for (auto param : module.getOps<ParameterOp>()) {
      if (!withGrad.contains(param.getSymName()))
        continue;
      param->setAttr("cleave.grad_offset", b.getI64IntegerAttr(cursor));
      cursor += aligned(gradStorage(param));
      gradBytes += aligned(gradStorage(param));
    }
    WalkResult walk = module.walk([&](Operation *op) {
      int64_t n = stateCount(op);
      if (!n)
        return WalkResult::advance();
      SmallVector<int64_t> offsets;
      // The gradient's: the parameter's, or one chunk of it.
      Type type = op->getOperand(0).getType();
      for (int64_t k = 0; k < n; ++k) {
        offsets.push_back(cursor);
        cursor += aligned(type);
        stateBytes += aligned(type);
      }
      op->setAttr("cleave.state_offsets", b.getDenseI64ArrayAttr(offsets));
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();

    // A pipeline stage's per-microbatch values: the arguments and results
    // of its forward and backward functions.
    auto slotsAttr = module->getAttrOfType<IntegerAttr>("cleave.slots");
    int64_t slots = slotsAttr ? slotsAttr.getInt() : 0;
    if (slotsAttr && slots < 1)
      return module.emitError() << "cleave.slots must be at least 1";
    llvm::SetVector<Value> perMicrobatch;
    if (slots)
      for (func::FuncOp func : module.getOps<func::FuncOp>()) {
        auto kind = func->getAttrOfType<StringAttr>("cleave.kind");
        if (!kind || kind.getValue() == "optimizer" || func.isExternal())
          continue;
        Block &body = func.getBody().front();
        for (BlockArgument arg : body.getArguments())
          if (!func.getArgAttr(arg.getArgNumber(), "cleave.saved_from") &&
              !isPerStep(func, arg.getArgNumber()))
            perMicrobatch.insert(arg);
        for (Value v : body.getTerminator()->getOperands())
          if (!v.getDefiningOp<ConstantOp>() &&
              !v.getDefiningOp<GetParamOp>())
            perMicrobatch.insert(v);
      }

    // Inputs and constants of every function: live for the whole step.
    // A backward function's arguments are the forward values it reads, in
    // the forward's storage.
    int64_t constantBytes = 0, ioBytes = 0;
    auto funcs = llvm::to_vector(module.getOps<func::FuncOp>());
    for (func::FuncOp func : funcs) {
      if (func.isExternal() || !func.getBody().hasOneBlock())
        return func.emitError() << "cleave-memory-plan expects one block";
      Block &body = func.getBody().front();
      for (BlockArgument arg : body.getArguments()) {
        if (!arg.getType().isa<RankedTensorType>())
          return func.emitError() << "argument " << arg.getArgNumber()
                                  << " is not a tensor";
        if (func.getArgAttr(arg.getArgNumber(), "cleave.saved_from") ||
            perMicrobatch.contains(arg))
          continue;
        func.setArgAttr(arg.getArgNumber(), "cleave.offset",
                        b.getI64IntegerAttr(cursor));
        cursor += aligned(arg.getType());
        ioBytes += aligned(arg.getType());
      }
      // A rank's coordinate (cleave.axis_index) is a constant of its
      // program.
      for (Operation &constant : body) {
        if (!isa<ConstantOp, AxisIndexOp>(constant))
          continue;
        constant.setAttr("cleave.offsets", b.getDenseI64ArrayAttr({cursor}));
        cursor += aligned(constant.getResult(0).getType());
        constantBytes += aligned(constant.getResult(0).getType());
      }
    }
    // The slot region: slot 0's offsets; slot k adds k * slotBytes. The
    // offloaded values a forward saves have theirs at the start of the
    // host arena (k * hostSlotBytes for slot k).
    int64_t slotBase = cursor, slotBytes = 0, hostSlotBytes = 0;
    fixedOffset.clear();
    for (Value v : perMicrobatch) {
      if (SpaceAllocators::isHost(v)) {
        fixedOffset[v] = hostSlotBytes;
        hostSlotBytes += aligned(v.getType());
        continue;
      }
      fixedOffset[v] = slotBase + slotBytes;
      slotBytes += aligned(v.getType());
    }
    hostActivationBase = hostSlotBytes * std::max<int64_t>(slots, 1);
    for (func::FuncOp func : funcs)
      for (BlockArgument arg : func.getBody().front().getArguments())
        if (auto it = fixedOffset.find(arg); it != fixedOffset.end())
          func.setArgAttr(arg.getArgNumber(), "cleave.offset",
                          b.getI64IntegerAttr(it->second));
    cursor += slotBytes * std::max<int64_t>(slots, 1);
    int64_t activationBase = cursor;

    // Activations: one timeline over the functions in module order (the
    // order a step runs them: forward, its backward, the optimizer).
    SpaceAllocators activations(alignment);
    llvm::DenseMap<Value, int64_t> offsetOf; // allocator-relative
    llvm::DenseMap<Value, Value> alias;      // backward arg -> forward value
    for (func::FuncOp func : funcs) {
      Block &body = func.getBody().front();
      if (auto forwardName =
              func->getAttrOfType<FlatSymbolRefAttr>("cleave.forward")) {
        func::FuncOp forward = forwardOf(func);
        if (!forward)
          return func.emitError() << "no forward function " << forwardName;
        Operation *ret = forward.getBody().front().getTerminator();
        for (BlockArgument arg : body.getArguments()) {
          auto from = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                         "cleave.saved_from");
          if (!from)
            continue; // an input of its own (the loss scale)
          if (from.getInt() < 0 ||
              from.getInt() >= ret->getNumOperands())
            return func.emitError() << "argument " << arg.getArgNumber()
                                    << " has no valid cleave.saved_from";
          Value source = ret->getOperand(from.getInt());
          alias[arg] = source;
          if (auto fixed = fixedOffset.find(source);
              fixed != fixedOffset.end()) {
            func.setArgAttr(arg.getArgNumber(), "cleave.offset",
                            b.getI64IntegerAttr(fixed->second));
          } else if (auto it = offsetOf.find(source); it != offsetOf.end()) {
            // Copied first: inserting `arg` may grow the map and move it.
            int64_t offset = it->second;
            offsetOf[arg] = offset;
            bool host = activations.onHost.contains(source);
            if (host)
              activations.onHost.insert(arg);
            func.setArgAttr(arg.getArgNumber(), "cleave.offset",
                            b.getI64IntegerAttr(
                                offset + (host ? hostActivationBase
                                               : activationBase)));
          } else if (auto at = offsetAttrOf(source)) {
            func.setArgAttr(arg.getArgNumber(), "cleave.offset", at);
          }
        }
      }
      if (failed(planBody(func, activations, offsetOf, activationBase)))
        return failure();
    }
    std::optional<int64_t> peakWithoutRemat =
        timelinesWithoutRemat(funcs, activationBase, slots);

    int64_t activationPeak = alignUp(activations.device.peak, alignment);
    int64_t hostPeak =
        hostActivationBase + alignUp(activations.host.peak, alignment);
    int64_t arena = activationBase + activationPeak;
    NamedAttrList memory;
    memory.append("arena_bytes", b.getI64IntegerAttr(arena));
    memory.append("peak_bytes", b.getI64IntegerAttr(arena));
    memory.append("parameters", b.getI64IntegerAttr(paramBytes));
    memory.append("constants", b.getI64IntegerAttr(constantBytes));
    memory.append("io", b.getI64IntegerAttr(ioBytes));
    memory.append("activations",
                  b.getI64IntegerAttr(activationPeak +
                                      slotBytes * std::max<int64_t>(slots, 1)));
    // By memory space, from each space's allocator: the device arena holds
    // the slots and the device activations, the host arena the offloaded.
    memory.append("device_activations",
                  b.getI64IntegerAttr(activationPeak +
                                      slotBytes * std::max<int64_t>(slots, 1)));
    memory.append("host_activations", b.getI64IntegerAttr(hostPeak));
    memory.append("host_arena_bytes", b.getI64IntegerAttr(hostPeak));
    if (peakWithoutRemat)
      memory.append("peak_bytes_without_remat",
                    b.getI64IntegerAttr(*peakWithoutRemat));
    memory.append("gradients", b.getI64IntegerAttr(gradBytes));
    memory.append("optimizer_state", b.getI64IntegerAttr(stateBytes));
    memory.append("workspace", b.getI64IntegerAttr(0));
    // Part of the activations: the most gathered parameters live at once.
    if (activations.gatheredPeak)
      memory.append("gathered_parameters",
                    b.getI64IntegerAttr(activations.gatheredPeak));
    memory.append("alignment", b.getI64IntegerAttr(alignment));
    if (slots) {
      memory.append("slot_base", b.getI64IntegerAttr(slotBase));
      memory.append("slot_bytes", b.getI64IntegerAttr(slotBytes));
      if (hostSlotBytes)
        memory.append("host_slot_bytes", b.getI64IntegerAttr(hostSlotBytes));
      memory.append("slots", b.getI64IntegerAttr(slots));
    }
    module->setAttr("cleave.memory", memory.getDictionary(module.getContext()));
    return success();
  }

  /// The device arena in use at each op (as cleave.memory_timeline) had
  /// cleave-remat and cleave-offload-activations not run, so that a report
  /// shows both from one compile: a recomputed value is then the forward's
  /// own, saved until its clone's last backward reader (a clone stands for
  /// the forward op of the same name, ONNX location and result types, in
  /// order), and an offloaded value stays on the device until its fetched
  /// copy's last reader. First fit as the plan; a pipeline stage's slots as
  /// planned, plus, for each microbatch in flight but the one simulated,
  /// the slot space the values saved without remat would take (a floor,
  /// as the slots are). Written as
  /// cleave.memory_timeline_without_remat on each function; returns the
  /// peak, or nothing for a module that neither recomputes nor offloads.
  std::optional<int64_t> timelinesWithoutRemat(ArrayRef<func::FuncOp> funcs,
                                               int64_t activationBase,
                                               int64_t slots) {
    llvm::DenseMap<Value, Value> alias;
    llvm::DenseSet<Value> keptForBackward;
    bool any = false;
    for (func::FuncOp func : funcs) {
      func::FuncOp forward = forwardOf(func);
      if (!forward)
        continue;
      Operation *ret = forward.getBody().front().getTerminator();
      std::map<std::string, SmallVector<Operation *>> originals;
      auto key = [](Operation *op) {
        std::string k;
        llvm::raw_string_ostream os(k);
        os << op->getName() << op->getLoc() << op->getResultTypes();
        return os.str();
      };
      for (Operation &op : forward.getBody().front()) {
        if (auto offload = dyn_cast<OffloadOp>(op)) {
          alias[offload.getResult()] = offload.getInput();
          keptForBackward.insert(offload.getInput());
          any = true;
        } else if (op.getNumResults()) {
          originals[key(&op)].push_back(&op);
        }
      }
      for (auto &[k, ops] : originals)
        std::reverse(ops.begin(), ops.end()); // popped in order
      Block &body = func.getBody().front();
      for (BlockArgument arg : body.getArguments())
        if (auto from = func.getArgAttrOfType<IntegerAttr>(
                arg.getArgNumber(), "cleave.saved_from"))
          if (from.getInt() >= 0 && from.getInt() < ret->getNumOperands())
            alias[arg] = ret->getOperand(from.getInt());
      for (Operation &op : body) {
        if (auto fetch = dyn_cast<FetchOp>(op)) {
          alias[fetch.getResult()] = fetch.getInput();
          any = true;
          continue;
        }
        if (!op.hasAttr("cleave.recompute"))
          continue;
        any = true;
        auto it = originals.find(key(&op));
        if (it == originals.end() || it->second.empty())
          continue; // no original found: counted as the plan counts it
        Operation *original = it->second.pop_back_val();
        // Saved without remat only if a gradient reads it; what only the
        // recomputation reads dies in the forward there.
        for (auto [clone, value] :
             llvm::zip(op.getResults(), original->getResults())) {
          alias[clone] = value;
          if (llvm::any_of(clone.getUsers(), [](Operation *user) {
                return !user->hasAttr("cleave.recompute");
              }))
            keptForBackward.insert(value);
        }
      }
    }
    if (!any)
      return std::nullopt;
    auto canonical = [&](Value v) {
      for (auto it = alias.find(v); it != alias.end(); it = alias.find(v))
        v = it->second;
      return v;
    };
    int64_t otherSlots = 0;
    for (Value v : keptForBackward)
      if (!fixedOffset.count(v))
        otherSlots += aligned(v.getType());
    otherSlots *= std::max<int64_t>(slots, 1) - 1;
    activationBase += otherSlots;

    Builder b(func::FuncOp(funcs.front()).getContext());
    Allocator device(alignment);
    llvm::DenseMap<Value, int64_t> offsetOf;
    auto release = [&](Value v) {
      auto it = offsetOf.find(v);
      if (it == offsetOf.end())
        return;
      device.release(it->second, tensorBytes(v.getType()));
      offsetOf.erase(it);
    };
    for (func::FuncOp func : funcs) {
      Block &body = func.getBody().front();
      Operation *ret = body.getTerminator();
      llvm::DenseSet<Value> saved;
      for (unsigned i = 0; i < ret->getNumOperands(); ++i)
        if (func.getResultAttr(i, "cleave.saved"))
          saved.insert(canonical(ret->getOperand(i)));
      llvm::DenseMap<Value, int64_t> lastUse;
      int64_t i = 0;
      for (Operation &op : body) {
        for (Value operand : op.getOperands())
          lastUse[canonical(operand)] = i;
        ++i;
      }
      bool isForward = func->hasAttr("cleave.backward");
      auto keep = [&](Value v) {
        return saved.contains(v) || (isForward && keptForBackward.contains(v));
      };
      // What the forward kept that this function never reads.
      if (func->hasAttr("cleave.forward"))
        for (Value v : llvm::to_vector(llvm::make_first_range(offsetOf)))
          if (!lastUse.count(v))
            release(v);
      SmallVector<int64_t> timeline;
      i = 0;
      for (Operation &op : body) {
        int64_t here = i++;
        if (&op == ret)
          continue;
        bool storage =
            isa<ConstantOp, AxisIndexOp, GetParamOp, GetGradOp, GetGradShardOp>(op);
        bool aliased = op.getNumResults() && alias.count(op.getResult(0));
        if (!storage && !aliased) {
          for (Value result : op.getResults()) {
            if (fixedOffset.count(result) ||
                !result.getType().isa<RankedTensorType>())
              continue;
            // The fused loss's gradient over the logits, as in the plan.
            auto fused = dyn_cast<SoftmaxCrossEntropyFusedOp>(op);
            Value x = fused ? canonical(fused.getInput()) : Value();
            if (fused && result == fused.getDinput() && offsetOf.count(x) &&
                !keep(x) && lastUse.lookup(x) == here) {
              offsetOf[result] = offsetOf.lookup(x);
              offsetOf.erase(x);
              continue;
            }
            offsetOf[result] = device.allocate(tensorBytes(result.getType()));
          }
        }
        if (!storage) // the plan's timeline has a point for every other op
          timeline.push_back(activationBase + device.inUseExtent());
        for (Value result : op.getResults())
          if (!lastUse.count(canonical(result)) && !keep(canonical(result)))
            release(canonical(result));
        llvm::SmallPtrSet<Value, 4> done;
        for (Value operand : op.getOperands()) {
          Value v = canonical(operand);
          if (lastUse.lookup(v) == here && !keep(v) && done.insert(v).second)
            release(v);
        }
      }
      func->setAttr("cleave.memory_timeline_without_remat",
                    b.getDenseI64ArrayAttr(timeline));
      for (Value v : ret->getOperands())
        if (!keep(canonical(v)))
          release(canonical(v));
    }
    return activationBase + alignUp(device.peak, alignment);
  }

  /// The planned offset of a value that is not an activation (a function
  /// argument or constant), as an attribute.
  static IntegerAttr offsetAttrOf(Value v) {
    if (auto arg = v.dyn_cast<BlockArgument>()) {
      auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
      return func ? func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                       "cleave.offset")
                  : IntegerAttr();
    }
    if (Operation *constant = v.getDefiningOp();
        isa_and_nonnull<ConstantOp, AxisIndexOp>(constant)) {
      auto offsets = constant->getAttrOfType<DenseI64ArrayAttr>("cleave.offsets");
      return offsets ? IntegerAttr::get(IntegerType::get(v.getContext(), 64),
                                        offsets[0])
                     : IntegerAttr();
    }
    return {};
  }

  LogicalResult planBody(func::FuncOp func, SpaceAllocators &activations,
                         llvm::DenseMap<Value, int64_t> &offsetOf,
                         int64_t activationBase) {
    Builder b(func.getContext());
    Block &body = func.getBody().front();
    Operation *ret = body.getTerminator();
    // Results marked cleave.saved stay allocated for the backward function.
    llvm::DenseSet<Value> saved;
    for (unsigned i = 0; i < ret->getNumOperands(); ++i)
      if (func.getResultAttr(i, "cleave.saved"))
        saved.insert(ret->getOperand(i));

    // Liveness: the index of each value's last use in block order.
    llvm::DenseMap<Value, int64_t> lastUse;
    llvm::DenseMap<Operation *, int64_t> index;
    SmallVector<int64_t> timeline;
    int64_t i = 0;
    for (Operation &op : body) {
      index[&op] = i;
      for (Value operand : op.getOperands())
        lastUse[operand] = i;
      ++i;
    }
    auto release = [&](Value v) {
      auto it = offsetOf.find(v);
      if (it != offsetOf.end())
        activations.release(v, it->second);
    };
    // Saved values the backward never reads are released at its start.
    for (BlockArgument arg : body.getArguments())
      if (!lastUse.count(arg))
        release(arg);

    for (Operation &op : body) {
      if (isa<ConstantOp, AxisIndexOp, GetParamOp, GetGradOp, GetGradShardOp>(op) ||
          op.getNumResults() == 0) {
        if (op.getNumResults() == 0 && &op != ret) {
          timeline.push_back(activationBase +
                             activations.device.inUseExtent());
          releaseLastUses(op, index[&op], lastUse, saved, release);
        }
        continue;
      }
      SmallVector<int64_t> offsets;
      // The fused loss writes the logits' gradient over logits that die
      // there (llm.c's fused classifier): the two never take space at once.
      Value inPlaceFrom, inPlaceTo;
      if (auto fused = dyn_cast<SoftmaxCrossEntropyFusedOp>(op)) {
        Value x = fused.getInput();
        if (offsetOf.count(x) && !fixedOffset.count(x) && !saved.contains(x) &&
            lastUse.lookup(x) == index[&op] && x != fused.getTarget() &&
            x != fused.getDloss() && !fixedOffset.count(fused.getDinput()) &&
            !activations.onHost.contains(x) &&
            !SpaceAllocators::isHost(fused.getDinput())) {
          inPlaceFrom = x;
          inPlaceTo = fused.getDinput();
        }
      }
      for (Value result : op.getResults()) {
        if (!result.getType().isa<RankedTensorType>())
          return op.emitError() << "result is not a tensor";
        if (auto fixed = fixedOffset.find(result); fixed != fixedOffset.end()) {
          offsets.push_back(fixed->second);
          continue;
        }
        if (result == inPlaceTo) {
          int64_t offset = offsetOf.lookup(inPlaceFrom);
          offsetOf.erase(inPlaceFrom); // the gradient owns the space now
          offsetOf[result] = offset;
          offsets.push_back(activationBase + offset);
          continue;
        }
        int64_t offset = activations.allocate(result);
        offsetOf[result] = offset;
        // A host value's offset is in the host arena, after its slots.
        offsets.push_back(offset + (activations.onHost.contains(result)
                                        ? hostActivationBase
                                        : activationBase));
      }
      op.setAttr("cleave.offsets", b.getDenseI64ArrayAttr(offsets));
      // The device arena in use while the op runs (its operands and
      // results live): the highest of these over the step is the peak.
      timeline.push_back(activationBase + activations.device.inUseExtent());
      // Inputs are read while outputs are written, so an operand's space is
      // released only after the op that uses it last; a result nobody uses
      // is released at once.
      for (Value result : op.getResults())
        if (!lastUse.count(result))
          release(result);
      releaseLastUses(op, index[&op], lastUse, saved, release);
    }
    func->setAttr("cleave.memory_timeline", b.getDenseI64ArrayAttr(timeline));
    // What the return reads is released at the function's end, except the
    // values saved for the backward function.
    llvm::SmallPtrSet<Value, 8> done;
    for (Value v : ret->getOperands())
      if (!saved.contains(v) && done.insert(v).second)
        release(v);
    return success();
  }

  template <typename Release>
  static void releaseLastUses(Operation &op, int64_t here,
                              llvm::DenseMap<Value, int64_t> &lastUse,
                              const llvm::DenseSet<Value> &saved,
                              Release &release) {
    llvm::SmallPtrSet<Value, 4> released;
    for (Value operand : op.getOperands())
      if (lastUse[operand] == here && !saved.contains(operand) &&
          released.insert(operand).second)
        release(operand);
  }
};

} // namespace
