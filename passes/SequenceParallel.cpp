//===- SequenceParallel.cpp - Megatron's sequence parallelism -------------===//
//
// Korthikanti et al. 2022 (Megatron-LM's `sequence_parallel`), on the local
// program cleave-partition-tensor wrote: the values between the
// tensor-parallel regions (the residual stream, its norms, bias and
// residual adds, the embedding's output) are split on the sequence over
// the "tensor" axis instead of replicated. A g (cleave.tp_reduce: an
// all-reduce) that completes a row-parallel product becomes a
// reduce-scatter into the rank's part of the sequence
// (cleave.sp_reduce_scatter); an f (cleave.tp_copy) at the entry of a
// column-parallel region becomes an all-gather (cleave.sp_all_gather).
// Every op between them computes the rank's tokens only, so it must be
// per-token: its sharding rule carries the sequence's factor from the
// operand to its result untouched. Its other inputs are replicated: one
// that has the sequence (a position embedding) is sliced to the rank's
// part, one that does not (a norm's weight, a bias) is broadcast; both go
// through an f, so that their gradients, which each rank computes from its
// own tokens only, are summed over the group. An op that needs the whole
// sequence and is not tensor-parallel reads an all-gather whose gradient
// is the rank's part (docs/tensor-parallel.md, "Sequence parallelism").
//
//===----------------------------------------------------------------------===//

#include "ir/AttrNames.h"
#include "ir/CleaveOps.h"
#include "ir/DistributionOps.h"
#include "ir/ShardingInterface.h"
#include "ir/TensorGroups.h"
#include "passes/NodeName.h"
#include "passes/Passes.h"
#include "passes/TensorAxisOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <map>
#include <numeric>
#include <tuple>
#include <optional>

