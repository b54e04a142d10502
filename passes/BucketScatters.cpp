//===- BucketScatters.cpp - ZeRO-3 gradient reduce-scatters in buckets ----===//
//
// cleave-shard-parameters reduce-scatters each sharded parameter's
// microbatch gradient on its own, synchronously, as soon as it is made.
// This pass joins consecutive ones into buckets of up to `bucket-elements`
// padded elements (SMP's sdp_reduce_bucket_size), one collective each,
// started when the bucket's last gradient is made and waited for where the
// next bucket starts (the last one at the function's end), so that the
// transfer overlaps the rest of the backward. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "ir/AttrNames.h"
#include "ir/CleaveOps.h"
#include "ir/DistributionOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_BUCKETSCATTERS
#include "passes/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// A gradient's reduce-scatter and the accumulation of its chunk.
struct Scatter {
  ReduceScatterOp op;
  AccumulateGradOp acc;
  int64_t ranks = 1, chunk = 0;
};

struct BucketScatters : mlir::cleave::impl::BucketScattersBase<BucketScatters> {
  using BucketScattersBase::BucketScattersBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (bucketElements < 0) {
      module.emitError() << "cleave-bucket-scatters: bucket-elements must "
                            "not be negative, got "
                         << static_cast<int64_t>(bucketElements);
      return signalPassFailure();
    }
    if (bucketElements == 0)
      return;
    int64_t nextEvent = 1;
    module.walk([&](ReduceScatterOp op) {
      if (auto e = op->getAttrOfType<IntegerAttr>(kEventAttr))
        nextEvent = std::max<int64_t>(nextEvent, e.getInt() + 1);
    });
    module.walk([&](func::FuncOp func) {
      auto kind = func->getAttrOfType<StringAttr>("cleave.kind");
      if (func.isExternal() || (kind && kind.getValue() == "optimizer"))
        return;
      for (Block &block : func.getBody())
        bucket(block, nextEvent);
    });
  }

  /// The gradient scatters of `block`, in order: a synchronous 1-D
  /// reduce-scatter whose one user is an accumulate_grad.
  static SmallVector<Scatter> scattersOf(Block &block) {
    SmallVector<Scatter> scatters;
    for (auto op : block.getOps<ReduceScatterOp>()) {
      if (op->hasAttr(kEventAttr) || op.getDim() != 0 ||
          !op.getResult().hasOneUse())
        continue;
      auto acc = dyn_cast<AccumulateGradOp>(*op->user_begin());
      auto in = op.getInput().getType().cast<RankedTensorType>();
      auto out = op.getType().cast<RankedTensorType>();
      if (!acc || in.getRank() != 1 || out.getRank() != 1 ||
          acc->getBlock() != &block)
        continue;
      Scatter s;
      s.op = op;
      s.acc = acc;
      s.chunk = out.getDimSize(0);
      s.ranks = in.getDimSize(0) / s.chunk;
      scatters.push_back(s);
    }
    return scatters;
  }

  void bucket(Block &block, int64_t &nextEvent) {
    SmallVector<Scatter> scatters = scattersOf(block);
    // Consecutive scatters over the same group with the same reduction,
    // up to the bucket size (a larger gradient alone).
    SmallVector<SmallVector<Scatter>> buckets;
    int64_t elements = 0;
    for (Scatter s : scatters) {
      bool joins = !buckets.empty() &&
                   buckets.back().front().op.getAxes() == s.op.getAxes() &&
                   buckets.back().front().op.getReduce() == s.op.getReduce() &&
                   elements + s.ranks * s.chunk <= bucketElements;
      if (!joins) {
        buckets.emplace_back();
        elements = 0;
      }
      buckets.back().push_back(s);
      elements += s.ranks * s.chunk;
    }

    for (auto [b, members] : llvm::enumerate(buckets)) {
      ReduceScatterOp last = members.back().op;
      OpBuilder builder(last);
      Location loc = last.getLoc();
      Type element =
          last.getType().cast<RankedTensorType>().getElementType();
      int64_t ranks = members.front().ranks, total = 0;
      for (Scatter s : members)
        total += s.chunk;
      // Rank r's chunks side by side: each padded gradient as
      // [ranks, chunk], joined along the chunks and flattened, so that
      // the reduce-scatter's r-th block is rank r's chunks in order.
      Value input = members.front().op.getInput();
      if (members.size() > 1) {
        SmallVector<Value> rows;
        for (Scatter s : members)
          rows.push_back(builder.create<ReshapeOp>(
              loc, RankedTensorType::get({ranks, s.chunk}, element),
              s.op.getInput()));
        Value joined = builder.create<ConcatOp>(
            loc, RankedTensorType::get({ranks, total}, element), rows,
            builder.getI64IntegerAttr(1));
        input = builder.create<ReshapeOp>(
            loc, RankedTensorType::get({ranks * total}, element), joined);
      }
      auto started = builder.create<ReduceScatterOp>(
          loc, RankedTensorType::get({total}, element), input,
          last.getAxesAttr(), last.getDimAttr(), last.getReduceAttr());
      started->setAttr(kEventAttr, builder.getI64IntegerAttr(nextEvent++));
      // Waited for where the next bucket starts, or at the end.
      Operation *waitAt = b + 1 < buckets.size()
                              ? buckets[b + 1].back().op.getOperation()
                              : block.getTerminator();
      // (The next bucket's joining and start, built later before the same
      // op, come after this wait.)
      OpBuilder after(waitAt);
      after.create<WaitScatterOp>(loc, started.getResult(), input);
      int64_t offset = 0;
      for (Scatter s : members) {
        Value chunk = started.getResult();
        if (members.size() > 1)
          chunk = after.create<SliceOp>(
              loc, RankedTensorType::get({s.chunk}, element), chunk,
              after.getDenseI64ArrayAttr({offset}),
              after.getDenseI64ArrayAttr({offset + s.chunk}),
              after.getDenseI64ArrayAttr({1}));
        offset += s.chunk;
        s.acc->moveBefore(waitAt);
        s.acc.getGradMutable().assign(chunk);
        s.op.erase();
      }
    }
  }
};

} // namespace
