//===- PropagateShardings.cpp - the tensor-parallel split of every value --===//
//
// Seeds Megatron-LM's split where the graph's structure shows it and
// carries it through the ops' sharding rules (ir/ShardingRules.cpp) to a
// fixed point, as openxla/shardy's basic propagation: each value is
// undecided until an op next to it decides it, and a decided value never
// changes, so the walk ends. Only the mesh's `tensor` axis is decided
// here; a dimension's split is that axis whole or a sub-axis of it, maybe
// over equal blocks (docs/tensor-parallel.md).
//
//===----------------------------------------------------------------------===//

#include "ir/AttrNames.h"
#include "ir/CleaveOps.h"
#include "ir/DistributionOps.h"
#include "ir/ShardingInterface.h"
#include "passes/NodeName.h"
#include "passes/Passes.h"
#include "passes/ValueOrigins.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

#include <deque>
#include <optional>

namespace mlir::cleave {
#define GEN_PASS_DEF_PROPAGATESHARDINGS
#include "passes/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// A piece of the tensor axis: the sub-axis of `size` ranks with pre-size
/// `pre` (size 0: none, the piece is whole when pre * size is the axis).
struct Part {
  int64_t pre = 1, size = 0;
  bool isSplit() const { return size > 1; }
  bool operator==(const Part &o) const {
    return (!isSplit() && !o.isSplit()) || (pre == o.pre && size == o.size);
  }
};

/// A dimension's split: `blocks` equal blocks, each split by `part`.
struct DimSplit {
  int64_t blocks = 1;
  Part part;
  bool isSplit() const { return part.isSplit(); }
};

/// A factor of an op's rule split the same way.
using FactorSplit = DimSplit;

bool operator==(const DimSplit &a, const DimSplit &b) {
  if (!a.isSplit() || !b.isSplit())
    return a.isSplit() == b.isSplit();
  return a.blocks == b.blocks && a.part == b.part;
}
bool operator!=(const DimSplit &a, const DimSplit &b) { return !(a == b); }

struct ValueSplit {
  SmallVector<DimSplit> dims;
  bool partial = false;
  bool isReplicated() const {
    return !partial &&
           llvm::none_of(dims, [](const DimSplit &d) { return d.isSplit(); });
  }
};

/// What the factors `factors` (sizes `sizes`, major to minor) of one
/// dimension get from the dimension's split, or nullopt when the split
/// does not fall on their boundaries.
std::optional<SmallVector<FactorSplit>>
projectDim(const DimSplit &dim, ArrayRef<int64_t> factors,
           ArrayRef<int64_t> sizes) {
  SmallVector<FactorSplit> out(factors.size());
  if (!dim.isSplit())
    return out;
  int64_t blocks = dim.blocks;
  Part left = dim.part;
  for (auto [i, f] : llvm::enumerate(factors)) {
    int64_t capacity = sizes[f];
    if (blocks > 1) {
      if (blocks % capacity == 0) {
        blocks /= capacity;
        continue;
      }
      if (capacity % blocks != 0)
        return std::nullopt;
      out[i].blocks = blocks;
      capacity /= blocks;
      blocks = 1;
    }
    if (left.size <= 1)
      continue;
    if (capacity % left.size == 0) {
      out[i].part = left;
      left.size = 1;
    } else if (left.size % capacity == 0) {
      out[i].part = Part{left.pre, capacity};
      left = Part{left.pre * capacity, left.size / capacity};
    } else {
      return std::nullopt;
    }
  }
  if (blocks > 1 || left.size > 1)
    return std::nullopt;
  return out;
}

/// The split of a dimension made of `factors`, or nullopt when theirs do
/// not make one (a split factor after a partly split one, or a sub-axis
/// that does not continue the previous one).
std::optional<DimSplit> composeDim(ArrayRef<int64_t> factors,
                                   ArrayRef<int64_t> sizes,
                                   ArrayRef<FactorSplit> splits) {
  DimSplit dim;
  int64_t leading = 1;
  bool open = false; // the last factor was split to its end
  for (int64_t f : factors) {
    const FactorSplit &s = splits[f];
    if (!dim.isSplit()) {
      if (!s.isSplit()) {
        leading *= sizes[f];
        continue;
      }
      dim.blocks = leading * s.blocks;
      dim.part = s.part;
      open = s.part.size * s.blocks == sizes[f];
      continue;
    }
    if (!s.isSplit()) {
      open = false;
      continue;
    }
    if (!open || s.blocks != 1 ||
        s.part.pre != dim.part.pre * dim.part.size)
      return std::nullopt;
    dim.part.size *= s.part.size;
    open = s.part.size == sizes[f];
  }
  return dim;
}

struct PropagateShardings
    : mlir::cleave::impl::PropagateShardingsBase<PropagateShardings> {
  using PropagateShardingsBase::PropagateShardingsBase;

  /// One decided-or-not value: a get_param's result stands for its
  /// parameter, so every read of a parameter is one node.
  struct Node {
    RankedTensorType type;
    std::optional<ValueSplit> split;
    /// When `split` was last decided (see `clock`).
    uint64_t decidedAt = 0;
  };

  int64_t axisSize = 1;
  SmallVector<Node> nodes;
  DenseMap<Value, unsigned> nodeOfValue;
  llvm::StringMap<unsigned> nodeOfParam;
  DenseMap<Operation *, std::string> stops;
  /// Ops computed whole whose result their users split along a dimension
  /// the op needs whole (a norm's normalized features): each rank would
  /// slice the whole result, which the partition does not build.
  DenseMap<Operation *, std::string> slicedWhole;
  bool failedConflict = false;
  /// A step's outcome depends only on its values' nodes, so a sweep skips
  /// an op none of whose nodes were decided since its last step: the same
  /// decisions in the same order, without re-reading the whole model on
  /// every sweep of every trial. `clock` orders decisions and steps.
  uint64_t clock = 0;
  DenseMap<Operation *, uint64_t> steppedAt;
  /// Each op's sharding rule (none: nullopt), built once.
  DenseMap<Operation *, std::optional<ShardingRule>> rules;

  void decide(unsigned n, const ValueSplit &split) {
    nodes[n].split = split;
    nodes[n].decidedAt = ++clock;
  }

  /// Whether a node of `op`'s values was decided since `op`'s last step.
  bool needsStep(Operation *op) {
    auto it = steppedAt.find(op);
    if (it == steppedAt.end())
      return true;
    auto decidedSince = [&](Value v) {
      std::optional<unsigned> n = nodeOf(v);
      return n && nodes[*n].decidedAt > it->second;
    };
    return llvm::any_of(op->getOperands(), decidedSince) ||
           llvm::any_of(op->getResults(), decidedSince);
  }

  const std::optional<ShardingRule> &ruleOf(Operation *op) {
    auto [it, inserted] = rules.try_emplace(op);
    if (inserted)
      if (auto rules = dyn_cast<ShardingRuleOpInterface>(op))
        if (FailureOr<ShardingRule> rule = rules.getShardingRule();
            succeeded(rule))
          it->second = std::move(*rule);
    return it->second;
  }

  std::optional<unsigned> nodeOf(Value v) {
    auto it = nodeOfValue.find(v);
    if (it != nodeOfValue.end())
      return it->second;
    return std::nullopt;
  }

  void addValue(Value v) {
    auto type = v.getType().dyn_cast<RankedTensorType>();
    if (!type || nodeOfValue.count(v))
      return;
    if (auto get = v.getDefiningOp<GetParamOp>()) {
      auto [it, inserted] =
          nodeOfParam.try_emplace(get.getName(), unsigned(nodes.size()));
      if (inserted)
        nodes.push_back({type, std::nullopt});
      nodeOfValue[v] = it->second;
      return;
    }
    nodeOfValue[v] = nodes.size();
    nodes.push_back({type, std::nullopt});
  }

  std::string describe(Operation *op) {
    std::string name = onnxNodeName(op->getLoc());
    std::string out = op->getName().getStringRef().str();
    if (!name.empty())
      out += " '" + name + "'";
    return out;
  }

  std::string describe(const DimSplit &d) {
    std::string out;
    if (d.blocks > 1)
      out += std::to_string(d.blocks) + " blocks of ";
    if (d.part.pre == 1 && d.part.size == axisSize)
      return out + "\"tensor\"";
    return out + "\"tensor\":(" + std::to_string(d.part.pre) + ")" +
           std::to_string(d.part.size);
  }

  /// Whether two pieces of the axis share ranks' coordinates.
  static bool overlaps(const Part &a, const Part &b) {
    return a.pre < b.pre * b.size && b.pre < a.pre * a.size;
  }

  void stop(Operation *op, const Twine &why) {
    if (stops.count(op))
      return;
    stops[op] = why.str();
  }

  /// One step at `op`: every factor of its rule split as the decided
  /// values around it say; undecided values get what their factors make.
  /// Returns whether a value was decided.
  bool step(Operation *op) {
    if (op->hasTrait<OpTrait::IsTerminator>())
      return false;
    SmallVector<Value> values(op->getOperands());
    llvm::append_range(values, op->getResults());
    const std::optional<ShardingRule> &rule = ruleOf(op);
    if (!rule) {
      // No rule: a split operand is gathered, the results are computed
      // whole. An undecided result may still be split by its users
      // (each rank slices what it computed).
      for (auto [i, v] : llvm::enumerate(op->getOperands())) {
        std::optional<unsigned> n = nodeOf(v);
        if (n && nodes[*n].split && !nodes[*n].split->isReplicated()) {
          stop(op, "operand " + Twine(i) +
                       " is gathered: the op has no sharding rule");
          break;
        }
      }
      return false;
    }
    unsigned numOperands = op->getNumOperands();
    auto factorsOf = [&](unsigned i) -> ArrayRef<ShardingRule::DimFactors> {
      return i < numOperands ? rule->operandFactors[i]
                             : rule->resultFactors[i - numOperands];
    };
    auto nameOf = [&](unsigned i) {
      return i < numOperands ? "operand " + std::to_string(i)
                             : "result " + std::to_string(i - numOperands);
    };

    SmallVector<FactorSplit> factors(rule->getNumFactors());
    SmallVector<int> from(rule->getNumFactors(), -1);
    SmallVector<int64_t> fromDim(rule->getNumFactors(), -1);
    // Whether an operand (not only a result) gives the factor its split.
    SmallVector<bool> fromOperand(rule->getNumFactors(), false);
    for (auto [i, v] : llvm::enumerate(values)) {
      std::optional<unsigned> n = nodeOf(v);
      if (!n || !nodes[*n].split)
        continue;
      const ValueSplit &split = *nodes[*n].split;
      for (auto [d, dimFactors] : llvm::enumerate(factorsOf(i))) {
        const DimSplit &dim = split.dims[d];
        if (!dim.isSplit())
          continue;
        std::optional<SmallVector<FactorSplit>> projected =
            projectDim(dim, dimFactors, rule->factorSizes);
        if (!projected) {
          stop(op, nameOf(i) + " is gathered: its split of dimension " +
                       Twine(d) + " (" + describe(dim) +
                       ") does not fall on the op's factors " +
                       rule->str());
          continue;
        }
        for (auto [f, s] : llvm::zip(dimFactors, *projected)) {
          if (!s.isSplit())
            continue;
          // The same factor split two ways, or two factors using one
          // piece of the axis: each rank would hold pieces that do not
          // make one value.
          std::optional<int64_t> clash;
          if (factors[f].isSplit() && factors[f] != s)
            clash = f;
          for (int64_t g = 0; g < rule->getNumFactors() && !clash; ++g)
            if (g != f && factors[g].isSplit() &&
                overlaps(factors[g].part, s.part))
              clash = g;
          if (clash) {
            op->emitError()
                << "conflicting tensor-parallel splits meet at "
                << describe(op) << ": dimension " << fromDim[*clash]
                << " of " << nameOf(from[*clash]) << " is split over "
                << describe(factors[*clash]) << " and dimension " << d
                << " of " << nameOf(i) << " over " << describe(s)
                << (*clash == f ? " for the same factor"
                                : ", the same ranks for another factor")
                << " (" << rule->str()
                << "); give the parameters that seed them compatible "
                   "cleave.sharding, or none";
            failedConflict = true;
            return false;
          }
          if (!factors[f].isSplit() || i < numOperands) {
            from[f] = i;
            fromDim[f] = d;
          }
          factors[f] = s;
          fromOperand[f] = fromOperand[f] || i < numOperands;
        }
      }
    }
    for (int64_t f = 0; f < rule->getNumFactors(); ++f) {
      if (!factors[f].isSplit() ||
          rule->factorKinds[f] != FactorKind::NeedReplication)
        continue;
      // A split operand is gathered before the op; a result that only
      // its users split is computed whole and sliced, which is free.
      if (fromOperand[f])
        stop(op, nameOf(from[f]) + " is gathered: dimension " +
                     Twine(fromDim[f]) + " must stay whole in " +
                     rule->str());
      else
        slicedWhole.try_emplace(op, nameOf(from[f]) + " would be sliced: " +
                                        "dimension " + Twine(fromDim[f]).str() +
                                        " must stay whole in " + rule->str());
      factors[f] = FactorSplit();
    }
    bool reduced = false;
    for (int64_t f = 0; f < rule->getNumFactors(); ++f)
      reduced |= factors[f].isSplit() &&
                 rule->factorKinds[f] == FactorKind::Reduction;

    bool changed = false;
    for (auto [i, v] : llvm::enumerate(values)) {
      std::optional<unsigned> n = nodeOf(v);
      if (!n || nodes[*n].split)
        continue;
      ValueSplit split;
      bool expressible = true;
      for (const ShardingRule::DimFactors &dimFactors : factorsOf(i)) {
        std::optional<DimSplit> dim =
            composeDim(dimFactors, rule->factorSizes, factors);
        expressible &= dim.has_value();
        split.dims.push_back(dim.value_or(DimSplit()));
      }
      split.partial = reduced && i >= numOperands;
      if (!expressible) {
        stop(op, nameOf(i) + " is replicated: its factors' splits make "
                             "no sharding of one dimension");
        continue;
      }
      if (split.isReplicated())
        continue;
      decide(*n, split);
      changed = true;
    }
    return changed;
  }

  /// Decides `v` as `split` when it is undecided.
  bool seed(Value v, const ValueSplit &split) {
    std::optional<unsigned> n = nodeOf(v);
    if (!n || nodes[*n].split)
      return false;
    decide(*n, split);
    return true;
  }

  /// `op`'s operand (result) `i` with factor `f` split over the whole axis,
  /// or nullopt when the factor's size is not divisible by it.
  std::optional<ValueSplit> splitFactor(const ShardingRule &rule,
                                        ArrayRef<ShardingRule::DimFactors> dims,
                                        int64_t f) {
    if (rule.factorSizes[f] % axisSize != 0)
      return std::nullopt;
    SmallVector<FactorSplit> factors(rule.getNumFactors());
    factors[f].part = Part{1, axisSize};
    ValueSplit split;
    for (const ShardingRule::DimFactors &d : dims) {
      std::optional<DimSplit> dim = composeDim(d, rule.factorSizes, factors);
      if (!dim)
        return std::nullopt;
      split.dims.push_back(*dim);
    }
    return split;
  }

  bool sweepStep(Operation *op) {
    if (!needsStep(op))
      return false;
    steppedAt[op] = ++clock;
    return step(op);
  }

  void propagate(ArrayRef<Operation *> ops) {
    bool changed = true;
    while (changed && !failedConflict) {
      changed = false;
      for (Operation *op : ops)
        changed |= sweepStep(op);
      for (Operation *op : llvm::reverse(ops))
        changed |= sweepStep(op);
    }
  }

  static bool isParameter(Value v) {
    Operation *def = v.getDefiningOp();
    while (def && isa<CastOp>(def)) {
      v = def->getOperand(0);
      def = v.getDefiningOp();
    }
    return def && isa<GetParamOp>(def);
  }

  /// Whether `ancestor` is among the values `v` is computed from (a
  /// bounded walk: a residual branch is a few dozen ops).
  static bool computedFrom(Value v, Value ancestor) {
    llvm::DenseSet<Value> seen;
    std::deque<Value> work = {v};
    while (!work.empty() && seen.size() < 4096) {
      Value x = work.front();
      work.pop_front();
      if (x == ancestor)
        return true;
      if (!seen.insert(x).second)
        continue;
      if (Operation *def = x.getDefiningOp())
        for (Value operand : def->getOperands())
          work.push_back(operand);
    }
    return false;
  }

  /// Whether the product's result returns to the residual stream: through
  /// a bias add, reshapes, transposes, casts and a dropout (GPT-2's
  /// resid_dropout), it is added to a value its own input was computed
  /// from.
  static bool writesResidual(MatmulOp mm) {
    Value v = mm.getResult();
    while (v.hasOneUse()) {
      Operation *user = *v.getUsers().begin();
      if (isa<ReshapeOp, TransposeOp, CastOp, DropoutOp>(user)) {
        v = user->getResult(0);
        continue;
      }
      auto add = dyn_cast<AddOp>(user);
      if (!add)
        return false;
      Value other = add.getLhs() == v ? add.getRhs() : add.getLhs();
      if (isParameter(other)) {
        v = add.getResult();
        continue;
      }
      return computedFrom(mm.getLhs(), other);
    }
    return false;
  }

  static bool readsNorm(MatmulOp mm) {
    Operation *def = throughLayout(mm.getLhs()).getDefiningOp();
    return def && isa<LayerNormOp, RmsNormOp>(def);
  }

  /// Seeds the rhs of each product `pick` accepts with the factor `which`
  /// picks from its rule split. With `trial` Slices, each seed is
  /// propagated at once and taken back when a whole result would have to
  /// be sliced for it (a lone row-parallel product whose input comes
  /// straight from a norm: `x + fc(gelu(ln(x)))`, which has no
  /// column-parallel partner). With Stops, taken back when that makes a
  /// stop: a column-parallel product
  /// whose split output would be gathered again (BERT's prediction head
  /// transform, a product of the last norm's output whose features then
  /// enter a layer norm, which needs them whole) is left whole, with a
  /// remark naming where its split would have stopped.
  enum class Trial { None, Stops, Slices };
  template <typename Pick, typename Which>
  void seedMatmuls(ArrayRef<Operation *> ops, Pick pick, Which which,
                   StringRef kind, Trial trial = Trial::None) {
    for (Operation *op : ops) {
      auto mm = dyn_cast<MatmulOp>(op);
      if (!mm || !isParameter(mm.getRhs()) || !pick(mm))
        continue;
      std::optional<unsigned> n = nodeOf(mm.getRhs());
      if (!n || nodes[*n].split)
        continue;
      FailureOr<ShardingRule> rule =
          cast<ShardingRuleOpInterface>(op).getShardingRule();
      if (failed(rule))
        continue;
      int64_t f = which(*rule);
      std::optional<ValueSplit> split =
          splitFactor(*rule, rule->operandFactors[1], f);
      if (!split) {
        stop(op, Twine(kind) + " split refused: its dimension of " +
                     Twine(rule->factorSizes[f]) +
                     " is not divisible by tensor=" + Twine(axisSize) +
                     "; the weight is replicated");
        continue;
      }
      if (trial == Trial::None) {
        seed(mm.getRhs(), *split);
        continue;
      }
      SmallVector<Node> nodesBefore = nodes;
      DenseMap<Operation *, std::string> stopsBefore = stops;
      DenseMap<Operation *, std::string> slicedBefore = slicedWhole;
      seed(mm.getRhs(), *split);
      propagate(ops);
      // Column-parallel: taken back at a new stop; row-parallel: at a new
      // whole result its users would slice.
      const DenseMap<Operation *, std::string> &events =
          trial == Trial::Stops ? stops : slicedWhole;
      const DenseMap<Operation *, std::string> &eventsBefore =
          trial == Trial::Stops ? stopsBefore : slicedBefore;
      if (failedConflict || events.size() == eventsBefore.size())
        continue;
      // The first op (in program order) the split would stop at.
      Operation *at = nullptr;
      for (Operation *o : ops)
        if (events.count(o) && !eventsBefore.count(o)) {
          at = o;
          break;
        }
      std::string why = events.lookup(at);
      bool stopped = trial == Trial::Stops;
      nodes = std::move(nodesBefore);
      // The nodes went back: every op's last step saw others.
      steppedAt.clear();
      stops = std::move(stopsBefore);
      slicedWhole = std::move(slicedBefore);
      stop(op, Twine(kind) + " split not made: " +
                   (stopped ? "its output would be gathered again at "
                            : "its input would be a slice of the whole "
                              "result of ") +
                   describe(at) + " (" + why + "); the weight is replicated");
    }
  }

  /// The rhs factor of a product's rule that is its contracted dimension
  /// (a reduction factor) or its output features (not in the lhs).
  static int64_t rhsFactor(const ShardingRule &rule, bool contracted) {
    auto inLhs = [&](int64_t f) {
      return llvm::any_of(rule.operandFactors[0], [&](const auto &d) {
        return llvm::is_contained(d, f);
      });
    };
    for (const ShardingRule::DimFactors &dim : rule.operandFactors[1])
      for (int64_t f : dim) {
        bool isContracted = rule.factorKinds[f] == FactorKind::Reduction;
        if (contracted ? isContracted : !inLhs(f))
          return f;
      }
    return 0;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MeshAttr mesh = module->getAttrOfType<MeshAttr>(kMeshAttr);
    std::optional<int64_t> meshTensor =
        mesh ? mesh.getAxisSize(kTensorAxis) : std::nullopt;
    if (mesh && !meshTensor) {
      module.emitError() << "cleave-propagate-shardings: the mesh " << mesh
                         << " has no \"tensor\" axis to split over";
      return signalPassFailure();
    }
    if (tensor < 0) {
      module.emitError() << "cleave-propagate-shardings: tensor must be at "
                            "least 1 (0: the mesh's), got "
                         << int64_t(tensor);
      return signalPassFailure();
    }
    axisSize = tensor ? tensor : meshTensor.value_or(1);
    if (meshTensor && *meshTensor != axisSize) {
      module.emitError() << "cleave-propagate-shardings: tensor="
                         << int64_t(tensor) << " but the mesh " << mesh << " has \"tensor\"="
                         << *meshTensor
                         << "; leave the option out to use the mesh's";
      return signalPassFailure();
    }
    if (axisSize == 1)
      return;
    if (heads && failed(checkHeads(module)))
      return signalPassFailure();
    if (!mesh)
      module->setAttr(kMeshAttr,
                      MeshAttr::get(module.getContext(),
                                    {StringAttr::get(module.getContext(),
                                                     kTensorAxis)},
                                    {axisSize}));

    SmallVector<Operation *> ops;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      for (BlockArgument arg : func.getArguments())
        addValue(arg);
      func.walk([&](Operation *op) {
        if (op == func.getOperation())
          return;
        for (Value r : op->getResults())
          addValue(r);
        ops.push_back(op);
      });
    }
    // Shardings already on parameters are decisions: they seed first.
    for (auto param : module.getOps<ParameterOp>()) {
      auto sharding = param->getAttrOfType<ShardingAttr>(kShardingAttr);
      auto it = nodeOfParam.find(param.getSymName());
      if (!sharding || it == nodeOfParam.end())
        continue;
      ValueSplit split;
      for (unsigned d = 0; d < sharding.getDims().size(); ++d) {
        DimSplit dim;
        for (const AxisRef &ref : sharding.getDimAxisRefs(d))
          if (ref.name == kTensorAxis)
            dim.part = ref.isWhole() ? Part{1, axisSize}
                                     : Part{ref.preSize, ref.size};
        if (dim.isSplit())
          dim.blocks = sharding.getDimBlocks(d);
        split.dims.push_back(dim);
      }
      decide(it->second, split);
    }
    propagate(ops);

    // (1) Row-parallel: products returning to the residual stream.
    seedMatmuls(
        ops, writesResidual,
        [](const ShardingRule &r) { return rhsFactor(r, true); },
        "row-parallel", Trial::Slices);
    propagate(ops);
    // (2) Attention by heads, where (1) did not reach it.
    for (Operation *op : ops) {
      auto attention = dyn_cast<AttentionOp>(op);
      if (!attention)
        continue;
      auto type = attention.getType().cast<RankedTensorType>();
      int64_t heads = type.getDimSize(1);
      if (heads % axisSize != 0) {
        std::optional<unsigned> n = nodeOf(attention.getResult());
        if (n && !nodes[*n].split)
          stop(op, "split by heads refused: " + Twine(heads) +
                       " heads are not divisible by tensor=" +
                       Twine(axisSize));
        continue;
      }
      ValueSplit split;
      split.dims.resize(type.getRank());
      split.dims[1].part = Part{1, axisSize};
      seed(attention.getResult(), split);
    }
    propagate(ops);
    // (3) Column-parallel: products of a norm's output with a weight,
    // but for key/value projections with fewer heads than ranks that (2)
    // left undecided: one key/value head (multi-query attention) is held
    // whole by every rank, not split inside the head.
    llvm::DenseSet<Value> fewHeads = fewKeyValueHeadWeights(ops);
    for (Operation *op : ops)
      if (auto mm = dyn_cast<MatmulOp>(op);
          mm && fewHeads.contains(mm.getRhs()) && readsNorm(mm))
        if (std::optional<unsigned> n = nodeOf(mm.getRhs());
            n && !nodes[*n].split)
          stop(op, "column-parallel split not made: it projects key/value "
                   "heads fewer than tensor=" +
                       Twine(axisSize) +
                       " (grouped-query attention); each rank holds them "
                       "whole");
    if (vocab)
      seedMatmuls(
        ops,
        [&](MatmulOp mm) {
          return readsNorm(mm) && !fewHeads.contains(mm.getRhs());
        },
        [](const ShardingRule &r) { return rhsFactor(r, false); },
        "column-parallel", Trial::Stops);
    propagate(ops);
    // (4) Vocab-parallel embeddings.
    for (Operation *op : vocab ? ArrayRef<Operation *>(ops)
                               : ArrayRef<Operation *>()) {
      auto embedding = dyn_cast<EmbeddingOp>(op);
      if (!embedding || !isParameter(embedding.getTable()))
        continue;
      std::optional<unsigned> n = nodeOf(embedding.getTable());
      if (!n || nodes[*n].split)
        continue;
      // The tokens' table: ids that are the model's input. A lookup of
      // computed ids (OPT's learned positions, from a CumSum of the
      // attention mask) is not split: its partial result would cost an
      // all-reduce of its own, where a replicated table costs none.
      if (!isModelInput(embedding.getIds())) {
        stop(op, "vocab-parallel split not made: its ids are computed "
                 "(positions), not the model's input; the table is "
                 "replicated");
        continue;
      }
      auto table = embedding.getTable().getType().cast<RankedTensorType>();
      if (table.getDimSize(0) % axisSize != 0) {
        stop(op, "vocab-parallel split refused: a vocabulary of " +
                     Twine(table.getDimSize(0)) +
                     " is not divisible by tensor=" + Twine(axisSize) +
                     "; the table is replicated");
        continue;
      }
      ValueSplit split;
      split.dims.resize(2);
      split.dims[0].part = Part{1, axisSize};
      seed(embedding.getTable(), split);
    }
    propagate(ops);
    if (failedConflict)
      return signalPassFailure();

    write(module, ops);
  }

