//===- Fuse.cpp - raise exported op chains to the dialect's fused ops -----===//
//
// torch.onnx.export spells LayerNorm (before opset 17), RMSNorm, SiLU and
// GELU as chains of elementwise ops, each a pass over memory, rotary
// embeddings as slices, a negation, a concat and two products, and
// attention as two products around a softmax that materializes every
// score. This pass finds those chains and replaces each with the one op
// that a backend runs as a single fused kernel (and that later passes
// split and differentiate as a unit: a norm's input must stay whole under
// tensor parallelism, which keeps the residual stream replicated). Only exact shapes
// of the chains are matched; constants must have the expected values.
//
//===----------------------------------------------------------------------===//

#include "ir/CleaveOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Rewrite/FrozenRewritePatternSet.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/DenseSet.h"

#include <cmath>
#include <mutex>

namespace mlir::cleave {
#define GEN_PASS_DEF_FUSE
#include "passes/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// The value of a scalar float constant (any splat), if `v` is one.
std::optional<double> scalarConstant(Value v) {
  auto constant = v.getDefiningOp<ConstantOp>();
  if (!constant)
    return std::nullopt;
  auto dense = constant.getValue().dyn_cast<DenseElementsAttr>();
  if (!dense || !dense.isSplat() ||
      !dense.getElementType().isa<FloatType>())
    return std::nullopt;
  return dense.getSplatValue<APFloat>().convertToDouble();
}

bool isConstant(Value v, double expected, double relTol = 1e-6) {
  std::optional<double> got = scalarConstant(v);
  return got && std::fabs(*got - expected) <= relTol * std::fabs(expected) +
                                                   1e-12;
}

/// Calls `f(a, b)` and `f(b, a)` for a commutative op's operands until one
/// returns true.
template <typename F> bool eitherOrder(Operation *op, F f) {
  if (!op || op->getNumOperands() != 2)
    return false;
  return f(op->getOperand(0), op->getOperand(1)) ||
         f(op->getOperand(1), op->getOperand(0));
}

template <typename OpTy> OpTy def(Value v) {
  return v ? v.getDefiningOp<OpTy>() : OpTy();
}

Type typeOf(Value v) { return v.getType(); }

/// x * sigmoid(x) -> silu(x).
LogicalResult fuseSilu(MulOp mul, PatternRewriter &rewriter) {
  Value x;
  if (!eitherOrder(mul, [&](Value a, Value b) {
        auto sigmoid = def<SigmoidOp>(b);
        if (!sigmoid || sigmoid.getX() != a)
          return false;
        x = a;
        return true;
      }))
    return failure();
  if (typeOf(x) != mul.getType())
    return failure();
  rewriter.replaceOpWithNewOp<SiluOp>(mul, mul.getType(), x);
  return success();
}

/// 0.5 * (x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))) and
/// x * 0.5 * (1 + erf(x / sqrt(2))), in the operand orders torch writes,
/// -> gelu(x).
LogicalResult fuseGelu(MulOp mul, PatternRewriter &rewriter) {
  Value x;
  StringRef approximate;
  // x * (1 + t), where t is tanh(...) or erf(...) of x; `half` tells whether
  // the 0.5 was already consumed.
  auto matchInner = [&](Value a, Value b) {
    auto addOne = def<AddOp>(b);
    Value t;
    if (!addOne || !eitherOrder(addOne, [&](Value c, Value u) {
          if (!isConstant(c, 1.0))
            return false;
          t = u;
          return true;
        }))
      return false;
    if (auto tanh = def<TanhOp>(t)) {
      // sqrt(2/pi) * (a + 0.044715 * a^3), a^3 as a * (a * a) or pow(a, 3).
      auto scaled = def<MulOp>(tanh.getX());
      Value inner;
      if (!scaled || !eitherOrder(scaled, [&](Value c, Value u) {
            if (!isConstant(c, std::sqrt(2.0 / M_PI), 1e-5))
              return false;
            inner = u;
            return true;
          }))
        return false;
      auto sum = def<AddOp>(inner);
      Value cubeTerm;
      if (!sum || !eitherOrder(sum, [&](Value p, Value q) {
            if (p != a)
              return false;
            cubeTerm = q;
            return true;
          }))
        return false;
      auto coef = def<MulOp>(cubeTerm);
      Value cube;
      if (!coef || !eitherOrder(coef, [&](Value c, Value u) {
            if (!isConstant(c, 0.044715, 1e-5))
              return false;
            cube = u;
            return true;
          }))
        return false;
      bool isCube = false;
      if (auto pow = def<PowOp>(cube))
        isCube = pow.getLhs() == a && isConstant(pow.getRhs(), 3.0);
      if (auto m = def<MulOp>(cube))
        isCube = isCube || eitherOrder(m, [&](Value p, Value q) {
                   auto sq = def<MulOp>(q);
                   return p == a && sq && sq.getLhs() == a &&
                          sq.getRhs() == a;
                 });
      if (!isCube)
        return false;
      approximate = "tanh";
      x = a;
      return true;
    }
    if (auto erf = def<ErfOp>(t)) {
      // a / sqrt(2) or a * (1 / sqrt(2)).
      Value arg = erf.getX();
      bool ok = false;
      if (auto div = def<DivOp>(arg))
        ok = div.getLhs() == a && isConstant(div.getRhs(), std::sqrt(2.0), 1e-5);
      if (auto m = def<MulOp>(arg))
        ok = ok || eitherOrder(m, [&](Value p, Value c) {
               return p == a && isConstant(c, 1.0 / std::sqrt(2.0), 1e-5);
             });
      if (!ok)
        return false;
      approximate = "none";
      x = a;
      return true;
    }
    return false;
  };
  // Either 0.5 * (x * (1 + t)) or (x * 0.5) * (1 + t) or x * (0.5 * (1 + t)).
  bool matched = eitherOrder(mul, [&](Value c, Value rest) {
    if (!isConstant(c, 0.5))
      return false;
    auto inner = def<MulOp>(rest);
    return inner && eitherOrder(inner, matchInner);
  });
  matched = matched || eitherOrder(mul, [&](Value halfX, Value onePlusT) {
              auto h = def<MulOp>(halfX);
              Value a;
              if (!h || !eitherOrder(h, [&](Value p, Value c) {
                    if (!isConstant(c, 0.5))
                      return false;
                    a = p;
                    return true;
                  }))
                return false;
              return matchInner(a, onePlusT);
            });
  if (!matched || typeOf(x) != mul.getType())
    return failure();
  rewriter.replaceOpWithNewOp<GeluOp>(mul, mul.getType(), x, approximate);
  return success();
}

/// The `x` and epsilon of r = 1 / sqrt(mean(x^2, last axis, keepdims) +
/// eps), spelled with div, reciprocal or rsqrt, if `r` is one.
std::optional<std::pair<Value, double>> rmsReciprocal(Value r) {
  Value sqrtArg;
  if (auto rs = def<RsqrtOp>(r)) {
    sqrtArg = rs.getX();
  } else {
    Value denominator;
    if (auto div = def<DivOp>(r)) {
      if (!isConstant(div.getLhs(), 1.0))
        return std::nullopt;
      denominator = div.getRhs();
    } else if (auto rec = def<ReciprocalOp>(r)) {
      denominator = rec.getX();
    } else {
      return std::nullopt;
    }
    auto sqrt = def<SqrtOp>(denominator);
    if (!sqrt)
      return std::nullopt;
    sqrtArg = sqrt.getX();
  }
  auto add = def<AddOp>(sqrtArg);
  ReduceMeanOp mean;
  double epsilon = 0;
  if (!add || !eitherOrder(add, [&](Value p, Value c) {
        std::optional<double> e = scalarConstant(c);
        if (!e || !def<ReduceMeanOp>(p))
          return false;
        epsilon = *e;
        mean = def<ReduceMeanOp>(p);
        return true;
      }))
    return std::nullopt;
  Value squared = mean.getX();
  Value x;
  if (auto pow = def<PowOp>(squared)) {
    if (isConstant(pow.getRhs(), 2.0))
      x = pow.getLhs();
  } else if (auto sq = def<MulOp>(squared)) {
    if (sq.getLhs() == sq.getRhs())
      x = sq.getLhs();
  }
  auto xType = x ? x.getType().dyn_cast<RankedTensorType>() : nullptr;
  if (!xType || xType.getRank() == 0 || !mean.getKeepdims() ||
      mean.getAxes().size() != 1 || mean.getAxes()[0] != xType.getRank() - 1)
    return std::nullopt;
  return std::make_pair(x, epsilon);
}

/// Whether `w` is a per-feature vector for the last axis of `x`.
bool isFeatureVector(Value w, Value x) {
  auto wType = w.getType().dyn_cast<RankedTensorType>();
  auto xType = x.getType().cast<RankedTensorType>();
  return wType && wType.getRank() == 1 &&
         wType.getDimSize(0) == xType.getShape().back() &&
         wType.getElementType() == xType.getElementType();
}

/// x * r * w in any grouping ((x * r) * w or (w * x) * r), with r an RMS
/// reciprocal of x and w of shape [last dim of x] -> rms_norm(x, w).
LogicalResult fuseRmsNorm(MulOp mul, PatternRewriter &rewriter) {
  Value x, scale;
  double epsilon = 0;
  bool matched = eitherOrder(mul, [&](Value product, Value other) {
    auto m = def<MulOp>(product);
    if (!m)
      return false;
    // (x * r) * w
    if (eitherOrder(m, [&](Value a, Value r) {
          auto rms = rmsReciprocal(r);
          if (!rms || rms->first != a || !isFeatureVector(other, a))
            return false;
          x = a;
          epsilon = rms->second;
          scale = other;
          return true;
        }))
      return true;
    // (w * x) * r
    auto rms = rmsReciprocal(other);
    if (!rms)
      return false;
    return eitherOrder(m, [&](Value w, Value a) {
      if (a != rms->first || !isFeatureVector(w, a))
        return false;
      x = a;
      epsilon = rms->second;
      scale = w;
      return true;
    });
  });
  if (!matched || typeOf(x) != mul.getType())
    return failure();
  auto xType = x.getType().cast<RankedTensorType>();
  rewriter.replaceOpWithNewOp<RmsNormOp>(
      mul, mul.getType(), x, scale,
      rewriter.getI64IntegerAttr(xType.getRank() - 1),
      rewriter.getF32FloatAttr(epsilon));
  return success();
}

/// Whether `mean` is a mean over the last axis of its input, kept.
bool isLastAxisMean(ReduceMeanOp mean) {
  auto xType = mean.getX().getType().dyn_cast<RankedTensorType>();
  return xType && xType.getRank() > 0 && mean.getKeepdims() &&
         mean.getAxes().size() == 1 &&
         mean.getAxes()[0] == xType.getRank() - 1;
}

/// (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) over the last axis
/// (torch.onnx.export's LayerNormalization before opset 17)
/// -> layer_norm(x) without scale or bias; the scale and bias are then
/// folded in by FuseLayerNormAffine.
LogicalResult fuseLayerNorm(DivOp div, PatternRewriter &rewriter) {
  auto centered = def<SubOp>(div.getLhs());
  auto sqrt = def<SqrtOp>(div.getRhs());
  if (!centered || !sqrt)
    return failure();
  auto firstMean = def<ReduceMeanOp>(centered.getRhs());
  Value x = centered.getLhs();
  if (!firstMean || firstMean.getX() != x || !isLastAxisMean(firstMean))
    return failure();
  auto add = def<AddOp>(sqrt.getX());
  ReduceMeanOp variance;
  double epsilon = 0;
  if (!add || !eitherOrder(add, [&](Value p, Value c) {
        std::optional<double> e = scalarConstant(c);
        variance = def<ReduceMeanOp>(p);
        if (!e || !variance)
          return false;
        epsilon = *e;
        return true;
      }))
    return failure();
  if (!isLastAxisMean(variance))
    return failure();
  Value squared = variance.getX();
  bool squaresCentered = false;
  if (auto pow = def<PowOp>(squared))
    squaresCentered =
        pow.getLhs() == centered.getResult() && isConstant(pow.getRhs(), 2.0);
  else if (auto sq = def<MulOp>(squared))
    squaresCentered = sq.getLhs() == centered.getResult() &&
                      sq.getRhs() == centered.getResult();
  if (!squaresCentered || typeOf(x) != div.getType())
    return failure();
  auto xType = x.getType().cast<RankedTensorType>();
  rewriter.replaceOpWithNewOp<LayerNormOp>(
      div, div.getType(), x, Value(), Value(),
      rewriter.getI64IntegerAttr(xType.getRank() - 1),
      rewriter.getF32FloatAttr(epsilon));
  return success();
}

struct FuseLayerNorm : OpRewritePattern<DivOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(DivOp div,
                                PatternRewriter &rewriter) const override {
    return fuseLayerNorm(div, rewriter);
  }
};