namespace mlir::cleave {
#define GEN_PASS_DEF_SEQUENCEPARALLEL
#include "passes/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// Where a value holds the sequence: dimension `dim`, of size
/// `outer * seq * inner` in row-major order. `[batch, seq, d]` is dim 1,
/// outer = inner = 1; the flattened `[batch*seq, d]` of a `view(-1, d)`
/// (Hugging Face's Conv1D) is dim 0 with outer = batch (each sample's tokens
/// in a row); `[seq*batch, d]` (nn.MultiheadAttention's) dim 0 with inner =
/// batch. The rank's part is, in each of the `outer` blocks, the rows of its
/// `seq / T` tokens: `outer * seq/T * inner` indices.
struct Layout {
  int64_t dim = 0, outer = 1, inner = 1;
  bool operator==(const Layout &o) const {
    return dim == o.dim && outer == o.outer && inner == o.inner;
  }
  bool operator!=(const Layout &o) const { return !(*this == o); }
};

struct SequenceParallel
    : mlir::cleave::impl::SequenceParallelBase<SequenceParallel> {
  int64_t degree = 1, batch = 0, seq = 0;
  /// The values split on the sequence, and where they hold it.
  DenseMap<Value, Layout> seqDim;
  /// Where every value derived per token from a token-shaped one holds the
  /// tokens, split or not (the row order of a flattened product, which its
  /// type does not say).
  DenseMap<Value, Layout> tokenLayout;
  /// The f of a replicated value, and its rank's part of the sequence.
  DenseMap<Value, Value> copyOf;
  std::map<std::tuple<void *, int64_t, int64_t, int64_t>, Value> sliceOf;

  ArrayAttr tensorAxes() {
    return ArrayAttr::get(&getContext(),
                          {StringAttr::get(&getContext(), kTensorAxis)});
  }

  /// The sequence dimension of an activation `[batch, seq, ...]` or
  /// `[seq, batch, ...]`, the layouts of the residual stream.
  std::optional<Layout> sequenceDimOf(Type t) {
    auto type = t.dyn_cast<RankedTensorType>();
    if (!type || type.getRank() < 3 || !type.getElementType().isa<FloatType>())
      return std::nullopt;
    if (type.getDimSize(0) == batch && type.getDimSize(1) == seq)
      return Layout{1, 1, 1};
    if (type.getDimSize(0) == seq && type.getDimSize(1) == batch)
      return Layout{0, 1, 1};
    return std::nullopt;
  }

  /// The layout of a value: its type's, else what the walk derived.
  std::optional<Layout> layoutOf(Value v) {
    if (std::optional<Layout> l = sequenceDimOf(v.getType()))
      return l;
    auto it = tokenLayout.find(v);
    if (it == tokenLayout.end())
      return std::nullopt;
    return it->second;
  }

  /// The layout of a reshape's result whose operand of shape `in` holds the
  /// sequence as `l`: the flat (row-major) index is `[pre, seq, post]`, and
  /// the result must hold that `seq` inside one of its dimensions, as
  /// `[outer', seq, inner']`. None when the reshape splits the sequence.
  std::optional<Layout> reshaped(ArrayRef<int64_t> in, ArrayRef<int64_t> out,
                                 Layout l) {
    int64_t pre = l.outer, post = l.inner;
    for (int64_t d = 0; d < int64_t(in.size()); ++d)
      (d < l.dim ? pre : post) *= d == l.dim ? 1 : in[d];
    int64_t before = 1;
    for (int64_t q = 0; q < int64_t(out.size()); before *= out[q], ++q) {
      if (before > pre || pre % before != 0)
        break;
      int64_t outer = pre / before;
      if (out[q] % (outer * seq) != 0)
        continue;
      int64_t inner = out[q] / (outer * seq), after = inner;
      for (int64_t d = q + 1; d < int64_t(out.size()); ++d)
        after *= out[d];
      if (after == post)
        return Layout{q, outer, inner};
    }
    return std::nullopt;
  }

  static RankedTensorType resized(Type t, int64_t dim, int64_t size) {
    auto type = t.cast<RankedTensorType>();
    SmallVector<int64_t> shape(type.getShape());
    shape[dim] = size;
    return RankedTensorType::get(shape, type.getElementType());
  }

  /// `v`'s gather (`gather`) or reduce-scatter along `dim` over the tensor
  /// axis, transposed to dimension 0 and back (the runtime's collectives
  /// are flat).
  Value collective(OpBuilder &b, Location loc, Value v, int64_t dim,
                   bool gather, bool splitGrad = false) {
    return tensorAxisCollective(b, loc, v, dim, degree, gather, splitGrad);
  }

  /// A dropout in the region draws its mask per element of the whole
  /// sequence: its full shape and the split the emitter turns into this
  /// rank's offsets (the tensor partition left it whole, plan() checked).
  void markSlice(DropoutOp dropout, int64_t dim) {
    auto type = dropout.getType().cast<RankedTensorType>();
    SmallVector<ArrayAttr> dims(type.getRank(), ArrayAttr::get(&getContext(), {}));
    dims[dim] = tensorAxes();
    dropout.setFullShapeAttr(
        DenseI64ArrayAttr::get(&getContext(), type.getShape()));
    dropout.setSplitAttr(
        ShardingAttr::get(&getContext(), dims, ArrayRef<StringAttr>()));
  }

  /// The same on a value holding the sequence as `l`. With `outer` 1 the
  /// rank's part is one block of the dimension (`[seq*batch, d]` too), and
  /// the collective runs on it as it is; otherwise (a flattened
  /// `[batch*seq, d]`) the dimension is viewed as `[outer, seq*inner]`
  /// first, by a reshape, and the collective runs on the second.
  Value collective(OpBuilder &b, Location loc, Value v, Layout l, bool gather,
                   bool splitGrad = false) {
    if (l.outer == 1)
      return collective(b, loc, v, l.dim, gather, splitGrad);
    auto type = v.getType().cast<RankedTensorType>();
    SmallVector<int64_t> shape(type.getShape());
    shape[l.dim] /= l.outer;
    shape.insert(shape.begin() + l.dim, l.outer);
    v = b.create<ReshapeOp>(
        loc, RankedTensorType::get(shape, type.getElementType()), v);
    v = collective(b, loc, v, l.dim + 1, gather, splitGrad);
    shape = SmallVector<int64_t>(v.getType().cast<RankedTensorType>().getShape());
    shape[l.dim] *= shape[l.dim + 1];
    shape.erase(shape.begin() + l.dim + 1);
    return b.create<ReshapeOp>(
        loc, RankedTensorType::get(shape, type.getElementType()), v);
  }

  /// f on a replicated input of the sequence-parallel region, once.
  Value copied(Value v) {
    auto [it, inserted] = copyOf.try_emplace(v, Value());
    if (!inserted)
      return it->second;
    OpBuilder b(&getContext());
    b.setInsertionPointAfterValue(v);
    it->second = b.create<TpCopyOp>(v.getLoc(), v, tensorAxes());
    return it->second;
  }

  /// The rank's part of the sequence of a replicated `v` held as `l`: a
  /// gather of the rows `[r s/T, (r+1) s/T)` of each of the `outer` blocks
  /// (each row `inner` indices), after an f when `v` is differentiable
  /// (each rank's gradient covers its rows only; the f sums them into the
  /// gradient of the whole).
  Value rankPart(Value v, Layout l) {
    auto [it, inserted] = sliceOf.try_emplace(
        std::make_tuple(v.getAsOpaquePointer(), l.dim, l.outer, l.inner),
        Value());
    if (!inserted)
      return it->second;
    bool differentiable =
        v.getType().cast<RankedTensorType>().getElementType().isa<FloatType>() &&
        !v.getDefiningOp<ConstantOp>();
    Value whole = differentiable ? copied(v) : v;
    OpBuilder b(&getContext());
    b.setInsertionPointAfterValue(whole);
    Location loc = v.getLoc();
    // Rank r's indices: `base + r * part`, base the rank 0's.
    int64_t part = seq / degree * l.inner;
    SmallVector<int64_t> base;
    for (int64_t o = 0; o < l.outer; ++o)
      for (int64_t j = 0; j < part; ++j)
        base.push_back(o * seq * l.inner + j);
    it->second = tensorRankRows(b, loc, whole, l.dim, base, part);
    return it->second;
  }

  /// Whether `op` computes per token along dimension `dim` of its operand
  /// `i`: its rule gives that dimension one factor, split freely, which is
  /// one whole dimension of its one result. Returns that dimension.
  std::optional<int64_t> perToken(Operation *op, unsigned i, int64_t dim,
                                  int64_t *factor = nullptr) {
    // Ops whose attributes hold shapes along the dimension, and the
    // collectives, are not per-token.
    if (op->getNumResults() != 1 ||
        isa<TpCopyOp, TpReduceOp, AllReduceOp, AttentionOp, ConstantOp>(op))
      return std::nullopt;
    // A slice that takes the sequence whole (rotate-half's halves).
    if (auto slice = dyn_cast<SliceOp>(op);
        slice && (slice.getStart()[dim] != 0 || slice.getStep()[dim] != 1 ||
                  slice.getLimit()[dim] !=
                      slice.getX().getType().cast<RankedTensorType>()
                          .getDimSize(dim)))
      return std::nullopt;
    auto rules = dyn_cast<ShardingRuleOpInterface>(op);
    if (!rules)
      return std::nullopt;
    FailureOr<ShardingRule> rule = rules.getShardingRule();
    if (failed(rule) || i >= rule->operandFactors.size() ||
        dim >= int64_t(rule->operandFactors[i].size()))
      return std::nullopt;
    const ShardingRule::DimFactors &in = rule->operandFactors[i][dim];
    if (in.size() != 1 || rule->factorKinds[in[0]] != FactorKind::Parallel)
      return std::nullopt;
    for (auto [d, out] : llvm::enumerate(rule->resultFactors[0]))
      if (out.size() == 1 && out[0] == in[0]) {
        if (factor)
          *factor = in[0];
        return int64_t(d);
      }
    return std::nullopt;
  }

  /// The layout of `op`'s result when its operand `i` holds the sequence
  /// as `l` and the op computes per token: a reshape that keeps the
  /// sequence inside one dimension (flattening `[batch, seq, d]` to
  /// `[batch*seq, d]` and back), or an op whose rule carries the
  /// dimension's one factor to one dimension of its result (`factor`).
  std::optional<Layout> follow(Operation *op, unsigned i, Layout l,
                               int64_t *factor = nullptr) {
    if (auto reshape = dyn_cast<ReshapeOp>(op))
      return reshaped(reshape.getX().getType().cast<RankedTensorType>()
                          .getShape(),
                      reshape.getType().cast<RankedTensorType>().getShape(),
                      l);
    std::optional<int64_t> out = perToken(op, i, l.dim, factor);
    if (!out)
      return std::nullopt;
    return Layout{*out, l.outer, l.inner};
  }

  /// Where every value computed per token from a token-shaped one holds
  /// its tokens (the flattened products' rows), before any rewrite.
  void deriveLayouts(func::FuncOp func) {
    tokenLayout.clear();
    for (Operation &op : func.getBody().front()) {
      if (op.getNumResults() != 1)
        continue;
      for (OpOperand &use : op.getOpOperands()) {
        std::optional<Layout> l = layoutOf(use.get());
        if (!l)
          continue;
        std::optional<Layout> out =
            isa<TpReduceOp, TpCopyOp>(op)
                ? l
                : follow(&op, use.getOperandNumber(), *l);
        if (out)
          tokenLayout[op.getResult(0)] = *out;
        break;
      }
    }
  }

  /// Whether a value whose layout its type does not say (a flattened
  /// product's partial sum) is the residual stream's: each of its users,
  /// through ops computing per token, is a reshape back to `[batch, seq,
  /// ...]` or `[seq, batch, ...]` (Hugging Face's Conv1D: addmm on
  /// `view(-1, d)`, then `view(batch, seq, d)`). A loss's flattened sums
  /// (the vocab-parallel cross-entropy's) are not.
  bool returnsToStream(Value v, Layout l, DenseSet<Value> &seen) {
    if (!seen.insert(v).second)
      return true;
    if (v.use_empty())
      return false;
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (isa<ReshapeOp>(user) && sequenceDimOf(user->getResult(0).getType()) &&
          follow(user, use.getOperandNumber(), l))
        continue;
      std::optional<Layout> next = follow(user, use.getOperandNumber(), l);
      if (!next || !returnsToStream(user->getResult(0), *next, seen))
        return false;
    }
    return true;
  }