  /// heads=true: attention heads the degree cannot split are an error
  /// naming the spec key (cleave-compile), instead of a stop or a
  /// conflict: query heads divisible by the degree, key/value heads
  /// divisible by it or dividing it (grouped-query attention).
  /// The weights of the key/value projections of attentions with fewer
  /// key/value heads than tensor ranks: found from the attention's k and
  /// v back through reshapes, transposes, casts, rotary and the repeat to
  /// the product with a parameter.
  llvm::DenseSet<Value> fewKeyValueHeadWeights(ArrayRef<Operation *> ops) {
    llvm::DenseSet<Value> out;
    for (Operation *op : ops) {
      auto attention = dyn_cast<AttentionOp>(op);
      if (!attention)
        continue;
      int64_t kv = unrepeatedHeads(
          attention,
          attention.getK().getType().cast<RankedTensorType>().getDimSize(1));
      if (kv >= axisSize)
        continue;
      // Back along every path to the first product on it: rotary
      // embeddings as the exporter wrote them (Hugging Face's
      // q * cos + rotate_half(q) * sin: muls, an add, slices, a neg, a
      // concat) have the key/value on more than one operand. Bounded: a
      // projection is a few dozen ops away.
      llvm::DenseSet<Value> seen;
      SmallVector<Value> work = {attention.getK(), attention.getV()};
      while (!work.empty() && seen.size() < 512) {
        Value v = work.pop_back_val();
        if (!seen.insert(v).second)
          continue;
        Operation *def = v.getDefiningOp();
        if (!def || isa<GetParamOp, ConstantOp>(def))
          continue;
        if (auto mm = dyn_cast<MatmulOp>(def)) {
          if (isParameter(mm.getRhs()))
            out.insert(mm.getRhs());
          continue;
        }
        llvm::append_range(work, def->getOperands());
      }
    }
    return out;
  }