/// layer_norm(x) * w -> layer_norm(x) scale w, then + b -> bias b, where
/// the norm has no other use and its axis is the last one.
template <typename OpTy>
struct FuseLayerNormAffine : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    constexpr bool isScale = std::is_same_v<OpTy, MulOp>;
    LayerNormOp norm;
    Value vector;
    if (!eitherOrder(op, [&](Value n, Value w) {
          norm = def<LayerNormOp>(n);
          if (!norm || !norm->hasOneUse() || n.getType() != op.getType() ||
              !isFeatureVector(w, n) || norm.getBias() ||
              (isScale && norm.getScale()))
            return false;
          vector = w;
          return true;
        }))
      return failure();
    auto xType = norm.getX().getType().cast<RankedTensorType>();
    if (norm.getAxis() != xType.getRank() - 1)
      return failure();
    // The scale, when added after, is applied before the bias: a bias
    // found first leaves the scale alone.
    Value scale = isScale ? vector : norm.getScale();
    Value bias = isScale ? Value() : vector;
    rewriter.replaceOpWithNewOp<LayerNormOp>(
        op, op.getType(), norm.getX(), scale, bias, norm.getAxisAttr(),
        norm.getEpsilonAttr());
    return success();
  }
};

struct FuseMul : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp mul,
                                PatternRewriter &rewriter) const override {
    if (succeeded(fuseRmsNorm(mul, rewriter)) ||
        succeeded(fuseGelu(mul, rewriter)) ||
        succeeded(fuseSilu(mul, rewriter)))
      return success();
    return failure();
  }
};


