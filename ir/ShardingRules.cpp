//===- ShardingRules.cpp - one sharding rule per op family ----------------===//
//
// The rules of the sharding-rule interface (ir/ShardingInterface.td),
// attached to the cleave ops as external models: elementwise ops share a
// factor per result dimension (a broadcast operand dimension has none);
// a matmul's contracted dimension and a sum's reduced ones are reduction
// factors; a softmax's axis and a norm's normalized dimensions must stay
// whole; a transpose permutes factors; a reshape that splits or merges
// dimensions maps one dimension to several factors; an embedding's
// vocabulary is a reduction factor (Megatron-LM's vocab-parallel
// embedding: each rank looks up its rows, the others contribute zeros).
// Attention splits by heads (grouped-query too), rotary by everything but
// the rotated pairs, a slice or concat of equal blocks (a fused QKV
// projection) keeps the block index whole and splits its inside.
// Ops without a rule are not sharded by propagation: they are replicated.
//
//===----------------------------------------------------------------------===//

#include "ir/CleaveOps.h"
#include "ir/ShardingInterface.h"

#include "mlir/IR/DialectRegistry.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::cleave;

#include "ir/ShardingInterface.cpp.inc"

std::string ShardingRule::str() const {
  auto name = [](int64_t f) -> std::string {
    if (f < 18)
      return std::string(1, char('i' + f));
    return "z" + std::to_string(f - 17);
  };
  std::string out;
  llvm::raw_string_ostream os(out);
  auto printValues = [&](ArrayRef<SmallVector<DimFactors>> values) {
    os << "(";
    llvm::interleaveComma(values, os, [&](const SmallVector<DimFactors> &v) {
      os << "[";
      llvm::interleaveComma(v, os, [&](const DimFactors &dim) {
        if (dim.empty())
          os << "1";
        for (int64_t f : dim)
          os << name(f);
      });
      os << "]";
    });
    os << ")";
  };
  printValues(operandFactors);
  os << "->";
  printValues(resultFactors);
  os << " {";
  for (int64_t f = 0; f < getNumFactors(); ++f)
    os << (f ? ", " : "") << name(f) << "=" << factorSizes[f];
  os << "}";
  for (auto [kind, label] :
       {std::pair(FactorKind::Reduction, "reduction"),
        std::pair(FactorKind::NeedReplication, "need_replication"),
        std::pair(FactorKind::GroupReduction, "group_reduction")}) {
    SmallVector<std::string> names;
    for (int64_t f = 0; f < getNumFactors(); ++f)
      if (factorKinds[f] == kind)
        names.push_back(name(f));
    if (!names.empty())
      os << " " << label << "={" << llvm::join(names, ", ") << "}";
  }
  return out;
}

