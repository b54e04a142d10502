//===- Fuse.cpp - raise exported op chains to the dialect's fused ops -----===//
//
// torch.onnx.export spells RMSNorm, SiLU and GELU as chains of elementwise
// ops, each a pass over memory. This pass finds those chains and replaces
// each with the one op that a backend runs as a single fused kernel (and
// that later passes split and differentiate as a unit). Only exact shapes
// of the chains are matched; constants must have the expected values.
//
//===----------------------------------------------------------------------===//

#include "ir/CleaveOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Rewrite/FrozenRewritePatternSet.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

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

/// x * r * w in any grouping ((x * r) * w or (w * x) * r), with r an RMS
/// reciprocal of x and w of shape [last dim of x] -> rms_norm(x, w).
LogicalResult fuseRmsNorm(MulOp mul, PatternRewriter &rewriter) {
  Value x, scale;
  double epsilon = 0;
  auto isScaleFor = [](Value w, Value x) {
    auto wType = w.getType().dyn_cast<RankedTensorType>();
    auto xType = x.getType().cast<RankedTensorType>();
    return wType && wType.getRank() == 1 &&
           wType.getDimSize(0) == xType.getShape().back() &&
           wType.getElementType() == xType.getElementType();
  };
  bool matched = eitherOrder(mul, [&](Value product, Value other) {
    auto m = def<MulOp>(product);
    if (!m)
      return false;
    // (x * r) * w
    if (eitherOrder(m, [&](Value a, Value r) {
          auto rms = rmsReciprocal(r);
          if (!rms || rms->first != a || !isScaleFor(other, a))
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
      if (a != rms->first || !isScaleFor(w, a))
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

struct Fuse : mlir::cleave::impl::FuseBase<Fuse> {
  using FuseBase::FuseBase;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseMul>(&getContext());
    FrozenRewritePatternSet frozen(std::move(patterns));
    // The greedy driver also erases the chains' ops once unused (they are
    // Pure) and folds what it can.
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (failed(applyPatternsAndFoldGreedily(func, frozen)))
        return signalPassFailure();
  }
};

} // namespace