/// Whether constant `v` is a causal mask over its last two dimensions
/// (every leading dimension 1): bool true above the diagonal (masked), or
/// float 0 on and below it and -inf above it.
bool isCausalMask(Value v, bool additive) {
  auto constant = def<ConstantOp>(v);
  if (!constant)
    return false;
  auto dense = constant.getValue().dyn_cast<DenseElementsAttr>();
  auto type = dense ? dense.getType().cast<RankedTensorType>() : nullptr;
  if (!type || type.getRank() < 2)
    return false;
  for (int64_t d : type.getShape().drop_back(2))
    if (d != 1)
      return false;
  int64_t rows = type.getShape()[type.getRank() - 2];
  int64_t cols = type.getShape().back();
  if (rows != cols)
    return false;
  if (!additive) {
    if (!type.getElementType().isInteger(1))
      return false;
    auto values = dense.getValues<bool>();
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        if (values[i * cols + j] != (j > i))
          return false;
    return true;
  }
  if (!type.getElementType().isa<FloatType>())
    return false;
  auto values = dense.getValues<APFloat>();
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      APFloat x = values[i * cols + j];
      if (j > i ? !(x.isInfinity() && x.isNegative()) : !x.isZero())
        return false;
    }
  return true;
}

bool hasOneUse(Value v) { return v && v.hasOneUse(); }

