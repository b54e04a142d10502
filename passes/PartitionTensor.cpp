//===- PartitionTensor.cpp - the local program of a tensor-parallel rank --===//
//
// Turns the decisions of cleave-propagate-shardings into the program every
// rank of the tensor axis runs (docs/tensor-parallel.md, "The partition
// step"): each value gets its local type (its type divided by its
// sharding), the attributes that name positions along a split dimension
// are rescaled, Megatron's f (cleave.tp_copy) is put on the replicated
// input of a split region and g (cleave.tp_reduce) on a partial sum
// before the op that needs it whole. Parameters get their local type and
// keep the full one in cleave.full_type beside their cleave.sharding, for
// the emitter's slices. The program is the same for every tensor rank.
//
//===----------------------------------------------------------------------===//

#include "ir/AttrNames.h"
#include "ir/CleaveOps.h"
#include "ir/DistributionOps.h"
#include "ir/TensorGroups.h"
#include "passes/NodeName.h"
#include "passes/Passes.h"
#include "passes/TensorAxisOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_PARTITIONTENSOR
#include "passes/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// Whether `s` splits a dimension or is partial (null: replicated).
bool isSplit(ShardingAttr s) {
  if (!s)
    return false;
  for (unsigned d = 0; d < s.getDims().size(); ++d)
    if (!s.getDims()[d].empty())
      return true;
  return false;
}
bool isPartial(ShardingAttr s) { return s && !s.getPartial().empty(); }