  /// The key/value heads of `op` before grouped-query attention's repeat:
  /// an export that repeats them itself (Llama's repeat_kv: a broadcast_to
  /// along a new dimension, reshaped into the heads) gives the attention
  /// `kv` repeated heads; the repeat's stretched dimensions divide them.
  static int64_t unrepeatedHeads(AttentionOp op, int64_t kv) {
    Value v = op.getK();
    while (Operation *def = v.getDefiningOp()) {
      if (auto repeat = dyn_cast<BroadcastToOp>(def)) {
        auto in = repeat.getX().getType().cast<RankedTensorType>();
        auto out = repeat.getType().cast<RankedTensorType>();
        int64_t lead = out.getRank() - in.getRank(), copies = 1;
        for (int64_t d = 0; d < out.getRank(); ++d)
          if ((d < lead || in.getDimSize(d - lead) == 1) &&
              out.getDimSize(d) > 1)
            copies *= out.getDimSize(d);
        return kv % copies == 0 ? kv / copies : kv;
      }
      if (!isa<ReshapeOp, TransposeOp, CastOp>(def))
        break;
      v = def->getOperand(0);
    }
    return kv;
  }

  LogicalResult checkHeads(ModuleOp module) {
    WalkResult walk = module.walk([&](AttentionOp op) {
      int64_t q = op.getQ().getType().cast<RankedTensorType>().getDimSize(1);
      int64_t kv = unrepeatedHeads(
          op, op.getK().getType().cast<RankedTensorType>().getDimSize(1));
      if (q % axisSize == 0 && (kv % axisSize == 0 || axisSize % kv == 0))
        return WalkResult::advance();
      if (q % axisSize == 0) {
        // Grouped-query attention: a rank holds whole key/value heads, or
        // one replicated over the ranks whose query heads read it.
        op.emitError() << describe(op) << " has " << q << " query and " << kv
                       << " key/value heads; spec key "
                          "'tensor_parallel_degree' = "
                       << axisSize
                       << " neither divides the key/value heads nor is "
                          "divided by them, so no rank holds whole key/value "
                          "heads: give a power of two that divides "
                       << kv
                       << (llvm::isPowerOf2_64(kv) ? " or is a multiple of it"
                                                    : "");
        return WalkResult::interrupt();
      }
      op.emitError() << describe(op) << " has " << q << " query and " << kv
                     << " key/value heads, which spec key "
                        "'tensor_parallel_degree' = "
                     << axisSize
                     << " cannot split by heads: give a power of two that "
                        "divides the query heads";
      return WalkResult::interrupt();
    });
    return failure(walk.wasInterrupted());
  }