/// Whether `v` is computed from a trained parameter (a `cleave.get_param`
/// of one not marked `cleave.frozen`).
bool dependsOnTrainedParameter(Value v) {
  SmallVector<Value> work{v};
  llvm::DenseSet<Value> seen;
  while (!work.empty()) {
    Value x = work.pop_back_val();
    Operation *op = x.getDefiningOp();
    if (!op || !seen.insert(x).second)
      continue;
    if (auto get = dyn_cast<GetParamOp>(op)) {
      auto param = SymbolTable::lookupNearestSymbolFrom<ParameterOp>(
          get, get.getNameAttr());
      if (!param || !param->hasAttr("cleave.frozen"))
        return true;
      continue;
    }
    llvm::append_range(work, op->getOperands());
  }
  return false;
}

/// softmax(q k^T * scale [masked]) v, as exports write it -> attention:
///   %s = matmul(q', transpose(k, [0, 1, 3, 2]))   q' = q or q * c
///   %s' = %s * c | %s / c | %s
///   %m = select(bool, -inf, %s') | %s' + mask | %s'
///   %p = softmax(%m, axis 3)
///   %o = matmul(%p, v)
/// A constant causal mask becomes the `causal` attribute.
struct FuseAttention : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  /// isCausalMask, once per constant: every block of a traced model reads
  /// the same (uniqued) mask attribute, of seq^2 elements. Patterns of
  /// stage modules may run on several threads.
  bool isCausal(Value v, bool additive) const {
    auto constant = def<ConstantOp>(v);
    if (!constant)
      return false;
    std::pair<Attribute, unsigned> key{constant.getValue(), additive};
    {
      std::lock_guard<std::mutex> lock(causalMutex);
      if (auto it = causalCache.find(key); it != causalCache.end())
        return it->second;
    }
    bool causal = isCausalMask(v, additive);
    std::lock_guard<std::mutex> lock(causalMutex);
    causalCache[key] = causal;
    return causal;
  }
  mutable std::mutex causalMutex;
  mutable llvm::DenseMap<std::pair<Attribute, unsigned>, bool> causalCache;

  LogicalResult matchAndRewrite(MatmulOp root,
                                PatternRewriter &rewriter) const override {
    auto type = root.getType().dyn_cast<RankedTensorType>();
    auto softmax = def<SoftmaxOp>(root.getLhs());
    if (!type || type.getRank() != 4 || !softmax || softmax.getAxis() != 3 ||
        !hasOneUse(softmax.getResult()))
      return failure();
    Value v = root.getRhs();

    // The mask.
    Value scores = softmax.getX(), mask, boolMask;
    bool causal = false;
    if (auto select = def<SelectOp>(scores)) {
      std::optional<double> fill = scalarConstant(select.getOperand(1));
      if (!fill || !(std::isinf(*fill) && *fill < 0) ||
          !hasOneUse(select.getResult()))
        return failure();
      causal = isCausal(select.getOperand(0), /*additive=*/false);
      if (!causal)
        boolMask = select.getOperand(0);
      scores = select.getOperand(2);
    } else if (auto add = def<AddOp>(scores)) {
      if (!hasOneUse(add.getResult()))
        return failure();
      // The scores are the side that comes from the q k^T product.
      Value lhs = add.getLhs(), rhs = add.getRhs();
      auto fromProduct = [](Value x) {
        return def<MatmulOp>(x) || def<MulOp>(x) || def<DivOp>(x);
      };
      if (!fromProduct(lhs) && fromProduct(rhs))
        std::swap(lhs, rhs);
      if (!fromProduct(lhs))
        return failure();
      causal = isCausal(rhs, /*additive=*/true);
      if (!causal)
        mask = rhs;
      // cleave.attention has no gradient for its mask: one computed from a
      // trained parameter (a learned bias, or a mask buffer the export
      // made an initializer and the spec did not freeze) stays add +
      // softmax, whose gradients reach it.
      if (mask && dependsOnTrainedParameter(mask))
        return failure();
      scores = lhs;
    }

    // The scale.
    double scale = 1.0;
    if (auto mul = def<MulOp>(scores)) {
      Value product;
      if (!hasOneUse(mul.getResult()) ||
          !eitherOrder(mul, [&](Value p, Value c) {
            std::optional<double> x = scalarConstant(c);
            if (!x || !def<MatmulOp>(p))
              return false;
            scale = *x;
            product = p;
            return true;
          }))
        return failure();
      scores = product;
    } else if (auto div = def<DivOp>(scores)) {
      std::optional<double> x = scalarConstant(div.getRhs());
      if (!x || *x == 0 || !hasOneUse(div.getResult()))
        return failure();
      scale = 1.0 / *x;
      scores = div.getLhs();
    }
    auto qk = def<MatmulOp>(scores);
    if (!qk || !hasOneUse(qk.getResult()))
      return failure();
    // k^T is a transpose whose last two axes, swapped back, give k: GPT-2
    // goes from [B, T, H, D] to [B, H, D, T] in one transpose.
    auto kT = def<TransposeOp>(qk.getRhs());
    if (!kT || kT.getPerm().size() != 4 || !hasOneUse(kT.getResult()))
      return failure();
    ArrayRef<int64_t> perm = kT.getPerm();
    SmallVector<int64_t> kPerm{perm[0], perm[1], perm[3], perm[2]};
    Value q = qk.getLhs(), kSource = kT.getX();
    bool transposeK = kPerm != ArrayRef<int64_t>{0, 1, 2, 3};
    auto sourceType = kSource.getType().cast<RankedTensorType>();
    SmallVector<int64_t> kShape;
    for (int64_t axis : kPerm)
      kShape.push_back(sourceType.getDimSize(axis));
    auto kType = RankedTensorType::get(kShape, sourceType.getElementType());
    // A scale applied to q before the product.
    if (auto mul = def<MulOp>(q)) {
      eitherOrder(mul, [&](Value p, Value c) {
        std::optional<double> x = scalarConstant(c);
        if (!x || !hasOneUse(mul.getResult()) ||
            p.getType() != mul.getType())
          return false;
        scale *= *x;
        q = p;
        return true;
      });
    }
    auto qType = q.getType().dyn_cast<RankedTensorType>();
    if (!qType || qType.getRank() != 4 || kType != v.getType() ||
        qType != type || kType.getDimSize(0) != qType.getDimSize(0) ||
        kType.getDimSize(1) != qType.getDimSize(1) ||
        kType.getDimSize(3) != qType.getDimSize(3))
      return failure();
    if (causal && qType.getDimSize(2) != kType.getDimSize(2))
      return failure();
    if (mask && mask.getType().cast<RankedTensorType>().getElementType() !=
                    qType.getElementType())
      return failure();
    Value k = kSource;
    if (transposeK)
      k = rewriter.create<TransposeOp>(kT.getLoc(), kType, kSource,
                                       rewriter.getDenseI64ArrayAttr(kPerm));
    if (boolMask)
      mask = rewriter.create<NotOp>(root.getLoc(), boolMask.getType(),
                                    boolMask);
    rewriter.replaceOpWithNewOp<AttentionOp>(
        root, type, q, k, v, mask, rewriter.getF32FloatAttr(scale),
        causal ? rewriter.getUnitAttr() : UnitAttr());
    return success();
  }
};