  /// What the rewrite does, decided on the program as the partition left
  /// it (the rules read the operands' types, which the rewrite changes).
  struct Join {
    Operation *op;
    Layout out;                                      // result's sequence
    SmallVector<std::pair<unsigned, Layout>> slices; // operand, its layout
    SmallVector<unsigned> copies;                    // operands to f
  };
  SmallVector<std::pair<TpReduceOp, Layout>> entries;
  SmallVector<std::pair<TpCopyOp, Layout>> exits;
  /// Operands of ops that need the whole sequence as a replicated value.
  SmallVector<std::tuple<Operation *, unsigned, Layout>> gathers;
  DenseMap<Value, Value> wholeOf;
  SmallVector<Join> joins;

  /// g on a row-parallel product's activation becomes a reduce-scatter
  /// when every user computes per token (or enters the next
  /// column-parallel region, an f).
  void planEntry(TpReduceOp g) {
    std::optional<Layout> dim = sequenceDimOf(g.getType());
    if (!dim) {
      // A flattened product's sum, when it returns to the residual stream.
      dim = layoutOf(g.getInput());
      DenseSet<Value> seen;
      if (!dim || !returnsToStream(g.getResult(), *dim, seen))
        return;
    }
    for (OpOperand &use : g->getUses())
      if (!isa<TpCopyOp>(use.getOwner()) &&
          !follow(use.getOwner(), use.getOperandNumber(), *dim))
        return;
    entries.push_back({g, *dim});
    seqDim[g.getResult()] = *dim;
  }

