//===- PrefetchGathers.cpp - ZeRO-3 gathers started ahead of their reader -===//
//
// cleave-shard-parameters leaves each sharded parameter's all-gather just
// before the op that reads it, so the ranks compute nothing while it
// travels. This pass starts each gather `depth` gathers earlier and waits
// for it just before its first reader, within the bound on live gathered
// elements (SMP's sdp_max_live_parameters): see Passes.td. It runs before
// the memory plan, which then gives a started gather its space from the
// start on, so the plan stays what the runtime uses. A hierarchical
// gather's first hop (within the host) starts one gather earlier still,
// and a cleave.gather_next_hop starts its second where a flat gather
// would start.
//
//===----------------------------------------------------------------------===//

#include "ir/AttrNames.h"
#include "ir/CleaveOps.h"
#include "ir/DistributionOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_PREFETCHGATHERS
#include "passes/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// One synchronous gather of a block: where it is, where its result is
/// first and last read (block indices), and the elements it takes.
struct Gather {
  GatherParamOp op;
  int64_t at = 0, firstRead = 0, lastRead = 0, elements = 0;
  int64_t start = 0; // where it will start (at, or earlier)
  // A hierarchical gather (cleave.gather_per_host): where its first hop
  // starts (start, or one gather earlier); the second starts at `start`.
  int64_t first = 0;
  bool hierarchical = false;
};

struct PrefetchGathers
    : mlir::cleave::impl::PrefetchGathersBase<PrefetchGathers> {
  using PrefetchGathersBase::PrefetchGathersBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (depth < 0 || maxLive < 0) {
      module.emitError() << "cleave-prefetch-gathers: "
                         << (depth < 0 ? "depth" : "max-live")
                         << " must not be negative, got "
                         << static_cast<int64_t>(depth < 0 ? depth : maxLive);
      return signalPassFailure();
    }
    if (depth == 0 || maxLive == 0)
      return;
    // Events number the started gathers of the module, after any already
    // there.
    int64_t nextEvent = 1;
    module.walk([&](GatherParamOp g) {
      if (std::optional<int64_t> e = g.getEvent())
        nextEvent = std::max(nextEvent, *e + 1);
    });
    module.walk([&](func::FuncOp func) {
      auto kind = func->getAttrOfType<StringAttr>("cleave.kind");
      if (func.isExternal() || (kind && kind.getValue() == "optimizer"))
        return;
      for (Block &block : func.getBody())
        prefetch(block, nextEvent);
    });
  }

  /// The padded elements a gather's result takes (what the memory plan
  /// gives it).
  static int64_t paddedElements(GatherParamOp gather) {
    ParameterOp param = lookupParameter(gather, gather.getNameAttr());
    if (std::optional<StateShards> shards =
            param ? stateShards(param) : std::nullopt)
      return shards->padded();
    return gather.getType().cast<RankedTensorType>().getNumElements();
  }

  void prefetch(Block &block, int64_t &nextEvent) {
    SmallVector<Operation *> ops =
        llvm::to_vector(llvm::make_pointer_range(block));
    llvm::DenseMap<Operation *, int64_t> index;
    for (auto [i, op] : llvm::enumerate(ops))
      index[op] = int64_t(i);
    SmallVector<Gather> gathers;
    for (Operation *op : ops) {
      auto gather = dyn_cast<GatherParamOp>(op);
      if (!gather || gather.getEvent())
        continue;
      Gather g;
      g.op = gather;
      g.at = g.start = g.first = g.firstRead = g.lastRead = index[op];
      g.hierarchical = gather->hasAttr(kGatherPerHostAttr);
      bool read = false;
      for (Operation *user : gather->getUsers()) {
        Operation *reader = block.findAncestorOpInBlock(*user);
        if (!reader)
          continue;
        int64_t i = index[reader];
        g.firstRead = read ? std::min(g.firstRead, i) : i;
        g.lastRead = std::max(g.lastRead, i);
        read = true;
      }
      if (!read)
        continue; // nothing to overlap with: left as it is
      g.elements = paddedElements(gather);
      gathers.push_back(g);
    }

    // Elements of gathered parameters live while op `k` runs, as the
    // starts stand now.
    auto liveAt = [&](int64_t k) {
      int64_t live = 0;
      for (const Gather &g : gathers)
        if (g.first <= k && k <= g.lastRead)
          live += g.elements;
      return live;
    };
    for (size_t i = 0; i < gathers.size(); ++i) {
      Gather &g = gathers[i];
      // Candidate starts, earliest first: the place of the gather `depth`
      // before it (the block's start for the first ones), then of each
      // gather after that one, up to its own place.
      SmallVector<int64_t> candidates;
      if (int64_t(i) < depth)
        candidates.push_back(0);
      for (size_t j = i >= size_t(depth) ? i - depth : 0; j < i; ++j)
        candidates.push_back(gathers[j].at);
      // Only where compute runs between the start and the reader: a
      // start followed at once by its wait would overlap nothing.
      auto computes = [&](int64_t from, int64_t to) {
        for (int64_t k = from; k < to; ++k)
          if (!isa<GatherParamOp, ConstantOp>(ops[k]))
            return true;
        return false;
      };
      for (int64_t q : candidates) {
        if (q >= g.at || !computes(q, g.firstRead))
          break;
        bool fits = true;
        for (int64_t k = q; fits && k < g.at; ++k)
          fits = liveAt(k) + g.elements <= maxLive;
        if (fits) {
          g.start = g.first = q;
          break;
        }
      }
      // A prefetched hierarchical gather starts its first hop (within the
      // host) one gather earlier still, at the nearest earlier place with
      // compute before the second hop's start, if that fits.
      if (!g.hierarchical || g.start >= g.at || g.start == 0)
        continue;
      SmallVector<int64_t> earlier;
      for (size_t j = i; j-- > 0;)
        if (gathers[j].at < g.start)
          earlier.push_back(gathers[j].at);
      earlier.push_back(0);
      for (int64_t q : earlier) {
        if (!computes(q, g.start))
          continue;
        bool fits = true;
        for (int64_t k = q; fits && k < g.start; ++k)
          fits = liveAt(k) + g.elements <= maxLive;
        if (fits)
          g.first = q;
        break;
      }
    }

    // A start goes before the first op at or after its place that stays
    // where it was (the gather there may itself have moved up).
    llvm::DenseSet<Operation *> moved;
    for (const Gather &g : gathers)
      if (g.start < g.at)
        moved.insert(g.op);
    auto anchorOf = [&](const Gather &g, int64_t at) {
      while (moved.contains(ops[at]) && ops[at] != g.op)
        ++at;
      return ops[at];
    };
    for (Gather &g : gathers) {
      if (g.start >= g.at)
        continue;
      Operation *anchor = anchorOf(g, g.first);
      OpBuilder b(g.op.getContext());
      b.setInsertionPoint(ops[g.firstRead]);
      b.create<WaitParamOp>(g.op.getLoc(), g.op.getResult());
      if (g.first < g.start) {
        b.setInsertionPoint(anchorOf(g, g.start));
        b.create<GatherNextHopOp>(g.op.getLoc(), g.op.getResult());
      }
      if (anchor != g.op)
        g.op->moveBefore(anchor);
      g.op.setEventAttr(b.getI64IntegerAttr(nextEvent++));
    }
  }
};

} // namespace