/// Whether `v` is slice(x) of the half [from, from + D/2) of x's last axis,
/// everything else whole, with step 1.
bool isHalfSlice(Value v, Value x, bool upper) {
  auto slice = def<SliceOp>(v);
  if (!slice || slice.getX() != x)
    return false;
  auto type = x.getType().cast<RankedTensorType>();
  int64_t rank = type.getRank(), d = type.getShape().back();
  ArrayRef<int64_t> start = slice.getStart(), limit = slice.getLimit(),
                    step = slice.getStep();
  for (int64_t i = 0; i < rank; ++i) {
    int64_t wantStart = i + 1 < rank ? 0 : (upper ? d / 2 : 0);
    int64_t wantLimit = i + 1 < rank ? type.getDimSize(i) : (upper ? d : d / 2);
    if (start[i] != wantStart || limit[i] != wantLimit || step[i] != 1)
      return false;
  }
  return true;
}

/// x * cos + concat(-x[..., D/2:], x[..., :D/2]) * sin -> rotary(x, cos, sin)
/// with cos and sin of shape [T, D] (x: [..., T, D]).
struct FuseRotary : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp add,
                                PatternRewriter &rewriter) const override {
    auto type = add.getType().dyn_cast<RankedTensorType>();
    if (!type || type.getRank() < 2 || type.getShape().back() % 2 != 0)
      return failure();
    Value x, cos, sin;
    bool matched = eitherOrder(add, [&](Value direct, Value rotated) {
      auto mulDirect = def<MulOp>(direct), mulRotated = def<MulOp>(rotated);
      if (!mulDirect || !mulRotated)
        return false;
      // rotate_half(x) * sin, either operand order.
      Value halfRotated;
      if (!eitherOrder(mulRotated, [&](Value r, Value t) {
            auto concat = def<ConcatOp>(r);
            if (!concat || concat.getInputs().size() != 2 ||
                concat.getAxis() != (uint64_t)type.getRank() - 1)
              return false;
            auto neg = def<NegOp>(concat.getInputs()[0]);
            if (!neg)
              return false;
            Value upper = neg.getX(), lower = concat.getInputs()[1];
            auto upperSlice = def<SliceOp>(upper);
            if (!upperSlice)
              return false;
            Value source = upperSlice.getX();
            if (!isHalfSlice(upper, source, true) ||
                !isHalfSlice(lower, source, false))
              return false;
            halfRotated = source;
            sin = t;
            return true;
          }))
        return false;
      // x * cos with the same x.
      return eitherOrder(mulDirect, [&](Value a, Value c) {
        if (a != halfRotated)
          return false;
        x = a;
        cos = c;
        return true;
      });
    });
    if (!matched || x.getType() != type)
      return failure();
    auto table = RankedTensorType::get(type.getShape().take_back(2),
                                       type.getElementType());
    if (cos.getType() != table || sin.getType() != table)
      return failure();
    rewriter.replaceOpWithNewOp<RotaryOp>(add, type, x, cos, sin);
    return success();
  }
};

