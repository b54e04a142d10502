//===- VerifyPerRank.cpp - the contract of the per-rank form --------------===//
//
// The phase boundary before emission: every decision the emitter needs is
// in the IR. Each value has a static local shape, no stage boundary is
// left in a function signature, and every send between pipeline stages
// has its receive (same tag and type, on the rank the send names, in the
// neighbouring stage), so a wrong transfer fails here naming the stages
// instead of hanging a job.
//
//===----------------------------------------------------------------------===//

#include "ir/AttrNames.h"
#include "ir/CleaveOps.h"
#include "ir/DistributionOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <map>
#include <tuple>

namespace mlir::cleave {
#define GEN_PASS_DEF_VERIFYPERRANK
#include "passes/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

constexpr StringLiteral kBoundaryNames[] = {
    "cleave.boundary", "cleave.grad_of_result", "cleave.grad_of_arg"};

/// A transfer between stages, keyed by (sending rank, receiving rank, tag)
/// on the pipeline axis.
struct Endpoint {
  Operation *op;
  int64_t stage;
  Type type;
};
using TransferKey = std::tuple<int64_t, int64_t, int64_t>;

struct VerifyPerRank
    : mlir::cleave::impl::VerifyPerRankBase<VerifyPerRank> {
  using VerifyPerRankBase::VerifyPerRankBase;

  void runOnOperation() override {
    if (failed(verify(getOperation())))
      signalPassFailure();
  }

  LogicalResult verify(ModuleOp top) {
    MeshAttr mesh = lookupMesh(top);
    if (!mesh)
      return top.emitError() << "cleave-verify-per-rank: the module has no "
                                "cleave.mesh; run cleave-place-ranks first";
    SmallVector<ModuleOp> stages;
    for (auto stage : top.getOps<ModuleOp>())
      if (stage->hasAttr(kStageAttr))
        stages.push_back(stage);
    int64_t ranks = mesh.getAxisSize(kPipelineAxis).value_or(1);
    if (!stages.empty() && int64_t(stages.size()) % ranks != 0)
      return top.emitError()
             << "cleave-verify-per-rank: " << stages.size()
             << " stages do not divide over the " << ranks
             << " ranks of the mesh's pipeline axis";
    if (stages.empty())
      return verifyFunctions(top, -1);

    std::map<TransferKey, Endpoint> sends, recvs;
    for (ModuleOp stage : stages) {
      int64_t k = stage->getAttrOfType<IntegerAttr>(kStageAttr).getInt();
      if (failed(verifyFunctions(stage, k)))
        return failure();
      WalkResult walk = stage.walk<WalkOrder::PreOrder>([&](Operation *op) {
        // The last microbatch's copy of a backward (cleave-overlap-gradients)
        // runs instead of its original, with the same transfers.
        if (auto func = dyn_cast<func::FuncOp>(op))
          if (func->hasAttr(kLastMicrobatchOfAttr))
            return WalkResult::skip();
        auto record = [&](std::map<TransferKey, Endpoint> &into,
                          TransferKey key, Type type) {
          auto [it, fresh] = into.try_emplace(key, Endpoint{op, k, type});
          if (fresh)
            return WalkResult::advance();
          op->emitError() << "cleave-verify-per-rank: stage " << k
                          << " and stage " << it->second.stage
                          << " both use tag " << std::get<2>(key)
                          << " between pipeline ranks " << std::get<0>(key)
                          << " and " << std::get<1>(key);
          return WalkResult::interrupt();
        };
        if (auto send = dyn_cast<SendOp>(op))
          return record(sends,
                        {k % ranks, send.getPeer(), send.getTag()},
                        send.getInput().getType());
        if (auto recv = dyn_cast<RecvOp>(op))
          return record(recvs,
                        {recv.getPeer(), k % ranks, recv.getTag()},
                        recv.getType());
        if (isa<SendStartOp, RecvStartOp>(op)) {
          op->emitError() << "cleave-verify-per-rank: the emitter does not "
                             "translate started transfers yet";
          return WalkResult::interrupt();
        }
        return WalkResult::advance();
      });
      if (walk.wasInterrupted())
        return failure();
    }
    for (auto &[key, send] : sends) {
      auto [from, to, tag] = key;
      auto it = recvs.find(key);
      if (it == recvs.end())
        return send.op->emitError()
               << "cleave-verify-per-rank: stage " << send.stage
               << " sends tag " << tag << " to pipeline rank " << to
               << ", but no stage on pipeline rank " << to << " receives it";
      const Endpoint &recv = it->second;
      if (recv.stage != send.stage + 1 && recv.stage != send.stage - 1)
        return send.op->emitError()
               << "cleave-verify-per-rank: stage " << send.stage
               << " sends tag " << tag << " to stage " << recv.stage
               << ", which is not its neighbour";
      if (recv.type != send.type)
        return send.op->emitError()
               << "cleave-verify-per-rank: stage " << send.stage
               << " sends " << send.type << " with tag " << tag
               << ", but stage " << recv.stage << " receives " << recv.type;
    }
    for (auto &[key, recv] : recvs)
      if (!sends.count(key))
        return recv.op->emitError()
               << "cleave-verify-per-rank: stage " << recv.stage
               << " receives tag " << std::get<2>(key)
               << " from pipeline rank " << std::get<0>(key)
               << ", but no stage there sends it";
    return success();
  }

  /// Local shapes, no boundary left in a signature, no value from another
  /// function.
  LogicalResult verifyFunctions(ModuleOp module, int64_t stage) {
    auto where = [&](func::FuncOp func) {
      return (stage >= 0 ? "stage " + std::to_string(stage) + " " : "") +
             "function @" + func.getName().str();
    };
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      for (unsigned i = 0; i < func.getNumArguments(); ++i)
        for (StringRef name : kBoundaryNames)
          if (func.getArgAttr(i, name))
            return func.emitError()
                   << "cleave-verify-per-rank: argument " << i << " of "
                   << where(func) << " is still a stage boundary ('" << name
                   << "'); run cleave-stage-transfers";
      for (unsigned i = 0; i < func.getNumResults(); ++i)
        for (StringRef name : kBoundaryNames)
          if (func.getResultAttr(i, name))
            return func.emitError()
                   << "cleave-verify-per-rank: result " << i << " of "
                   << where(func) << " is still a stage boundary ('" << name
                   << "'); run cleave-stage-transfers";
      auto local = [](Type type) {
        auto tensor = type.dyn_cast<RankedTensorType>();
        return (tensor && tensor.hasStaticShape()) ||
               type.isa<AsyncTokenType>();
      };
      for (Type type : func.getArgumentTypes())
        if (!local(type))
          return func.emitError() << "cleave-verify-per-rank: " << where(func)
                                  << " takes " << type
                                  << ", which has no static local shape";
      WalkResult walk = func.walk([&](Operation *op) {
        for (Value result : op->getResults())
          if (!local(result.getType())) {
            op->emitError() << "cleave-verify-per-rank: a result of "
                            << where(func) << " is " << result.getType()
                            << ", which has no static local shape";
            return WalkResult::interrupt();
          }
        for (Value operand : op->getOperands()) {
          Region *region = operand.getParentRegion();
          if (!region || region->getParentOfType<func::FuncOp>() != func) {
            op->emitError() << "cleave-verify-per-rank: " << where(func)
                            << " reads a value of another function";
            return WalkResult::interrupt();
          }
        }
        return WalkResult::advance();
      });
      if (walk.wasInterrupted())
        return failure();
    }
    return success();
  }
};

} // namespace