  ShardingAttr toAttr(const ValueSplit &split) {
    MLIRContext *ctx = &getContext();
    SmallVector<ArrayAttr> dims;
    SmallVector<int64_t> blocks;
    bool anyBlocked = false;
    for (const DimSplit &d : split.dims) {
      SmallVector<Attribute> axes;
      if (d.isSplit()) {
        AxisRef ref{kTensorAxis};
        if (!(d.part.pre == 1 && d.part.size == axisSize)) {
          ref.preSize = d.part.pre;
          ref.size = d.part.size;
        }
        axes.push_back(ShardingAttr::getAxisRefAttr(ctx, ref));
      }
      dims.push_back(ArrayAttr::get(ctx, axes));
      blocks.push_back(d.isSplit() ? d.blocks : 1);
      anyBlocked |= d.isSplit() && d.blocks > 1;
    }
    SmallVector<StringAttr> partial;
    if (split.partial)
      partial.push_back(StringAttr::get(ctx, kTensorAxis));
    if (!anyBlocked)
      blocks.clear();
    return ShardingAttr::get(ctx, dims, partial, blocks);
  }

  void write(ModuleOp module, ArrayRef<Operation *> ops) {
    for (auto param : module.getOps<ParameterOp>()) {
      auto it = nodeOfParam.find(param.getSymName());
      if (it == nodeOfParam.end())
        continue;
      const std::optional<ValueSplit> &split = nodes[it->second].split;
      if (split && !split->isReplicated())
        param->setAttr(kShardingAttr, toAttr(*split));
    }
    for (auto func : module.getOps<func::FuncOp>())
      for (BlockArgument arg : func.getArguments()) {
        std::optional<unsigned> n = nodeOf(arg);
        if (n && nodes[*n].split && !nodes[*n].split->isReplicated())
          func.setArgAttr(arg.getArgNumber(), kShardingAttr,
                          toAttr(*nodes[*n].split));
      }
    for (Operation *op : ops) {
      if (op->getNumResults() == 1 && !isa<GetParamOp>(op)) {
        std::optional<unsigned> n = nodeOf(op->getResult(0));
        if (n && nodes[*n].split && !nodes[*n].split->isReplicated())
          op->setAttr(kShardingAttr, toAttr(*nodes[*n].split));
      }
      auto it = stops.find(op);
      if (it == stops.end())
        continue;
      op->setAttr(kShardingStopAttr,
                  StringAttr::get(&getContext(), it->second));
      op->emitRemark() << "tensor-parallel split stops at " << describe(op)
                       << ": " << it->second;
    }
  }
};

} // namespace