/// matmul(x, transpose(w)) with a [N, K] matrix `w` (a linear layer's
/// weight as PyTorch stores it) reads `w` transposed in the product
/// (`transpose_rhs`), so no step copies the weight and the backward pass
/// gets the weight's gradient in its stored layout. Likewise for the left
/// operand.
struct FoldWeightTranspose : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  static TransposeOp matrixTranspose(Value v) {
    auto t = def<TransposeOp>(v);
    if (!t || t.getPerm().size() != 2 || t.getPerm()[0] != 1)
      return {};
    return t;
  }

  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    TransposeOp lhs = matrixTranspose(op.getLhs());
    TransposeOp rhs = matrixTranspose(op.getRhs());
    if (!lhs && !rhs)
      return failure();
    rewriter.updateRootInPlace(op, [&] {
      if (lhs) {
        op.getLhsMutable().assign(lhs.getX());
        op.setTransposeLhs(!op.getTransposeLhs());
      }
      if (rhs) {
        op.getRhsMutable().assign(rhs.getX());
        op.setTransposeRhs(!op.getTransposeRhs());
      }
    });
    return success();
  }
};

struct Fuse : mlir::cleave::impl::FuseBase<Fuse> {
  using FuseBase::FuseBase;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseMul, FuseAttention, FuseRotary, FuseLayerNorm,
                 FuseLayerNormAffine<MulOp>, FuseLayerNormAffine<AddOp>,
                 FoldWeightTranspose>(&getContext());
    FrozenRewritePatternSet frozen(std::move(patterns));
    // The greedy driver also erases the chains' ops once unused (they are
    // Pure) and folds what it can.
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (failed(applyPatternsAndFoldGreedily(func, frozen)))
        return signalPassFailure();
  }
};

} // namespace