  /// One op reading a value of the region: it joins it, it is an f that
  /// becomes an all-gather, or it reads the whole sequence gathered.
  LogicalResult plan(Operation *op) {
    if (auto g = dyn_cast<TpReduceOp>(op)) {
      planEntry(g);
      return success();
    }
    std::optional<unsigned> first;
    for (OpOperand &use : op->getOpOperands())
      if (seqDim.count(use.get())) {
        first = use.getOperandNumber();
        break;
      }
    if (!first)
      return success();
    if (auto f = dyn_cast<TpCopyOp>(op)) {
      exits.push_back({f, seqDim.lookup(f.getInput())});
      return success();
    }
    int64_t factor = -1;
    Layout in = seqDim.lookup(op->getOperand(*first));
    std::optional<Layout> out = follow(op, *first, in, &factor);
    if (!out) {
      // Not per token (a flatten of batch and sequence, attention that is
      // not split, a loss): the op runs replicated on the whole sequence,
      // gathered with the gradient's rank part as its gradient.
      for (OpOperand &use : op->getOpOperands())
        if (seqDim.count(use.get()))
          gathers.push_back(
              {op, use.getOperandNumber(), seqDim.lookup(use.get())});
      return success();
    }
    if (auto dropout = dyn_cast<DropoutOp>(op); dropout && dropout.getSplit())
      return op->emitError()
             << describeOp(op)
             << ": a dropout split by the tensor partition cannot also be "
                "split on the sequence; set 'sequence_parallel' to false";
    // A dropout draws its mask per element of the full tensor: a flattened
    // [batch*seq, ...] part (outer > 1) is no block of it, so such a dropout
    // runs on the gathered sequence instead of joining the region.
    if (isa<DropoutOp>(op) && out->outer != 1) {
      for (OpOperand &use : op->getOpOperands())
        if (seqDim.count(use.get()))
          gathers.push_back(
              {op, use.getOperandNumber(), seqDim.lookup(use.get())});
      return success();
    }
    Join join{op, *out, {}, {}};
    if (isa<ReshapeOp>(op)) {
      seqDim[op->getResult(0)] = *out;
      joins.push_back(std::move(join));
      return success();
    }
    FailureOr<ShardingRule> rule =
        cast<ShardingRuleOpInterface>(op).getShardingRule();
    for (OpOperand &use : op->getOpOperands()) {
      Value v = use.get();
      auto type = v.getType().dyn_cast<RankedTensorType>();
      if (!type)
        continue;
      // Where the operand holds the sequence's factor, if it does.
      std::optional<int64_t> at;
      bool mixed = false;
      for (auto [d, factors] :
           llvm::enumerate(rule->operandFactors[use.getOperandNumber()]))
        if (llvm::is_contained(factors, factor)) {
          at = d;
          mixed = factors.size() != 1;
        }
      auto region = seqDim.find(v);
      if (region != seqDim.end()) {
        const Layout &l = region->second;
        if (!at || mixed || *at != l.dim || l.outer != in.outer ||
            l.inner != in.inner)
          return op->emitError()
                 << describeOp(op) << ": operand " << use.getOperandNumber()
                 << " holds the sequence in dimension " << l.dim
                 << (l.outer != 1 || l.inner != 1
                         ? " (merged with other dimensions)"
                         : "")
                 << ", which the op does not match with its other "
                    "operands'; spec key 'sequence_parallel' cannot split "
                    "it: set it to false";
        continue;
      }
      if (mixed)
        return op->emitError()
               << describeOp(op) << ": operand " << use.getOperandNumber()
               << " " << type
               << " merges the sequence with another dimension; spec key "
                  "'sequence_parallel' cannot take the rank's part of it: "
                  "set it to false";
      if (at)
        join.slices.push_back(
            {use.getOperandNumber(), Layout{*at, in.outer, in.inner}});
      else if (type.getElementType().isa<FloatType>() &&
               !v.getDefiningOp<ConstantOp>())
        join.copies.push_back(use.getOperandNumber());
    }
    seqDim[op->getResult(0)] = *out;
    joins.push_back(std::move(join));
    return success();
  }