struct PartitionTensor
    : mlir::cleave::impl::PartitionTensorBase<PartitionTensor> {
  MeshAttr mesh;
  llvm::StringMap<ParameterOp> params;
  // The f of a replicated value (per group) and the g of a partial one,
  // made once.
  llvm::DenseMap<std::pair<Value, Attribute>, Value> copyOf;
  llvm::DenseMap<Value, Value> reduceOf;
  // The gather of a split value an op needs whole, made once.
  llvm::DenseMap<Value, Value> gatherOf;

  /// The number of pieces dimension `dim` of a value sharded `s` is cut in.
  int64_t splitOf(ShardingAttr s, unsigned dim) {
    int64_t n = 1;
    for (const AxisRef &ref : s.getDimAxisRefs(dim))
      n *= ref.isWhole() ? mesh.getAxisSize(ref.name).value_or(1) : ref.size;
    return n;
  }

  /// `type` divided by `s`; failure (after an error on `where`) when a
  /// dimension is not divisible.
  FailureOr<RankedTensorType> localType(RankedTensorType type, ShardingAttr s,
                                        Operation *where) {
    if (!s)
      return type;
    SmallVector<int64_t> shape(type.getShape());
    for (unsigned d = 0; d < shape.size(); ++d) {
      int64_t n = splitOf(s, d);
      if (shape[d] % n != 0) {
        where->emitError() << describeOp(where) << ": dimension " << d
                           << " of " << type << " is not divisible by its "
                           << n << " tensor-parallel pieces";
        return failure();
      }
      shape[d] /= n;
    }
    return RankedTensorType::get(shape, type.getElementType());
  }

  /// The sharding of `v` as propagation decided it (null: replicated).
  ShardingAttr shardingOf(Value v) {
    if (auto get = v.getDefiningOp<GetParamOp>()) {
      ParameterOp param = params.lookup(get.getName());
      return param ? param->getAttrOfType<ShardingAttr>(kShardingAttr)
                   : ShardingAttr();
    }
    if (Operation *def = v.getDefiningOp())
      return def->getNumResults() == 1
                 ? def->getAttrOfType<ShardingAttr>(kShardingAttr)
                 : ShardingAttr();
    auto arg = v.cast<BlockArgument>();
    if (auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()))
      return func.getArgAttrOfType<ShardingAttr>(arg.getArgNumber(),
                                                 kShardingAttr);
    return ShardingAttr();
  }

  ArrayAttr tensorAxes() {
    return ArrayAttr::get(&getContext(),
                          {StringAttr::get(&getContext(), kTensorAxis)});
  }

  /// g on `v`: its partial sums completed, once, right after `v`.
  Value reduced(Value v) {
    auto [it, inserted] = reduceOf.try_emplace(v, Value());
    if (!inserted)
      return it->second;
    OpBuilder b(&getContext());
    b.setInsertionPointAfterValue(v);
    it->second = b.create<TpReduceOp>(v.getLoc(), v, tensorAxes());
    return it->second;
  }

  /// f on `v` over `axes`: the entry of a split region, once per group,
  /// right after `v`.
  Value copied(Value v, ArrayAttr axes) {
    auto [it, inserted] = copyOf.try_emplace({v, axes}, Value());
    if (!inserted)
      return it->second;
    OpBuilder b(&getContext());
    b.setInsertionPointAfterValue(v);
    it->second = b.create<TpCopyOp>(v.getLoc(), v, axes);
    return it->second;
  }

  /// The digits of the tensor axis (its T = 2^n ranks' coordinate in
  /// binary, bit 0 the minor) that `s` splits a dimension over or is
  /// partial on: a whole axis is every digit, the sub-axis
  /// `"tensor":(pre)size` the log2(size) digits above log2(T / (pre *
  /// size)). Failure (after an error on `where`) when the axis is not a
  /// power of two and a sub-axis is used.
  FailureOr<uint64_t> tensorDigits(ShardingAttr s, Operation *where) {
    int64_t t = mesh.getAxisSize(kTensorAxis).value_or(1);
    uint64_t all = llvm::isPowerOf2_64(t) ? t - 1 : 1;
    uint64_t digits = 0;
    if (!s)
      return digits;
    for (StringAttr axis : s.getPartial())
      if (axis.getValue() == kTensorAxis)
        digits |= all;
    for (unsigned d = 0; d < s.getDims().size(); ++d)
      for (const AxisRef &ref : s.getDimAxisRefs(d)) {
        if (ref.name != kTensorAxis)
          continue;
        if (ref.isWhole()) {
          digits |= all;
          continue;
        }
        if (!llvm::isPowerOf2_64(t)) {
          where->emitError() << describeOp(where) << " is split over a sub-axis "
                             << "of a \"tensor\" axis of " << t
                             << " ranks; spec key 'tensor_parallel_degree' "
                                "must be a power of two";
          return failure();
        }
        int64_t stride = t / (ref.preSize * ref.size);
        digits |= uint64_t(stride) * (ref.size - 1); // size-1 ones, shifted
      }
    return digits;
  }

  /// f's group for the tensor digits `digits` (a contiguous run): the
  /// whole axis, or the sub-axis they make.
  FailureOr<ArrayAttr> groupOfDigits(uint64_t digits, Operation *where) {
    int64_t t = mesh.getAxisSize(kTensorAxis).value_or(1);
    uint64_t all = llvm::isPowerOf2_64(t) ? t - 1 : 1;
    if (digits == all)
      return tensorAxes();
    uint64_t stride = digits & -digits;
    uint64_t run = digits / stride;
    if ((run & (run + 1)) != 0)
      return where->emitError()
             << describeOp(where)
             << ": its input enters a region split over two separate "
                "sub-axes of \"tensor\", which no single group sums",
             failure();
    int64_t size = int64_t(run + 1), pre = t / (int64_t(stride) * size);
    return ArrayAttr::get(
        &getContext(),
        {StringAttr::get(&getContext(),
                         groupAxisName(AxisRef{kTensorAxis, pre, size}))});
  }

  /// A slice's start and limit along its split dimensions, divided by the
  /// split (`[64, 128)` of a 192 cut in 2 becomes `[32, 64)` of 96).
  LogicalResult rescaleSlice(SliceOp slice, ShardingAttr in) {
    SmallVector<int64_t> start(slice.getStart()), limit(slice.getLimit());
    ArrayRef<int64_t> step = slice.getStep();
    for (unsigned d = 0; d < start.size(); ++d) {
      int64_t n = splitOf(in, d);
      if (n == 1)
        continue;
      if (step[d] != 1 || start[d] % n != 0 || limit[d] % n != 0)
        return slice.emitError()
               << describeOp(slice) << ": the slice [" << start[d] << ", "
               << limit[d] << ") step " << step[d] << " of dimension " << d
               << " does not fall on the " << n
               << " tensor-parallel pieces of its blocks";
      start[d] /= n;
      limit[d] /= n;
    }
    slice.setStartAttr(DenseI64ArrayAttr::get(&getContext(), start));
    slice.setLimitAttr(DenseI64ArrayAttr::get(&getContext(), limit));
    return success();
  }

  Value scalarI64(OpBuilder &b, Location loc, int64_t v) {
    auto type = RankedTensorType::get({}, b.getI64Type());
    return b.create<ConstantOp>(loc,
                                DenseElementsAttr::get(type, b.getI64IntegerAttr(v)));
  }
  Value scalarLike(OpBuilder &b, Location loc, Type element, double v) {
    auto type = RankedTensorType::get({}, element);
    return b.create<ConstantOp>(
        loc, DenseElementsAttr::get(type, FloatAttr::get(element, v)));
  }
  Value reshape(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> shape) {
    auto type = v.getType().cast<RankedTensorType>();
    return b.create<ReshapeOp>(
        loc, RankedTensorType::get(shape, type.getElementType()), v);
  }
  /// The rank's range of `n` classes (or rows) of `local` each: the
  /// index `i - lo` in the rank's range, and whether `i` is in it.
  std::pair<Value, Value> localIndex(OpBuilder &b, Location loc, Value i,
                                     int64_t local) {
    Value r = b.create<AxisIndexOp>(loc, RankedTensorType::get({}, b.getI64Type()),
                                    b.getStringAttr(kTensorAxis));
    Value n = scalarI64(b, loc, local);
    Value shifted = b.create<SubOp>(loc, i, b.create<MulOp>(loc, r, n));
    Value in = b.create<AndOp>(
        loc, b.create<GreaterEqualOp>(loc, shifted, scalarI64(b, loc, 0)),
        b.create<LessOp>(loc, shifted, n));
    return {shifted, in};
  }

  /// The one dimension `s` splits, when it splits one over the whole
  /// tensor axis, unblocked, and is not partial: the shardings the
  /// partition gathers and slices where propagation left them.
  std::optional<int64_t> wholeAxisSplitDim(ShardingAttr s) {
    if (!isSplit(s) || isPartial(s))
      return std::nullopt;
    std::optional<int64_t> dim;
    for (unsigned d = 0; d < s.getDims().size(); ++d) {
      SmallVector<AxisRef> refs = s.getDimAxisRefs(d);
      if (refs.empty())
        continue;
      if (dim || refs.size() != 1 || !refs[0].isWhole() ||
          refs[0].name != kTensorAxis || s.getDimBlocks(d) != 1)
        return std::nullopt;
      dim = d;
    }
    return dim;
  }

  /// `v`, split as `s`, gathered whole on every tensor rank right after
  /// it (null when `s` is not one dimension over the whole axis, or `v`
  /// not float): cleave.sp_all_gather with split_grad, along the split
  /// dimension brought to the front. Its users compute replicated values,
  /// whose gradient is the same on every rank, so each rank keeps its
  /// part of that gradient without communication.
  Value gatheredWhole(Value v, ShardingAttr s) {
    std::optional<int64_t> dim = wholeAxisSplitDim(s);
    auto type = v.getType().dyn_cast<RankedTensorType>();
    if (!dim || !type || !type.getElementType().isa<FloatType>())
      return {};
    auto [it, inserted] = gatherOf.try_emplace(v, Value());
    if (!inserted)
      return it->second;
    OpBuilder b(&getContext());
    b.setInsertionPointAfterValue(v);
    Value gathered = tensorAxisCollective(
        b, v.getLoc(), v, *dim, mesh.getAxisSize(kTensorAxis).value_or(1),
        /*gather=*/true, /*splitGrad=*/true);
    it->second = gathered;
    return gathered;
  }

  /// The rank's part of whole `v` along `dim` cut in the tensor axis's
  /// pieces, before `where`, at `loc`: a gather of the indices r * size +
  /// [0, size), r the rank's tensor coordinate. The gather's gradient
  /// fills only the rank's part, so a float `v` that is not constant
  /// enters through f, which sums the parts over the ranks.
  Value slicedPart(Value v, int64_t dim, Operation *where, Location loc) {
    auto type = v.getType().cast<RankedTensorType>();
    int64_t n = mesh.getAxisSize(kTensorAxis).value_or(1);
    int64_t size = type.getDimSize(dim) / n;
    OpBuilder b(where);
    if (type.getElementType().isa<FloatType>() &&
        !v.getDefiningOp<ConstantOp>() && !v.getDefiningOp<TpCopyOp>())
      v = copied(v, tensorAxes());
    SmallVector<int64_t> iota(size);
    for (int64_t i = 0; i < size; ++i)
      iota[i] = i;
    return tensorRankRows(b, loc, v, dim, iota, size);
  }

  /// An op that needs `v` whole (propagation stopped at it): `v` gathered
  /// when it is split, completed by g when partial. Failure when the
  /// split is not one the partition gathers.
  FailureOr<Value> wholeOperand(Value v) {
    ShardingAttr s = shardingOf(v);
    if (isPartial(s))
      return reduced(v);
    if (!isSplit(s))
      return v;
    if (Value g = gatheredWhole(v, s))
      return g;
    return failure();
  }

  /// `op`'s result, which propagation decided split as `result` while
  /// the op computes it whole: the result loses its sharding and its
  /// users read the rank's part, which carries it. Failure when the
  /// split is not one the partition slices.
  LogicalResult sliceResult(Operation *op, ShardingAttr result) {
    std::optional<int64_t> dim = wholeAxisSplitDim(result);
    if (!dim)
      return failure();
    op->removeAttr(kShardingAttr);
    Value whole = op->getResult(0);
    Operation *next = op->getNextNode();
    Value part = slicedPart(whole, *dim, next, op->getLoc());
    part.getDefiningOp()->setAttr(kShardingAttr, result);
    whole.replaceUsesWithIf(part, [&](OpOperand &use) {
      Operation *user = use.getOwner();
      return user != part.getDefiningOp() && !isa<TpCopyOp>(user);
    });
    return success();
  }

  /// A vocab-parallel embedding: rank r looks up the ids in its rows
  /// [rV/T, (r+1)V/T) of the table and contributes zeros for the others;
  /// the result is partial (its users get g). The local lookup's gradient
  /// is the local embedding_grad.
  ///
  /// With a padding_idx p (nn.Embedding's row that the lookup gives no
  /// gradient: OPT, BERT, Gemma), row p is local row p mod V/T of rank
  /// p / (V/T) only; on the other ranks that local row is another token's,
  /// which needs its gradient. The program is the same on every rank, so
  /// one local padding_idx cannot say this. The ids equal to p are looked
  /// up apart instead, in a second lookup with the local padding_idx
  /// p mod V/T: on the owner their local id is that row, so the lookup
  /// gives its value and no gradient; elsewhere they are off the rank's
  /// range and masked to zero like any other. Every other id takes the
  /// lookup without padding_idx.
  LogicalResult lowerEmbedding(EmbeddingOp op, ShardingAttr result) {
    if (!isPartial(result))
      return op.emitError() << describeOp(op)
                            << ": a vocab-parallel embedding's result is a "
                               "partial sum, but propagation decided "
                            << result;
    OpBuilder b(op);
    Location loc = op.getLoc();
    Value ids = op.getIds();
    int64_t rows =
        op.getTable().getType().cast<RankedTensorType>().getDimSize(0);
    auto [local, in] = localIndex(b, loc, ids, rows);
    Value safe = b.create<SelectOp>(loc, in, local, scalarI64(b, loc, 0));
    Value looked = b.create<EmbeddingOp>(loc, op.getTable(), safe, IntegerAttr());
    auto type = op.getType().cast<RankedTensorType>();
    SmallVector<int64_t> maskShape(ids.getType().cast<RankedTensorType>().getShape());
    maskShape.push_back(1);
    if (std::optional<uint64_t> padding = op.getPaddingIdx()) {
      Value padded = b.create<EmbeddingOp>(
          loc, op.getTable(), safe,
          b.getI64IntegerAttr(int64_t(*padding) % rows));
      Value isPadding = reshape(
          b, loc,
          b.create<EqualOp>(loc, ids, scalarI64(b, loc, int64_t(*padding))),
          maskShape);
      looked = b.create<SelectOp>(loc, isPadding, padded, looked);
    }
    Value mask = reshape(b, loc, in, maskShape);
    auto out = b.create<SelectOp>(
        loc, mask, looked, scalarLike(b, loc, type.getElementType(), 0.0));
    out->setAttr(kShardingAttr, result);
    op.getResult().replaceAllUsesWith(out.getResult());
    op.erase();
    return success();
  }

  /// Megatron's vocab-parallel cross-entropy on logits split over the
  /// classes: the max over the group (a shift the loss does not depend
  /// on, not differentiated), the group's sum of exp(l - max) and the
  /// target's shifted logit (each rank's, 0 off its range) completed by g;
  /// loss = log(sum) - (l_t - max). Autodiff gives the local gradient
  /// softmax - onehot on the rank's classes.
  LogicalResult lowerCrossEntropy(SoftmaxCrossEntropyOp op) {
    auto input = op.getInput().getType().cast<RankedTensorType>();
    if (input.getRank() != 2)
      return op.emitError() << describeOp(op)
                            << ": a vocab-parallel cross-entropy of "
                            << input << " (classes not last of 2 dimensions) "
                               "is not partitioned yet";
    if (op.getReduction() == LossReduction::sum)
      return op.emitError() << describeOp(op)
                            << ": a vocab-parallel cross-entropy with "
                               "reduction sum is not partitioned yet";
    OpBuilder b(op);
    Location loc = op.getLoc();
    Type f = input.getElementType();
    int64_t n = input.getDimSize(0), classes = input.getDimSize(1);
    Value logits = op.getInput(), target = op.getTarget();
    ArrayAttr tensor = tensorAxes();
    Value max = b.create<ReduceMaxOp>(loc, logits, ArrayRef<int64_t>{1}, true);
    max = b.create<AllReduceOp>(loc, max, b.getStringAttr(kTensorAxis),
                                b.getStringAttr("max"));
    Value shifted = b.create<SubOp>(loc, logits, max);
    Value sum = b.create<ReduceSumOp>(loc, b.create<ExpOp>(loc, shifted),
                                      ArrayRef<int64_t>{1}, true);
    sum = b.create<TpReduceOp>(loc, sum, tensor);
    auto [local, in] = localIndex(b, loc, target, classes);
    Value safe = b.create<SelectOp>(loc, in, local, scalarI64(b, loc, 0));
    Value picked = b.create<GatherElementsOp>(
        loc, RankedTensorType::get({n, 1}, f), shifted,
        reshape(b, loc, safe, {n, 1}), b.getI64IntegerAttr(1));
    picked = b.create<SelectOp>(loc, reshape(b, loc, in, {n, 1}), picked,
                                scalarLike(b, loc, f, 0.0));
    picked = b.create<TpReduceOp>(loc, picked, tensor);
    Value perSample = reshape(
        b, loc, b.create<SubOp>(loc, b.create<LogOp>(loc, sum), picked), {n});
    // Targets equal to ignore_index contribute nothing; the mean is over
    // the others.
    Value kept;
    if (auto ignore = op.getIgnoreIndex()) {
      kept = b.create<NotOp>(
          loc, b.create<EqualOp>(loc, target, scalarI64(b, loc, *ignore)));
      perSample = b.create<SelectOp>(loc, kept, perSample,
                                     scalarLike(b, loc, f, 0.0));
    }
    Value loss = perSample;
    if (op.getReduction() == LossReduction::mean) {
      auto scalar = RankedTensorType::get({}, f);
      loss = b.create<ReduceSumOp>(loc, perSample, ArrayRef<int64_t>{0}, false);
      Value count =
          kept ? b.create<ReduceSumOp>(
                     loc, b.create<CastOp>(loc, RankedTensorType::get({n}, f),
                                           kept),
                     ArrayRef<int64_t>{0}, false)
               : scalarLike(b, loc, f, double(n));
      loss = b.create<DivOp>(loc, scalar, loss, count);
    }
    op.getResult().replaceAllUsesWith(loss);
    op.erase();
    return success();
  }

  /// One op of a forward: collectives on its operands where shardings
  /// meet, then its local result type and attributes.
  LogicalResult partition(Operation *op) {
    if (isa<func::ReturnOp>(op)) {
      for (OpOperand &use : op->getOpOperands()) {
        ShardingAttr s = shardingOf(use.get());
        if (isPartial(s))
          use.set(reduced(use.get()));
        else if (Value g = isSplit(s) ? gatheredWhole(use.get(), s) : Value())
          use.set(g);
        else if (isSplit(s))
          return op->emitError()
                 << "function result " << use.getOperandNumber()
                 << " is split over the tensor axis as " << s
                 << ", which the partition does not gather";
      }
      return success();
    }
    if (isa<TpCopyOp, TpReduceOp>(op))
      return success();
    if (auto get = dyn_cast<GetParamOp>(op)) {
      if (ParameterOp param = params.lookup(get.getName()))
        get.getResult().setType(param.getType());
      return success();
    }
    // An op of several results computes them whole (propagation gives
    // them no sharding): its split operands are gathered first.
    if (op->getNumResults() > 1) {
      for (OpOperand &use : op->getOpOperands()) {
        FailureOr<Value> v = wholeOperand(use.get());
        if (failed(v))
          return op->emitError()
                 << describeOp(op) << " has several results and operand "
                 << use.getOperandNumber() << " split as "
                 << shardingOf(use.get())
                 << ", which the partition does not gather";
        use.set(*v);
      }
      return success();
    }
    ShardingAttr result = op->getNumResults() == 1
                              ? op->getAttrOfType<ShardingAttr>(kShardingAttr)
                              : ShardingAttr();
    bool splitResult = isSplit(result) || isPartial(result);
    // Propagation stopped here: a degree that does not divide the heads
    // or a width (an error naming the spec key), or a split value the op
    // needs whole (an op without a sharding rule, a dimension it must not
    // split). Its split operands
    // are gathered (sp_all_gather), its partial ones completed (g), and it
    // runs whole on every tensor rank; a result its users split is sliced
    // to the rank's part after it. The vocabulary's seeds (an
    // embedding, the head's column-parallel product) and a row-parallel
    // seed taken back (a lone product fed by a norm) whose operands and
    // result are all whole need nothing: a vocabulary the degree does not
    // divide (GPT-2's 50257) leaves the table and the head replicated, as
    // propagation's remark says.
    auto whole = [&](Value v) {
      ShardingAttr s = shardingOf(v);
      return !isSplit(s) && !isPartial(s);
    };
    auto vocabularyStop = [&](StringRef why) {
      return (why.startswith("vocab-parallel") ||
              why.startswith("column-parallel") ||
              why.startswith("row-parallel split not made")) &&
             !splitResult && llvm::all_of(op->getOperands(), whole);
    };
    if (auto why = op->getAttrOfType<StringAttr>(kShardingStopAttr);
        why && !vocabularyStop(why.getValue())) {
      // A degree that does not divide the heads or a width is the spec's
      // error (issue 13's validation), not a reason to run the op whole.
      if (why.getValue().contains("split refused"))
        return op->emitError()
               << describeOp(op) << ": the tensor-parallel split stops here ("
               << why.getValue()
               << "); spec key 'tensor_parallel_degree' must divide the "
                  "model's attention heads and MLP width: give a smaller "
                  "power of two, or 1";
      auto refuse = [&]() {
        return op->emitError()
               << describeOp(op) << ": the tensor-parallel split stops here ("
               << why.getValue()
               << ") and the partition does not gather what the op needs "
                  "whole: it gathers a value split along one dimension over "
                  "the whole tensor axis only; a smaller "
                  "'tensor_parallel_degree' or 1 avoids it";
      };
      for (OpOperand &use : op->getOpOperands()) {
        FailureOr<Value> v = wholeOperand(use.get());
        if (failed(v))
          return refuse();
        use.set(*v);
      }
      if (isPartial(result) ||
          (isSplit(result) && failed(sliceResult(op, result))))
        return refuse();
      return success();
    }
    if (auto constant = dyn_cast<ConstantOp>(op)) {
      if (splitResult && failed(sliceResult(op, result)))
        return op->emitError() << describeOp(op) << ": a constant split as "
                               << result << " is not partitioned";
      return success();
    }
    // Vocab-parallel lookups and losses (docs/tensor-parallel.md, "The
    // vocabulary").
    // (A table split on its columns is an ordinary local lookup.)
    if (auto embedding = dyn_cast<EmbeddingOp>(op))
      if (ShardingAttr table = shardingOf(embedding.getTable());
          table && !table.getDims()[0].empty())
        return lowerEmbedding(embedding, result);
    if (auto loss = dyn_cast<SoftmaxCrossEntropyOp>(op);
        loss && isSplit(shardingOf(loss.getInput())))
      return lowerCrossEntropy(loss);

    // A mean over split dimensions: each rank's mean of its part is a
    // partial sum once divided by the number of parts.
    int64_t meanParts = 1;
    if (auto mean = dyn_cast<ReduceMeanOp>(op))
      if (ShardingAttr in = shardingOf(mean.getX()))
        for (int64_t axis : mean.getAxes())
          meanParts *= splitOf(in, axis);
    ShardingAttr sliced;
    for (OpOperand &use : op->getOpOperands()) {
      Value v = use.get();
      ShardingAttr s = shardingOf(v);
      if (isPartial(s) && !isPartial(result)) {
        // partial -> replicated: g (and then, entering a split region, f).
        v = reduced(v);
        use.set(v);
        s = ShardingAttr();
      }
      auto type = v.getType().dyn_cast<RankedTensorType>();
      if (splitResult && !isPartial(s) && type &&
          type.getElementType().isa<FloatType>() &&
          !v.getDefiningOp<ConstantOp>()) {
        // An input replicated over (a sub-axis of) the tensor axis the
        // result is split over: f over what the result splits and the
        // input does not, so that its gradient sums those ranks' parts.
        // Usually the whole axis (the input of a column-parallel region);
        // with more tensor ranks than key/value heads also the key/value
        // projections' input over the major sub-axis, and the key/value
        // heads before grouped-query attention's repeat over the minor one.
        FailureOr<uint64_t> in = tensorDigits(s, op);
        FailureOr<uint64_t> out = tensorDigits(result, op);
        if (failed(in) || failed(out))
          return failure();
        if (uint64_t missing = *out & ~*in) {
          FailureOr<ArrayAttr> axes = groupOfDigits(missing, op);
          if (failed(axes))
            return failure();
          use.set(copied(v, *axes));
        }
        if (!isSplit(s))
          continue;
      }
      if (isa<SliceOp>(op) && use.getOperandNumber() == 0)
        sliced = s;
    }
    // An elementwise op whose result is split but an operand whole along
    // that dimension (not broadcast there) reads the rank's part of the
    // operand (a replicated -> split transition; f was put on it above).
    if (isSplit(result) &&
        isa<AddOp, SubOp, MulOp, DivOp, PowOp, MaxOp, MinOp, SelectOp>(op)) {
      auto out = op->getResult(0).getType().cast<RankedTensorType>();
      std::optional<int64_t> splitDim = wholeAxisSplitDim(result);
      for (OpOperand &use : op->getOpOperands()) {
        if (isSplit(shardingOf(use.get())) || isPartial(shardingOf(use.get())))
          continue;
        auto in = use.get().getType().cast<RankedTensorType>();
        int64_t lead = out.getRank() - in.getRank();
        for (int64_t d = 0; d < in.getRank(); ++d) {
          if (in.getDimSize(d) == 1 || splitOf(result, d + lead) == 1)
            continue;
          if (splitDim != d + lead)
            return op->emitError()
                   << describeOp(op) << ": operand "
                   << use.getOperandNumber()
                   << " is whole but the result is split as " << result
                   << "; the partition slices a whole operand only for a "
                      "result split along one dimension over the whole "
                      "tensor axis";
          use.set(slicedPart(use.get(), d, op, op->getLoc()));
        }
      }
    }
    if (auto dropout = dyn_cast<DropoutOp>(op); dropout && isSplit(result)) {
      // Its mask is drawn per element of the full tensor: the emitter
      // turns the full shape and the split into this rank's offsets.
      if (dropout.getFullShape())
        return op->emitError() << describeOp(op)
                               << ": dropout is already a slice";
      auto type = dropout.getType().cast<RankedTensorType>();
      dropout.setFullShapeAttr(
          DenseI64ArrayAttr::get(op->getContext(), type.getShape()));
      dropout.setSplitAttr(result);
    }
    if (op->getNumResults() == 1) {
      auto type = op->getResult(0).getType().dyn_cast<RankedTensorType>();
      if (type && result) {
        FailureOr<RankedTensorType> local = localType(type, result, op);
        if (failed(local))
          return failure();
        op->getResult(0).setType(*local);
      }
    }
    if (auto slice = dyn_cast<SliceOp>(op); slice && sliced)
      if (failed(rescaleSlice(slice, sliced)))
        return failure();
    if (meanParts > 1) {
      OpBuilder b(op->getContext());
      b.setInsertionPointAfter(op);
      Value mean = op->getResult(0);
      auto scaled = b.create<MulOp>(
          op->getLoc(), mean,
          scalarLike(b, op->getLoc(),
                     mean.getType().cast<RankedTensorType>().getElementType(),
                     1.0 / double(meanParts)));
      mean.replaceAllUsesExcept(scaled.getResult(), scaled);
      if (result)
        scaled->setAttr(kShardingAttr, result);
    }
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    mesh = lookupMesh(module);
    if (!mesh || mesh.getAxisSize(kTensorAxis).value_or(1) == 1)
      return;
    // Parameters first: their local type, the full one kept.
    for (auto param : module.getOps<ParameterOp>()) {
      params[param.getSymName()] = param;
      auto s = param->getAttrOfType<ShardingAttr>(kShardingAttr);
      if (!isSplit(s))
        continue;
      auto full = param.getType().cast<RankedTensorType>();
      FailureOr<RankedTensorType> local = localType(full, s, param);
      if (failed(local))
        return signalPassFailure();
      param->setAttr(kFullTypeAttr, TypeAttr::get(full));
      param.setType(*local);
    }
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      SmallVector<Operation *> ops;
      func.walk([&](Operation *op) {
        if (op != func.getOperation())
          ops.push_back(op);
      });
      // The first op that cannot be partitioned says why; the rest of the
      // function would repeat it.
      for (Operation *op : ops)
        if (failed(partition(op)))
          return signalPassFailure();
      // The types say the splits now (read until every op was done).
      func.walk([&](Operation *op) { op->removeAttr(kShardingAttr); });
      for (BlockArgument arg : func.getArguments())
        if (isSplit(func.getArgAttrOfType<ShardingAttr>(arg.getArgNumber(),
                                                        kShardingAttr)))
          return func.emitError()
                       << "argument " << arg.getArgNumber()
                       << " is split over the tensor axis; the partition "
                          "reads whole inputs only",
                 signalPassFailure();
      // The function's type follows its returned local values.
      func.walk([&](func::ReturnOp ret) {
        func.setType(FunctionType::get(&getContext(),
                                       func.getArgumentTypes(),
                                       ret.getOperandTypes()));
      });
    }
  }
};

} // namespace