namespace {

using DimFactors = ShardingRule::DimFactors;
using RuleFn = FailureOr<ShardingRule> (*)(Operation *);

ArrayRef<int64_t> shapeOf(Value v) {
  return v.getType().cast<RankedTensorType>().getShape();
}

/// A rule with every operand and result dimension still without factors.
ShardingRule emptyRule(Operation *op) {
  ShardingRule rule;
  for (Value v : op->getOperands())
    rule.operandFactors.emplace_back(shapeOf(v).size());
  for (Value v : op->getResults())
    rule.resultFactors.emplace_back(shapeOf(v).size());
  return rule;
}

/// Gives operand `i`, aligned on the right with `dims` (numpy broadcast),
/// the factor of each dimension it does not broadcast.
void mapBroadcast(ShardingRule &rule, unsigned i, ArrayRef<int64_t> shape,
                  ArrayRef<int64_t> factors, ArrayRef<int64_t> sizes) {
  int64_t offset = int64_t(factors.size()) - int64_t(shape.size());
  for (int64_t j = std::max<int64_t>(0, -offset); j < int64_t(shape.size());
       ++j)
    if (shape[j] == sizes[j + offset])
      rule.operandFactors[i][j] = {factors[j + offset]};
}

FailureOr<ShardingRule> elementwiseRule(Operation *op) {
  ShardingRule rule = emptyRule(op);
  ArrayRef<int64_t> shape = shapeOf(op->getResult(0));
  SmallVector<int64_t> factors;
  for (auto [d, size] : llvm::enumerate(shape)) {
    factors.push_back(rule.addFactor(size, FactorKind::Parallel));
    rule.resultFactors[0][d] = {factors.back()};
  }
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    mapBroadcast(rule, i, shapeOf(v), factors, shape);
  return rule;
}

FailureOr<ShardingRule> matmulRule(Operation *op) {
  auto mm = cast<MatmulOp>(op);
  ShardingRule rule = emptyRule(op);
  ArrayRef<int64_t> y = shapeOf(mm.getResult());
  ArrayRef<int64_t> lhs = shapeOf(mm.getLhs()), rhs = shapeOf(mm.getRhs());
  int64_t r = y.size();
  SmallVector<int64_t> batch;
  for (int64_t d = 0; d < r - 2; ++d) {
    batch.push_back(rule.addFactor(y[d], FactorKind::Parallel));
    rule.resultFactors[0][d] = {batch.back()};
  }
  mapBroadcast(rule, 0, lhs.drop_back(2), batch, y.drop_back(2));
  mapBroadcast(rule, 1, rhs.drop_back(2), batch, y.drop_back(2));
  int64_t m = rule.addFactor(y[r - 2], FactorKind::Parallel);
  int64_t n = rule.addFactor(y[r - 1], FactorKind::Parallel);
  int64_t kSize = mm.getTransposeLhs() ? lhs[lhs.size() - 2] : lhs.back();
  int64_t k = rule.addFactor(kSize, FactorKind::Reduction);
  auto &l = rule.operandFactors[0];
  auto &rr = rule.operandFactors[1];
  int64_t lr = lhs.size(), rk = rhs.size();
  l[lr - 2] = {mm.getTransposeLhs() ? k : m};
  l[lr - 1] = {mm.getTransposeLhs() ? m : k};
  rr[rk - 2] = {mm.getTransposeRhs() ? n : k};
  rr[rk - 1] = {mm.getTransposeRhs() ? k : n};
  rule.resultFactors[0][r - 2] = {m};
  rule.resultFactors[0][r - 1] = {n};
  return rule;
}

/// Reductions: a sum's (mean's) reduced dimension split over ranks gives
/// partial sums; a max's or min's is not a sum, so it stays whole.
template <typename ReduceOpT>
FailureOr<ShardingRule> reduceRule(Operation *op) {
  auto reduce = cast<ReduceOpT>(op);
  FactorKind reducedKind = isa<ReduceSumOp, ReduceMeanOp>(op)
                               ? FactorKind::Reduction
                               : FactorKind::NeedReplication;
  ShardingRule rule = emptyRule(op);
  ArrayRef<int64_t> x = shapeOf(reduce.getX());
  ArrayRef<int64_t> axes = reduce.getAxes();
  int64_t out = 0;
  for (auto [d, size] : llvm::enumerate(x)) {
    bool reduced = llvm::is_contained(axes, int64_t(d));
    int64_t f =
        rule.addFactor(size, reduced ? reducedKind : FactorKind::Parallel);
    rule.operandFactors[0][d] = {f};
    if (!reduced)
      rule.resultFactors[0][out++] = {f};
    else if (reduce.getKeepdims())
      ++out; // a kept dimension of size 1: no factor
  }
  return rule;
}

/// Every operand has the result's shape; the dimensions from `from` to
/// `to` (exclusive) must stay whole.
ShardingRule sameShapeRule(Operation *op, int64_t from, int64_t to) {
  ShardingRule rule = emptyRule(op);
  ArrayRef<int64_t> shape = shapeOf(op->getResult(0));
  for (auto [d, size] : llvm::enumerate(shape)) {
    bool whole = int64_t(d) >= from && int64_t(d) < to;
    int64_t f = rule.addFactor(size, whole ? FactorKind::NeedReplication
                                           : FactorKind::Parallel);
    rule.resultFactors[0][d] = {f};
    for (auto [i, v] : llvm::enumerate(op->getOperands()))
      rule.operandFactors[i][d] = {f};
  }
  return rule;
}

int64_t normalizedAxis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

template <typename SoftmaxOpT>
FailureOr<ShardingRule> softmaxRule(Operation *op) {
  int64_t rank = shapeOf(op->getResult(0)).size();
  int64_t axis = normalizedAxis(cast<SoftmaxOpT>(op).getAxis(), rank);
  return sameShapeRule(op, axis, axis + 1);
}

/// A norm normalizes the dimensions from `axis` on; its scale and bias
/// have those dimensions' shape.
template <typename NormOpT>
FailureOr<ShardingRule> normRule(Operation *op) {
  Value x = op->getOperand(0);
  int64_t rank = shapeOf(x).size();
  int64_t axis = normalizedAxis(cast<NormOpT>(op).getAxis(), rank);
  ShardingRule rule = emptyRule(op);
  for (auto [d, size] : llvm::enumerate(shapeOf(x))) {
    bool normalized = int64_t(d) >= axis;
    int64_t f = rule.addFactor(size, normalized ? FactorKind::NeedReplication
                                                : FactorKind::Parallel);
    rule.operandFactors[0][d] = {f};
    rule.resultFactors[0][d] = {f};
    if (normalized)
      for (unsigned i = 1; i < op->getNumOperands(); ++i)
        rule.operandFactors[i][d - axis] = {f};
  }
  return rule;
}

FailureOr<ShardingRule> transposeRule(Operation *op) {
  auto transpose = cast<TransposeOp>(op);
  ShardingRule rule = emptyRule(op);
  SmallVector<int64_t> factors;
  for (auto [d, size] : llvm::enumerate(shapeOf(transpose.getX()))) {
    factors.push_back(rule.addFactor(size, FactorKind::Parallel));
    rule.operandFactors[0][d] = {factors.back()};
  }
  for (auto [d, from] : llvm::enumerate(transpose.getPerm()))
    rule.resultFactors[0][d] = {factors[from]};
  return rule;
}

/// A reshape is the common refinement of its two shapes: walking both
/// from the major end, each step takes the smaller of the two remaining
/// sizes as a factor when it divides the larger (`[2, 32] -> [8, 8]` is
/// `[i, jk] -> [ij, k]`: heads split out of the model dimension and merged
/// into the batch, as nn.MultiheadAttention's export does). Sizes that do
/// not divide (`[6, 4] -> [4, 6]`) have no rule.
FailureOr<ShardingRule> reshapeRule(Operation *op) {
  ShardingRule rule = emptyRule(op);
  ArrayRef<int64_t> in = shapeOf(op->getOperand(0));
  ArrayRef<int64_t> out = shapeOf(op->getResult(0));
  size_t i = 0, j = 0;
  int64_t inLeft = 0, outLeft = 0; // what is left of dimension i (j)
  auto next = [](ArrayRef<int64_t> shape, size_t &d, int64_t &left) {
    while (left == 1 || left == 0) {
      if (left == 1)
        ++d;
      left = 0;
      while (d < shape.size() && shape[d] == 1)
        ++d;
      if (d >= shape.size())
        return false;
      left = shape[d];
    }
    return true;
  };
  while (true) {
    bool moreIn = next(in, i, inLeft), moreOut = next(out, j, outLeft);
    if (!moreIn || !moreOut) {
      if (moreIn || moreOut)
        return failure();
      break;
    }
    int64_t small = std::min(inLeft, outLeft);
    if (std::max(inLeft, outLeft) % small != 0)
      return failure();
    int64_t f = rule.addFactor(small, FactorKind::Parallel);
    rule.operandFactors[0][i].push_back(f);
    rule.resultFactors[0][j].push_back(f);
    inLeft /= small;
    outLeft /= small;
  }
  return rule;
}

FailureOr<ShardingRule> embeddingRule(Operation *op) {
  auto embedding = cast<EmbeddingOp>(op);
  ShardingRule rule = emptyRule(op);
  ArrayRef<int64_t> table = shapeOf(embedding.getTable());
  int64_t vocab = rule.addFactor(table[0], FactorKind::Reduction);
  int64_t width = rule.addFactor(table[1], FactorKind::Parallel);
  rule.operandFactors[0][0] = {vocab};
  rule.operandFactors[0][1] = {width};
  ArrayRef<int64_t> ids = shapeOf(embedding.getIds());
  for (auto [d, size] : llvm::enumerate(ids)) {
    int64_t f = rule.addFactor(size, FactorKind::Parallel);
    rule.operandFactors[1][d] = {f};
    rule.resultFactors[0][d] = {f};
  }
  rule.resultFactors[0][ids.size()] = {width};
  return rule;
}

/// input [N, C, d...], target [N, d...]. The classes are a group
/// reduction: a vocab-parallel cross-entropy (Megatron-LM) reduces its
/// slice of the classes and all-reduces the max, the sum of exponentials
/// and the target's logit over the group, a lowering of its own whose
/// loss is whole, not a partial sum. The samples are parallel when the
/// loss is per sample, summed (partial) when reduced.
FailureOr<ShardingRule> softmaxCrossEntropyRule(Operation *op) {
  auto loss = cast<SoftmaxCrossEntropyOp>(op);
  ShardingRule rule = emptyRule(op);
  FactorKind samples = loss.getReduction() == LossReduction::none
                           ? FactorKind::Parallel
                           : FactorKind::Reduction;
  ArrayRef<int64_t> input = shapeOf(loss.getInput());
  for (auto [d, size] : llvm::enumerate(input)) {
    if (d == 1) {
      rule.operandFactors[0][1] = {
          rule.addFactor(size, FactorKind::GroupReduction)};
      continue;
    }
    int64_t f = rule.addFactor(size, samples);
    int64_t t = d == 0 ? 0 : d - 1;
    rule.operandFactors[0][d] = {f};
    rule.operandFactors[1][t] = {f};
    if (samples == FactorKind::Parallel)
      rule.resultFactors[0][t] = {f};
  }
  return rule;
}

/// q [B, H, Tq, D], k [B, Hkv, Tk, D], v [B, Hkv, Tk, Dv] -> [B, H, Tq, Dv],
/// H = Hkv * rep (grouped-query attention: query head h reads key/value
/// head h / rep). The heads are `[kv, rep]` in q and the result and `kv`
/// in k and v, so splitting the query heads over more ranks than there
/// are key/value heads splits `kv` fully and `rep` with the rest: each
/// rank holds the key/value heads its query heads read. The keys and the
/// head width are reduced inside a softmax: whole. The mask broadcasts
/// against [B, H, Tq, Tk].
FailureOr<ShardingRule> attentionRule(Operation *op) {
  auto attention = cast<AttentionOp>(op);
  ArrayRef<int64_t> q = shapeOf(attention.getQ());
  ArrayRef<int64_t> k = shapeOf(attention.getK());
  ArrayRef<int64_t> v = shapeOf(attention.getV());
  if (q.size() != 4 || k.size() != 4 || v.size() != 4 || q[1] % k[1] != 0)
    return failure();
  ShardingRule rule = emptyRule(op);
  int64_t b = rule.addFactor(q[0], FactorKind::Parallel);
  int64_t kv = rule.addFactor(k[1], FactorKind::Parallel);
  DimFactors heads = {kv};
  if (q[1] != k[1])
    heads.push_back(rule.addFactor(q[1] / k[1], FactorKind::Parallel));
  int64_t tq = rule.addFactor(q[2], FactorKind::Parallel);
  int64_t tk = rule.addFactor(k[2], FactorKind::NeedReplication);
  int64_t d = rule.addFactor(q[3], FactorKind::NeedReplication);
  int64_t dv = rule.addFactor(v[3], FactorKind::Parallel);
  rule.operandFactors[0] = {{b}, heads, {tq}, {d}};
  rule.operandFactors[1] = {{b}, {kv}, {tk}, {d}};
  rule.operandFactors[2] = {{b}, {kv}, {tk}, {dv}};
  rule.resultFactors[0] = {{b}, heads, {tq}, {dv}};
  if (Value mask = attention.getMask()) {
    SmallVector<DimFactors> full = {{b}, heads, {tq}, {tk}};
    ArrayRef<int64_t> shape = shapeOf(mask);
    SmallVector<int64_t> fullShape = {q[0], q[1], q[2], k[2]};
    int64_t offset = 4 - int64_t(shape.size());
    for (int64_t j = std::max<int64_t>(0, -offset); j < int64_t(shape.size());
         ++j)
      if (j + offset >= 0 && shape[j] == fullShape[j + offset])
        rule.operandFactors[3][j] = full[j + offset];
  }
  return rule;
}

/// x [..., T, D], cos and sin [T, D]: the positions are shared with the
/// tables, the rotated pairs span the last dimension (whole).
FailureOr<ShardingRule> rotaryRule(Operation *op) {
  ArrayRef<int64_t> x = shapeOf(op->getOperand(0));
  int64_t r = x.size();
  if (r < 2)
    return failure();
  ShardingRule rule = emptyRule(op);
  for (int64_t d = 0; d < r; ++d) {
    int64_t f = rule.addFactor(x[d], d == r - 1 ? FactorKind::NeedReplication
                                                : FactorKind::Parallel);
    rule.operandFactors[0][d] = {f};
    rule.resultFactors[0][d] = {f};
  }
  for (unsigned i = 1; i < op->getNumOperands(); ++i) {
    ArrayRef<int64_t> table = shapeOf(op->getOperand(i));
    if (table.size() == 2 && table[0] == x[r - 2]) {
      rule.operandFactors[i][0] = rule.resultFactors[0][r - 2];
      rule.operandFactors[i][1] = rule.resultFactors[0][r - 1];
    }
  }
  return rule;
}

/// A slice keeps a dimension it takes whole. One that takes block `s / n`
/// of `dim / n` equal blocks (q, k or v out of a fused QKV projection) is
/// `[blocks, n]` in the operand and `n` in the result: the block index
/// stays whole (every rank needs the block), its inside may be split, and
/// a rank slicing its blocked operand gets its part of the block. Any
/// other slice keeps the dimension whole on both sides.
FailureOr<ShardingRule> sliceRule(Operation *op) {
  auto slice = cast<SliceOp>(op);
  ShardingRule rule = emptyRule(op);
  ArrayRef<int64_t> in = shapeOf(slice.getX());
  ArrayRef<int64_t> out = shapeOf(slice.getResult());
  for (auto [d, size] : llvm::enumerate(in)) {
    int64_t start = slice.getStart()[d], limit = slice.getLimit()[d];
    int64_t step = slice.getStep()[d], n = out[d];
    if (n == size && step == 1) {
      int64_t f = rule.addFactor(size, FactorKind::Parallel);
      rule.operandFactors[0][d] = {f};
      rule.resultFactors[0][d] = {f};
    } else if (step == 1 && n > 0 && limit - start == n && size % n == 0 &&
               start % n == 0) {
      int64_t block = rule.addFactor(size / n, FactorKind::NeedReplication);
      int64_t inside = rule.addFactor(n, FactorKind::Parallel);
      rule.operandFactors[0][d] = {block, inside};
      rule.resultFactors[0][d] = {inside};
    } else {
      rule.operandFactors[0][d] = {
          rule.addFactor(size, FactorKind::NeedReplication)};
      if (n > 0)
        rule.resultFactors[0][d] = {
            rule.addFactor(n, FactorKind::NeedReplication)};
    }
  }
  return rule;
}

/// The inverse of the blocked slice: inputs of equal size along the axis
/// are the blocks of the result's `[inputs, n]`; unequal ones keep the
/// axis whole.
FailureOr<ShardingRule> concatRule(Operation *op) {
  auto concat = cast<ConcatOp>(op);
  ShardingRule rule = emptyRule(op);
  ArrayRef<int64_t> out = shapeOf(concat.getResult());
  int64_t axis = concat.getAxis();
  if (axis < 0)
    axis += out.size();
  bool equal = llvm::all_of(concat.getInputs(), [&](Value v) {
    return shapeOf(v)[axis] == shapeOf(concat.getInputs()[0])[axis];
  });
  for (auto [d, size] : llvm::enumerate(out)) {
    if (int64_t(d) != axis) {
      int64_t f = rule.addFactor(size, FactorKind::Parallel);
      rule.resultFactors[0][d] = {f};
      for (unsigned i = 0; i < op->getNumOperands(); ++i)
        rule.operandFactors[i][d] = {f};
    } else if (equal) {
      int64_t n = shapeOf(concat.getInputs()[0])[axis];
      int64_t block =
          rule.addFactor(size / n, FactorKind::NeedReplication);
      int64_t inside = rule.addFactor(n, FactorKind::Parallel);
      rule.resultFactors[0][d] = {block, inside};
      for (unsigned i = 0; i < op->getNumOperands(); ++i)
        rule.operandFactors[i][d] = {inside};
    } else {
      rule.resultFactors[0][d] = {
          rule.addFactor(size, FactorKind::NeedReplication)};
      for (unsigned i = 0; i < op->getNumOperands(); ++i)
        rule.operandFactors[i][d] = {rule.addFactor(
            shapeOf(op->getOperand(i))[d], FactorKind::NeedReplication)};
    }
  }
  return rule;
}

/// data [..., A, ...] indexed along `axis` by indices [...]: the other
/// data dimensions and the indices' are shared with the result; the
/// indexed one stays whole (an index may point anywhere in it).
FailureOr<ShardingRule> gatherRule(Operation *op) {
  auto gather = cast<GatherOp>(op);
  ShardingRule rule = emptyRule(op);
  ArrayRef<int64_t> data = shapeOf(gather.getData());
  ArrayRef<int64_t> indices = shapeOf(gather.getIndices());
  int64_t axis = gather.getAxis();
  if (axis < 0)
    axis += data.size();
  int64_t out = 0;
  for (auto [d, size] : llvm::enumerate(data)) {
    if (int64_t(d) == axis) {
      rule.operandFactors[0][d] = {
          rule.addFactor(size, FactorKind::NeedReplication)};
      for (auto [j, n] : llvm::enumerate(indices)) {
        int64_t f = rule.addFactor(n, FactorKind::Parallel);
        rule.operandFactors[1][j] = {f};
        rule.resultFactors[0][out++] = {f};
      }
      continue;
    }
    int64_t f = rule.addFactor(size, FactorKind::Parallel);
    rule.operandFactors[0][d] = {f};
    rule.resultFactors[0][out++] = {f};
  }
  return rule;
}

template <typename OpT, RuleFn rule>
struct Rule : ShardingRuleOpInterface::ExternalModel<Rule<OpT, rule>, OpT> {
  FailureOr<ShardingRule> getShardingRule(Operation *op) const {
    return rule(op);
  }
};

template <RuleFn rule, typename... Ops>
void attach(MLIRContext *ctx) {
  (Ops::template attachInterface<Rule<Ops, rule>>(*ctx), ...);
}

} // namespace