  /// The rewrite the plan decided: the joined ops' replicated inputs and
  /// local results, then g and f become the reduce-scatter and gather.
  void rewrite() {
    for (Join &join : joins) {
      for (auto [i, l] : join.slices)
        join.op->setOperand(i, rankPart(join.op->getOperand(i), l));
      for (unsigned i : join.copies)
        join.op->setOperand(i, copied(join.op->getOperand(i)));
      Value result = join.op->getResult(0);
      auto type = result.getType().cast<RankedTensorType>();
      int64_t part = type.getDimSize(join.out.dim) / degree;
      if (auto dropout = dyn_cast<DropoutOp>(join.op))
        markSlice(dropout, join.out.dim);
      result.setType(resized(type, join.out.dim, part));
      if (auto slice = dyn_cast<SliceOp>(join.op)) {
        SmallVector<int64_t> limit(slice.getLimit());
        limit[join.out.dim] = part;
        slice.setLimitAttr(DenseI64ArrayAttr::get(&getContext(), limit));
      }
    }
    for (auto [op, i, dim] : gathers) {
      Value v = op->getOperand(i);
      auto [it, inserted] = wholeOf.try_emplace(v, Value());
      if (inserted) {
        OpBuilder b(&getContext());
        b.setInsertionPointAfterValue(v);
        it->second = collective(b, v.getLoc(), v, dim, true,
                                /*splitGrad=*/true);
      }
      op->setOperand(i, it->second);
    }
    for (auto [g, dim] : entries) {
      OpBuilder b(g);
      Value part = collective(b, g.getLoc(), g.getInput(), dim, false);
      g.getResult().replaceAllUsesWith(part);
      g.erase();
    }
    // The f's of one value, by input: a value entering the query
    // projection (f over "tensor") and the key/value projections (f over
    // the major sub-axis "tensor":(1)k) is gathered once, below.
    DenseMap<Value, SmallVector<TpCopyOp>> byInput;
    for (auto [f, dim] : exits)
      byInput[f.getInput()].push_back(f);
    DenseSet<Operation *> done;
    for (auto [f, dim] : exits) {
      if (done.contains(f))
        continue;
      if (gatherOnce(byInput[f.getInput()], dim, done))
        continue;
      done.insert(f);
      OpBuilder b(f);
      // An f over a sub-axis (grouped-query attention with more tensor
      // ranks than key/value heads: the input of the key/value
      // projections) sums its gradient over that sub-axis only; the ranks
      // of the other sub-axis hold the same key/value heads and compute
      // the same gradient, which a reduce-scatter over the whole axis
      // would count again. So: the gather whose gradient is the rank's
      // part, then the f itself: the sum over the sub-axis is of the
      // whole sequence, and each rank keeps its part of it.
      bool subAxis = f.getAxesAttr() != tensorAxes();
      Value whole = collective(b, f.getLoc(), f.getInput(), dim, true,
                               /*splitGrad=*/subAxis);
      if (subAxis)
        whole = b.create<TpCopyOp>(f.getLoc(), whole, f.getAxesAttr());
      f.getResult().replaceAllUsesWith(whole);
      f.erase();
    }
  }

