//===- Remat.cpp - activation checkpointing by recomputation -------------===//
//
// XLA-style rematerialization in the IR: for each segment a strategy
// chooses, the forward stops saving the values defined inside it and the
// backward computes them again, by clones of the same forward ops placed
// just before the first backward op that reads any of them. Nothing at run
// time changes: the memory plan sees shorter lifetimes, the same kernels
// run on the same inputs (so results are bit-identical), and the cost model
// counts the clones (`cleave.recompute`). docs/remat.md says why it is done
// this way rather than with RECOMPUTE functions.
//
//===----------------------------------------------------------------------===//

#include "ir/CleaveOps.h"
#include "ir/DistributionOps.h"
#include "passes/CutPoints.h"
#include "passes/ForwardBackward.h"
#include "passes/Layout.h"
#include "passes/NodeName.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_REMAT
#include "passes/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// A half-open range [begin, end) of a forward function's work ops.
struct Range {
  int64_t begin, end;
};

/// Only ops without side effects are run again: a collective's or a
/// transfer's result is kept (cheaper to keep than to communicate again,
/// and a second all-reduce would need its peers to run it too). Megatron's
/// f (`cleave.tp_copy`) is a local copy in the forward (only its gradient
/// communicates), so it is run again like any pure op rather than saving a
/// second copy of its input.
bool recomputable(Operation *op) {
  return op && (isMemoryEffectFree(op) || isa<TpCopyOp>(op));
}

/// Sequence parallelism's all-gather before a column-parallel product
/// (not one whose gradient is the rank's part): gathered again in the
/// backward, as Megatron does, so the forward saves the rank's part of
/// the sequence rather than the whole. Every tensor rank runs the same
/// backward, so its peers gather again too.
bool isSequenceGather(Operation *op) {
  auto gather = dyn_cast_or_null<SpAllGatherOp>(op);
  return gather && !gather.getSplitGrad();
}

/// Ops every function makes for itself: storage names, not work.
bool isStorage(Operation *op) {
  return isa<ConstantOp, AxisIndexOp, GetParamOp>(op);
}

struct Remat : mlir::cleave::impl::RematBase<Remat> {
  using RematBase::RematBase;

  // Parsed strategy: layers per segment (0: all of a function's layers),
  // or the attention cores.
  int64_t group = 1;
  bool selective = false;
  /// Segments: the gather chains of sequence parallelism only.
  bool gathersOnly = false;
  llvm::StringMap<int64_t> prefixMatches;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    StringRef s = strategy;
    if (s == "none" || s.empty()) {
      // Without checkpointing, only sequence parallelism's gathers.
      bool any = false;
      module.walk([&](SpAllGatherOp g) { any |= isSequenceGather(g); });
      if (!any)
        return;
      gathersOnly = true;
    } else if (s == "each") {
      group = 1;
    } else if (s == "contiguous") {
      group = 0;
    } else if (s == "selective") {
      selective = true;
    } else if (s.consume_front("group_")) {
      if (s.getAsInteger(10, group) || group < 1) {
        mlir::emitError(module.getLoc())
            << "cleave-remat: strategy '" << strategy
            << "' needs a group size of at least 1 after "
               "'group_' (e.g. group_2)";
        return signalPassFailure();
      }
    } else {
      mlir::emitError(module.getLoc())
          << "cleave-remat: unknown strategy '" << strategy
          << "'; use each, group_<k>, contiguous, selective "
             "or none";
      return signalPassFailure();
    }
    for (const std::string &prefix : layers)
      prefixMatches[prefix] = 0;