void mlir::cleave::registerShardingRules(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, CleaveDialect *) {
    attach<elementwiseRule, AddOp, SubOp, MulOp, DivOp, PowOp, MaxOp, MinOp,
           AndOp, OrOp, EqualOp, LessOp, LessEqualOp, GreaterOp,
           GreaterEqualOp, SelectOp, NegOp, AbsOp, ReluOp, NotOp, ExpOp, LogOp,
           SqrtOp, RsqrtOp, ReciprocalOp, TanhOp, ErfOp, SigmoidOp, SiluOp,
           SinOp, CosOp, GeluOp, DropoutOp, CastOp, SiluGradOp, GeluGradOp,
           BroadcastToOp>(ctx);
    attach<matmulRule, MatmulOp>(ctx);
    attach<reduceRule<ReduceSumOp>, ReduceSumOp>(ctx);
    attach<reduceRule<ReduceMeanOp>, ReduceMeanOp>(ctx);
    attach<reduceRule<ReduceMaxOp>, ReduceMaxOp>(ctx);
    attach<reduceRule<ReduceMinOp>, ReduceMinOp>(ctx);
    attach<softmaxRule<SoftmaxOp>, SoftmaxOp>(ctx);
    attach<softmaxRule<LogSoftmaxOp>, LogSoftmaxOp>(ctx);
    attach<softmaxRule<SoftmaxGradOp>, SoftmaxGradOp>(ctx);
    attach<softmaxRule<LogSoftmaxGradOp>, LogSoftmaxGradOp>(ctx);
    attach<normRule<LayerNormOp>, LayerNormOp>(ctx);
    attach<normRule<RmsNormOp>, RmsNormOp>(ctx);
    attach<transposeRule, TransposeOp>(ctx);
    attach<reshapeRule, ReshapeOp>(ctx);
    attach<embeddingRule, EmbeddingOp>(ctx);
    attach<softmaxCrossEntropyRule, SoftmaxCrossEntropyOp>(ctx);
    attach<attentionRule, AttentionOp>(ctx);
    attach<rotaryRule, RotaryOp>(ctx);
    attach<sliceRule, SliceOp>(ctx);
    attach<concatRule, ConcatOp>(ctx);
    attach<gatherRule, GatherOp>(ctx);
  });
}