  /// One value entering both an f over the whole axis (the query
  /// projection) and an f over the major sub-axis "tensor":(1)k (the
  /// key/value projections, k key/value heads on T ranks): gathered once,
  /// with the rank's part as its gradient, then f over (1)k for the
  /// key/value projections and, after it, f over the minor sub-axis
  /// "tensor":(k)(T/k) for the query projection. The query path's gradient
  /// is then summed over (k)(T/k) and (1)k, i.e. over the whole axis, as
  /// the reduce-scatter of its own gather did; the key/value path's over
  /// (1)k, as before: one all-gather instead of two, one whole buffer
  /// less. Returns false (nothing done) for any other set of f's.
  bool gatherOnce(ArrayRef<TpCopyOp> fs, Layout l, DenseSet<Operation *> &done) {
    TpCopyOp whole, sub;
    int64_t k = 0;
    for (TpCopyOp f : fs) {
      if (f.getAxes().size() != 1)
        return false;
      std::optional<AxisRef> ref =
          parseGroupAxis(f.getAxes()[0].cast<StringAttr>().getValue());
      if (!ref || ref->name != kTensorAxis)
        return false;
      if (ref->isWhole() && !whole)
        whole = f;
      else if (!ref->isWhole() && ref->preSize == 1 && !sub &&
               ref->size < degree)
        sub = f, k = ref->size;
      else
        return false;
    }
    if (!whole || !sub)
      return false;
    Operation *first =
        whole->isBeforeInBlock(sub) ? whole.getOperation() : sub.getOperation();
    OpBuilder b(first);
    Location loc = first->getLoc();
    Value gathered =
        collective(b, loc, whole.getInput(), l, true, /*splitGrad=*/true);
    Value kv = b.create<TpCopyOp>(loc, gathered, sub.getAxesAttr());
    std::string minor = groupAxisName(AxisRef{kTensorAxis, k, degree / k});
    Value q = b.create<TpCopyOp>(
        loc, kv, b.getArrayAttr({b.getStringAttr(minor)}));
    sub.getResult().replaceAllUsesWith(kv);
    whole.getResult().replaceAllUsesWith(q);
    done.insert(whole);
    done.insert(sub);
    whole.erase();
    sub.erase();
    return true;
  }

