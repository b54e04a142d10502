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
  for (auto [kind, label] : {std::pair(FactorKind::Reduction, "reduction"),
                             std::pair(FactorKind::NeedReplication,
                                       "need_replication")}) {
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

/// A reshape whose dimensions group into runs of equal product where one
/// side of each run is a single dimension: that dimension is the product
/// of the other side's factors (`[8, 16] -> [128]`: `[i, j] -> [ij]`).
/// Anything else (`[6, 4] -> [4, 6]`) has no rule.
FailureOr<ShardingRule> reshapeRule(Operation *op) {
  ShardingRule rule = emptyRule(op);
  ArrayRef<int64_t> in = shapeOf(op->getOperand(0));
  ArrayRef<int64_t> out = shapeOf(op->getResult(0));
  size_t i = 0, j = 0;
  auto skipOnes = [&] {
    while (i < in.size() && in[i] == 1)
      ++i;
    while (j < out.size() && out[j] == 1)
      ++j;
  };
  for (skipOnes(); i < in.size() && j < out.size(); skipOnes()) {
    SmallVector<size_t> inRun = {i}, outRun = {j};
    int64_t inProduct = in[i++], outProduct = out[j++];
    while (inProduct != outProduct) {
      skipOnes();
      if (inProduct < outProduct && i < in.size()) {
        inRun.push_back(i);
        inProduct *= in[i++];
      } else if (outProduct < inProduct && j < out.size()) {
        outRun.push_back(j);
        outProduct *= out[j++];
      } else {
        return failure();
      }
    }
    if (inRun.size() > 1 && outRun.size() > 1)
      return failure();
    bool split = inRun.size() == 1;
    ArrayRef<size_t> many = split ? outRun : inRun;
    ArrayRef<int64_t> manyShape = split ? out : in;
    auto &oneSide = split ? rule.operandFactors[0] : rule.resultFactors[0];
    auto &manySide = split ? rule.resultFactors[0] : rule.operandFactors[0];
    size_t one = split ? inRun[0] : outRun[0];
    for (size_t d : many) {
      int64_t f = rule.addFactor(manyShape[d], FactorKind::Parallel);
      manySide[d] = {f};
      oneSide[one].push_back(f);
    }
  }
  skipOnes();
  if (i != in.size() || j != out.size())
    return failure();
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

/// input [N, C, d...], target [N, d...]. The classes stay whole: a
/// vocab-parallel cross-entropy needs a max and a sum of exponentials over
/// the group, a lowering of its own, not a partial sum. The samples are
/// parallel when the loss is per sample, summed (partial) when reduced.
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
          rule.addFactor(size, FactorKind::NeedReplication)};
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
           SinOp, CosOp, GeluOp, CastOp, SiluGradOp, GeluGradOp>(ctx);
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
  });
}