    FailureOr<SmallVector<std::pair<func::FuncOp, func::FuncOp>>> pairs =
        forwardBackwardPairs(module, "cleave-remat");
    if (failed(pairs))
      return signalPassFailure();
    for (auto [forward, backward] : *pairs)
      if (failed(rematerialize(forward, backward)))
        return signalPassFailure();
    // A prefix is checked over the whole model: each pipeline stage holds
    // only some of the layers.
    for (const std::string &prefix : layers)
      if (prefixMatches[prefix] == 0) {
        mlir::emitError(module.getLoc())
            << "cleave-remat: layer prefix '" << prefix
            << "' (activation_checkpointing_layers) matches "
               "no ONNX node name; give the prefix the "
               "layer's nodes start with, such as '/h.0/'";
        return signalPassFailure();
      }
  }

  /// The forward's work ops, in order.
  SmallVector<Operation *> work;
  llvm::DenseMap<Operation *, int64_t> position;

  /// The layers of `forward`, as ranges of `work`.
  FailureOr<SmallVector<Range>> findLayers(func::FuncOp forward) {
    SmallVector<Range> found;
    int64_t n = work.size();
    if (!layers.empty()) {
      for (const std::string &prefix : layers) {
        int64_t first = -1, last = -1;
        for (int64_t i = 0; i < n; ++i)
          if (StringRef(onnxNodeName(work[i]->getLoc())).startswith(prefix)) {
            if (first < 0)
              first = i;
            last = i;
          }
        if (first < 0)
          continue;
        prefixMatches[prefix] += last - first + 1;
        found.push_back({first, last + 1});
      }
      llvm::sort(found, [](Range a, Range b) { return a.begin < b.begin; });
      for (size_t i = 1; i < found.size(); ++i)
        if (found[i].begin < found[i - 1].end)
          return forward.emitError()
                 << "cleave-remat: the layers named by "
                    "activation_checkpointing_layers overlap (ONNX node '"
                 << onnxNodeName(work[found[i].begin]->getLoc())
                 << "' lies inside another layer); give prefixes of "
                    "disjoint, consecutive layers";
      return found;
    }

    // The places where the fewest activation bytes cross, as the pipeline
    // partition finds them; the values saved for the backward are no uses.
    Operation *ret = forward.getBody().front().getTerminator();
    SmallVector<Value> liveOut;
    for (unsigned i = 0; i < ret->getNumOperands(); ++i)
      if (!forward.getResultAttr(i, "cleave.saved"))
        liveOut.push_back(ret->getOperand(i));
    SmallVector<int64_t> bounds = {0};
    SmallVector<int64_t> between =
        crossingBytes(valueSpans(work, liveOut), n, /*asFp32=*/true);
    skipCutsInsideNodes(work, between);
    bounds.append(leastCrossingPlaces(between));
    bounds.push_back(n);

    for (auto [begin, end] : layersBetweenPlaces(work, bounds))
      found.push_back({begin, end});
    return found;
  }

  /// Each sequence-parallel gather with the layout ops around it (the
  /// transposes to and from dimension 0, the reshapes of a flattened
  /// activation, the f's of grouped-query attention), as ranges of `work`:
  /// the chain from the rank's part to what the products read.
  SmallVector<Range> gatherChains() {
    SmallVector<Range> chains;
    int64_t n = work.size();
    for (int64_t i = 0; i < n; ++i) {
      if (!isSequenceGather(work[i]))
        continue;
      int64_t begin = i, end = i + 1;
      while (begin > 0 && isa<TransposeOp, ReshapeOp>(work[begin - 1]) &&
             work[begin - 1]->getResult(0).hasOneUse() &&
             *work[begin - 1]->getResult(0).getUsers().begin() == work[begin])
        --begin;
      while (end < n && isa<TransposeOp, ReshapeOp, TpCopyOp>(work[end]) &&
             work[end]->getOperand(0).getDefiningOp() == work[end - 1])
        ++end;
      if (!chains.empty() && chains.back().end > begin)
        continue;
      chains.push_back({begin, end});
      i = end - 1;
    }
    return chains;
  }

  /// A sharded parameter (ZeRO-3) a recomputed segment reads is gathered
  /// again in the backward rather than saved whole from the forward, which
  /// would keep every layer's gathered parameters for the whole step. The
  /// backward's own next gather of it (the gradient's) reads the same
  /// value instead, so a layer is gathered once for its recomputation and
  /// its gradient, as FSDP and ZeRO-3 do with checkpointing.
  static void shareGather(GatherParamOp gather) {
    for (Operation *op = gather->getNextNode(); op; op = op->getNextNode())
      if (auto later = dyn_cast<GatherParamOp>(op);
          later && later.getNameAttr() == gather.getNameAttr()) {
        later.getResult().replaceAllUsesWith(gather.getResult());
        later->erase();
        return;
      }
  }

  LogicalResult rematerialize(func::FuncOp forward, func::FuncOp backward) {
    Block &body = forward.getBody().front();
    Operation *ret = body.getTerminator();
    Block &back = backward.getBody().front();
    MLIRContext *ctx = forward.getContext();
    work.clear();
    position.clear();
    for (Operation &op : body)
      if (&op != ret && !isStorage(&op)) {
        position[&op] = work.size();
        work.push_back(&op);
      }

    SmallVector<Range> segments;
    if (gathersOnly) {
      segments = gatherChains();
    } else if (selective) {
      for (auto [begin, end] : attentionCores(work))
        segments.push_back({begin, end});
    } else {
      FailureOr<SmallVector<Range>> found = findLayers(forward);
      if (failed(found))
        return failure();
      int64_t k = group ? group : std::max<int64_t>(found->size(), 1);
      for (size_t i = 0; i < found->size(); i += k) {
        size_t last = std::min(found->size(), i + k) - 1;
        segments.push_back({(*found)[i].begin, (*found)[last].end});
      }
    }
    if (segments.empty())
      return success();
    llvm::DenseMap<Operation *, int64_t> segmentOf;
    for (auto [s, range] : llvm::enumerate(segments))
      for (int64_t i = range.begin; i < range.end; ++i)
        segmentOf[work[i]] = s;

    // The backward argument of each saved forward value.
    llvm::MapVector<Value, BlockArgument> argOf;
    SmallVector<unsigned> duplicates;
    for (BlockArgument arg : back.getArguments())
      if (auto from = backward.getArgAttrOfType<IntegerAttr>(
              arg.getArgNumber(), "cleave.saved_from")) {
        if (from.getInt() < 0 || from.getInt() >= ret->getNumOperands())
          return backward.emitError() << "argument " << arg.getArgNumber()
                                      << " has no valid cleave.saved_from";
        // A value saved twice is read through its first argument.
        auto [it, inserted] =
            argOf.insert({ret->getOperand(from.getInt()), arg});
        if (!inserted) {
          arg.replaceAllUsesWith(it->second);
          duplicates.push_back(arg.getArgNumber());
        }
      }
    auto canRecompute = [&](Operation *op) {
      return recomputable(op) || (gathersOnly && isSequenceGather(op));
    };
    auto opInSegment = [&](Operation *op, int64_t s) {
      auto it = op ? segmentOf.find(op) : segmentOf.end();
      return it != segmentOf.end() && it->second == s;
    };
    auto inSegment = [&](Value v, int64_t s) {
      return opInSegment(v.getDefiningOp(), s);
    };

    // What segment `s` recomputes to give `dropped`, stopping at values
    // defined outside it and at `kept` ones; `needs` gets the values it
    // reads from the forward.
    auto closure = [&](int64_t s, ArrayRef<Value> dropped,
                       const llvm::DenseSet<Value> &kept,
                       llvm::SetVector<Value> &needs) {
      llvm::SetVector<Operation *> ops;
      SmallVector<Operation *> stack;
      for (Value v : dropped)
        stack.push_back(v.getDefiningOp()); // pure: candidates() checks
      while (!stack.empty()) {
        Operation *op = stack.pop_back_val();
        if (!ops.insert(op))
          continue;
        for (Value u : op->getOperands()) {
          Operation *def = u.getDefiningOp();
          if (def && isa<GetParamOp, GatherParamOp>(def))
            stack.push_back(def); // read again: a name, or gathered again
          else if (!inSegment(u, s) || kept.contains(u) || !canRecompute(def))
            needs.insert(u);
          else
            stack.push_back(def);
        }
      }
      SmallVector<Operation *> sorted(ops.begin(), ops.end());
      llvm::sort(sorted, [&](Operation *a, Operation *b) {
        return a->isBeforeInBlock(b);
      });
      return sorted;
    };
    auto candidates = [&](int64_t s) {
      SmallVector<Value> values;
      for (auto &[v, arg] : argOf)
        if (inSegment(v, s) && canRecompute(v.getDefiningOp()))
          values.push_back(v);
      return values;
    };

    // A layer segment's outputs (what forward ops after it read) and what
    // one segment reads from another stay saved: they are the checkpoints.
    // Recomputing the last layer's output for the head's gradient would
    // run the whole layer again to save one tensor for a moment. An
    // attention core's output, the probabilities, is what it recomputes.
    llvm::DenseSet<Value> kept;
    for (int64_t s = 0; s < (int64_t)segments.size(); ++s) {
      SmallVector<Value> values = candidates(s);
      for (Value v : values)
        for (Operation *user : v.getUsers())
          if (!selective && !gathersOnly && user != ret &&
              !opInSegment(user, s))
            kept.insert(v);
      llvm::SetVector<Value> needs;
      closure(s, values, {}, needs);
      kept.insert(needs.begin(), needs.end());
    }

    // Clone each segment into the backward.
    llvm::SetVector<Value> newlySaved;
    llvm::DenseMap<Value, BlockArgument> newArgOf;
    SmallVector<Value> droppedAll;
    int64_t insertAt = 0; // after the last saved argument
    for (BlockArgument arg : back.getArguments())
      if (backward.getArgAttr(arg.getArgNumber(), "cleave.saved_from"))
        insertAt = arg.getArgNumber() + 1;
    const unsigned firstNew = insertAt;
    auto savedArg = [&](Value v) -> Value {
      if (auto it = argOf.find(v); it != argOf.end())
        return it->second;
      if (auto it = newArgOf.find(v); it != newArgOf.end())
        return it->second;
      backward.insertArgument(insertAt, v.getType(), DictionaryAttr::get(ctx),
                              v.getLoc());
      BlockArgument arg = back.getArgument(insertAt++);
      newlySaved.insert(v);
      newArgOf[v] = arg;
      return arg;
    };
    for (int64_t s = 0; s < (int64_t)segments.size(); ++s) {
      SmallVector<Value> dropped;
      for (Value v : candidates(s))
        if (!kept.contains(v))
          dropped.push_back(v);
      if (dropped.empty())
        continue;
      llvm::SetVector<Value> needs;
      SmallVector<Operation *> ops = closure(s, dropped, kept, needs);
      // Before the backward's first read of a dropped value.
      Operation *first = nullptr;
      for (Value v : dropped)
        for (Operation *user : argOf.lookup(v).getUsers()) {
          Operation *top = back.findAncestorOpInBlock(*user);
          if (top && (!first || top->isBeforeInBlock(first)))
            first = top;
        }
      droppedAll.append(dropped.begin(), dropped.end());
      if (!first)
        continue; // saved but never read
      // What the clones read from the forward is saved; a constant too,
      // which costs nothing (the backward reads the forward's, live the
      // whole step) where a clone would take space of its own.
      IRMapping map;
      for (Value u : needs)
        map.map(u, savedArg(u));
      OpBuilder b(first);
      for (Operation *op : ops) {
        Operation *clone = b.clone(*op, map);
        if (auto gather = dyn_cast<GatherParamOp>(clone))
          shareGather(gather);
        else if (!isStorage(clone))
          clone->setAttr("cleave.recompute", UnitAttr::get(ctx));
      }
      for (Value v : dropped)
        argOf.lookup(v).replaceAllUsesWith(map.lookupOrDefault(v));
    }
    if (droppedAll.empty() && newlySaved.empty() && duplicates.empty())
      return success();

    // The forward returns what stays saved, then what is saved anew.
    llvm::DenseSet<Value> droppedSet(droppedAll.begin(), droppedAll.end());
    SmallVector<Value> results;
    SmallVector<DictionaryAttr> resultAttrs;
    llvm::DenseMap<Value, int64_t> newIndex;
    for (unsigned i = 0; i < ret->getNumOperands(); ++i) {
      Value v = ret->getOperand(i);
      bool saved = bool(forward.getResultAttr(i, "cleave.saved"));
      if (saved && droppedSet.contains(v))
        continue;
      if (saved && !newIndex.count(v))
        newIndex[v] = results.size();
      results.push_back(v);
      DictionaryAttr attrs = forward.getResultAttrDict(i);
      resultAttrs.push_back(attrs ? attrs : DictionaryAttr::get(ctx));
    }
    Builder b(ctx);
    auto savedAttrs = DictionaryAttr::get(
        ctx, {b.getNamedAttr("cleave.saved", UnitAttr::get(ctx))});
    for (Value v : newlySaved) {
      newIndex[v] = results.size();
      results.push_back(v);
      resultAttrs.push_back(savedAttrs);
    }
    ret->setOperands(results);
    forward.setType(FunctionType::get(ctx, forward.getArgumentTypes(),
                                      ValueRange(results).getTypes()));
    forward.setAllResultAttrs(resultAttrs);

    // The backward's saved arguments point at the new results.
    llvm::BitVector erase(back.getNumArguments());
    for (auto &[v, arg] : argOf)
      if (droppedSet.contains(v)) {
        if (!arg.use_empty())
          return backward.emitError()
                 << "cleave-remat: argument " << arg.getArgNumber()
                 << " is still read after its value was recomputed";
        erase.set(arg.getArgNumber());
      } else {
        backward.setArgAttr(arg.getArgNumber(), "cleave.saved_from",
                            b.getI64IntegerAttr(newIndex.lookup(v)));
      }
    for (auto &[v, arg] : newArgOf)
      backward.setArgAttr(arg.getArgNumber(), "cleave.saved_from",
                          b.getI64IntegerAttr(newIndex.lookup(v)));
    // New arguments went in before the inputs after the saved ones: the
    // duplicates' numbers moved with them.
    for (unsigned number : duplicates)
      erase.set(number < firstNew ? number : number + newArgOf.size());
    backward.eraseArguments(erase);
    return success();
  }
};

} // namespace