  /// The token ids `[batch, seq]`: the argument with cleave.role "tokens",
  /// else the first integer argument of rank 2 (cleave-input-roles'
  /// default).
  std::optional<BlockArgument> tokensOf(func::FuncOp func) {
    std::optional<BlockArgument> fallback;
    for (BlockArgument arg : func.getArguments()) {
      auto type = arg.getType().dyn_cast<RankedTensorType>();
      if (!type || type.getRank() != 2 ||
          !type.getElementType().isa<IntegerType>())
        continue;
      auto role =
          func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kRoleAttr);
      if (role && role.getValue() == "tokens")
        return arg;
      if (!role && !fallback)
        fallback = arg;
    }
    return fallback;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MeshAttr mesh = lookupMesh(module);
    degree = mesh ? mesh.getAxisSize(kTensorAxis).value_or(1) : 1;
    if (degree == 1)
      return;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      std::optional<BlockArgument> tokens = tokensOf(func);
      if (!tokens)
        continue;
      auto type = tokens->getType().cast<RankedTensorType>();
      batch = type.getDimSize(0);
      seq = type.getDimSize(1);
      if (seq % degree != 0) {
        // On the location, not the op: the note would print the function.
        mlir::emitError(func.getLoc()) << "spec key 'sequence_parallel' splits the "
                            "sequence of "
                         << seq << " tokens over the " << degree
                         << " ranks of 'tensor_parallel_degree', which do "
                            "not divide it; give a sequence length that is "
                            "a multiple of "
                         << degree << ", or set 'sequence_parallel' to false";
        return signalPassFailure();
      }
      seqDim.clear();
      copyOf.clear();
      sliceOf.clear();
      entries.clear();
      exits.clear();
      joins.clear();
      gathers.clear();
      wholeOf.clear();
      deriveLayouts(func);
      SmallVector<Operation *> ops;
      for (Operation &op : func.getBody().front())
        ops.push_back(&op);
      for (Operation *op : ops) {
        if (isa<func::ReturnOp>(op)) {
          for (Value v : op->getOperands())
            if (seqDim.count(v))
              return op->emitError()
                         << "the function returns a sequence-parallel "
                            "value; spec key 'sequence_parallel' needs "
                            "the model's one output to be its loss",
                     signalPassFailure();
          continue;
        }
        if (failed(plan(op)))
          return signalPassFailure();
      }
      rewrite();
    }
  }
};

} // namespace
