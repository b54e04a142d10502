//===- GradientRules.cpp - one reverse-mode rule per dialect op -----------===//
//
// The rule of each op (see GradientRules.h). The notation in the comments:
// `g` is the gradient of the op's result `y`; `ga`, `gx`, ... those of its
// operands. Rules follow what PyTorch's autograd computes for the same op,
// so that a trained model matches PyTorch's numbers (e.g. max/min split the
// gradient between ties, relu's gradient at 0 is 0).
//
//===----------------------------------------------------------------------===//

#include "passes/GradientRules.h"

#include "ir/CleaveOps.h"
#include "ir/DistributionOps.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <numeric>

using namespace mlir;
using namespace mlir::cleave;

bool mlir::cleave::isDifferentiable(Type type) {
  auto tensor = type.dyn_cast<RankedTensorType>();
  return tensor && tensor.getElementType().isa<FloatType>();
}

static RankedTensorType typeOf(Value v) {
  return v.getType().cast<RankedTensorType>();
}

Value mlir::cleave::unbroadcast(OpBuilder &b, Location loc, Value grad,
                                Type target) {
  auto from = typeOf(grad);
  auto to = target.cast<RankedTensorType>();
  if (from.getShape() == to.getShape())
    return grad;
  int64_t lead = from.getRank() - to.getRank();
  SmallVector<int64_t> axes;
  for (int64_t d = 0; d < from.getRank(); ++d)
    if (d < lead || (to.getDimSize(d - lead) == 1 && from.getDimSize(d) != 1))
      axes.push_back(d);
  Value summed = grad;
  if (!axes.empty())
    summed = b.create<ReduceSumOp>(loc, grad, axes, /*keepdims=*/true);
  if (typeOf(summed).getShape() != to.getShape())
    summed = b.create<ReshapeOp>(
        loc, RankedTensorType::get(to.getShape(), from.getElementType()),
        summed);
  return summed;
}

namespace {

/// Small builders shared by the rules.
struct Emit {
  OpBuilder &b;
  Location loc;

  /// A rank-0 constant of `like`'s element type.
  Value scalar(Value like, double value) {
    Type element = typeOf(like).getElementType();
    auto type = RankedTensorType::get({}, element);
    Attribute attr = FloatAttr::get(element, value);
    return b.create<ConstantOp>(loc, DenseElementsAttr::get(type, attr));
  }
  /// A constant of `type` filled with `value`.
  Value splat(RankedTensorType type, double value) {
    Attribute attr = FloatAttr::get(type.getElementType(), value);
    return b.create<ConstantOp>(loc, DenseElementsAttr::get(type, attr));
  }
  Value add(Value x, Value y) { return b.create<AddOp>(loc, x, y); }
  Value sub(Value x, Value y) { return b.create<SubOp>(loc, x, y); }
  Value mul(Value x, Value y) { return b.create<MulOp>(loc, x, y); }
  Value div(Value x, Value y) { return b.create<DivOp>(loc, x, y); }
  Value neg(Value x) { return b.create<NegOp>(loc, x); }
  Value mulScalar(Value x, double s) { return mul(x, scalar(x, s)); }
  Value select(Value c, Value t, Value f) {
    return b.create<SelectOp>(loc, c, t, f);
  }
  Value cast(Value x, Type elementType) {
    auto type = RankedTensorType::get(typeOf(x).getShape(), elementType);
    return b.create<CastOp>(loc, type, x);
  }
  Value reshape(Value x, ArrayRef<int64_t> shape) {
    if (typeOf(x).getShape() == shape)
      return x;
    return b.create<ReshapeOp>(
        loc, RankedTensorType::get(shape, typeOf(x).getElementType()), x);
  }
  Value broadcast(Value x, RankedTensorType to) {
    if (typeOf(x).getShape() == to.getShape())
      return x;
    return b.create<BroadcastToOp>(
        loc, RankedTensorType::get(to.getShape(), typeOf(x).getElementType()),
        x);
  }
  Value unbroadcast(Value grad, Value target) {
    return mlir::cleave::unbroadcast(b, loc, grad, target.getType());
  }
};

/// Shape of `x` with the reduced `axes` kept as 1.
SmallVector<int64_t> keptShape(RankedTensorType x, ArrayRef<int64_t> axes) {
  SmallVector<int64_t> shape(x.getShape());
  for (int64_t a : axes)
    shape[a] = 1;
  return shape;
}

/// The gradient of a reduction's input: `g` back at the kept shape,
/// broadcast to `x`.
Value spreadReduced(Emit &e, Value g, RankedTensorType x,
                    ArrayRef<int64_t> axes) {
  return e.broadcast(e.reshape(g, keptShape(x, axes)), x);
}

/// dA, dB of `y = matmul(a, b)` with the op's transposes (see the matmul
/// description): each stored operand gets the gradient of its storage.
void matmulGradients(Emit &e, MatmulOp op, Value g, ArrayRef<bool> wanted,
                     SmallVectorImpl<Value> &grads) {
  OpBuilder &b = e.b;
  Value lhs = op.getLhs(), rhs = op.getRhs();
  bool tl = op.getTransposeLhs(), tr = op.getTransposeRhs();
  auto lhsType = typeOf(lhs), rhsType = typeOf(rhs), gType = typeOf(g);
  auto product = [&](Value x, Value y, bool tx, bool ty) -> Value {
    return b.create<MatmulOp>(e.loc, x, y, tx, ty).getResult();
  };
  // A weight [K, N] (or [N, K]) read by activations [..., M, K]: fold the
  // leading dimensions into M, so dW is one product, not one per batch.
  bool flatWeight = rhsType.getRank() == 2 && lhsType.getRank() > 2;
  if (flatWeight && !tl) {
    int64_t rows = lhsType.getNumElements() / lhsType.getShape().back();
    Value a2 = e.reshape(lhs, {rows, lhsType.getShape().back()});
    Value g2 = e.reshape(g, {rows, gType.getShape().back()});
    if (wanted[0]) // dA = g B^T (or g B when B is stored transposed)
      grads[0] = e.reshape(product(g2, rhs, false, !tr), lhsType.getShape());
    if (wanted[1]) // dB = A^T g (or g^T A)
      grads[1] = tr ? product(g2, a2, true, false) : product(a2, g2, true, false);
    return;
  }
  if (wanted[0]) {
    Value d = tl ? product(rhs, g, tr, true) : product(g, rhs, false, !tr);
    grads[0] = e.unbroadcast(d, lhs);
  }
  if (wanted[1]) {
    Value d = tr ? product(g, lhs, true, tl) : product(lhs, g, !tl, false);
    grads[1] = e.unbroadcast(d, rhs);
  }
}

/// Slice `x` along `axis` from `begin` to `end`.
Value sliceAxis(Emit &e, Value x, int64_t axis, int64_t begin, int64_t end) {
  auto type = typeOf(x);
  SmallVector<int64_t> start(type.getRank(), 0), limit(type.getShape()),
      step(type.getRank(), 1);
  start[axis] = begin;
  limit[axis] = end;
  return e.b.create<SliceOp>(e.loc, x, start, limit, step);
}

/// The rank's part `[r n, (r+1) n)` of `x` along `dim`, `r` its
/// coordinate on `axis`: a gather of those rows.
Value rankPart(Emit &e, Value x, StringAttr axis, int64_t dim, int64_t n) {
  OpBuilder &b = e.b;
  SmallVector<int64_t> rows(n);
  for (int64_t i = 0; i < n; ++i)
    rows[i] = i;
  auto indexType = RankedTensorType::get({n}, b.getI64Type());
  auto scalar = RankedTensorType::get({}, b.getI64Type());
  Value iota = b.create<ConstantOp>(
      e.loc, DenseElementsAttr::get(indexType, ArrayRef<int64_t>(rows)));
  Value r = b.create<AxisIndexOp>(e.loc, scalar, axis);
  Value first = b.create<MulOp>(
      e.loc, r,
      b.create<ConstantOp>(e.loc, DenseElementsAttr::get(
                                      scalar, b.getI64IntegerAttr(n))));
  Value indices = b.create<AddOp>(e.loc, iota, first);
  return b.create<GatherOp>(e.loc, x, indices, b.getI64IntegerAttr(dim));
}

} // namespace

LogicalResult mlir::cleave::buildOperandGradients(
    OpBuilder &b, Operation *op, ArrayRef<Value> resultGrads,
    ArrayRef<bool> wanted, SmallVectorImpl<Value> &grads) {
  grads.assign(op->getNumOperands(), Value());
  Emit e{b, op->getLoc()};
  Value g = resultGrads.empty() ? Value() : resultGrads[0];
  Value y = op->getNumResults() ? op->getResult(0) : Value();
  auto want = [&](unsigned i) {
    return i < wanted.size() && wanted[i] &&
           isDifferentiable(op->getOperand(i).getType());
  };
  auto x = [&](unsigned i) { return op->getOperand(i); };
  auto set = [&](unsigned i, auto build) {
    if (want(i))
      grads[i] = build();
  };
  // Elementwise unary rules: gx = g * f'(x, y).
  auto unary = [&](auto derivative) { set(0, [&] { return derivative(); }); };

  bool handled = true, maskDepends = false;
  std::string unsupported; // a variant of an op that has no rule
  llvm::TypeSwitch<Operation *>(op)
      .Case([&](AddOp) {
        set(0, [&] { return e.unbroadcast(g, x(0)); });
        set(1, [&] { return e.unbroadcast(g, x(1)); });
      })
      .Case([&](SubOp) {
        set(0, [&] { return e.unbroadcast(g, x(0)); });
        set(1, [&] { return e.unbroadcast(e.neg(g), x(1)); });
      })
      .Case([&](MulOp) {
        set(0, [&] { return e.unbroadcast(e.mul(g, x(1)), x(0)); });
        set(1, [&] { return e.unbroadcast(e.mul(g, x(0)), x(1)); });
      })
      .Case([&](DivOp) {
        // ga = g / b; gb = -g * y / b
        set(0, [&] { return e.unbroadcast(e.div(g, x(1)), x(0)); });
        set(1, [&] {
          return e.unbroadcast(e.neg(e.div(e.mul(g, y), x(1))), x(1));
        });
      })
      .Case([&](PowOp) {
        // ga = g * b * a^(b - 1); gb = g * y * ln(a)
        set(0, [&] {
          Value bm1 = e.sub(x(1), e.scalar(x(1), 1.0));
          Value d = e.mul(x(1), b.create<PowOp>(e.loc, x(0), bm1));
          return e.unbroadcast(e.mul(g, d), x(0));
        });
        set(1, [&] {
          Value ln = b.create<LogOp>(e.loc, x(0));
          return e.unbroadcast(e.mul(g, e.mul(y, ln)), x(1));
        });
      })
      .Default([&](Operation *) { handled = false; });
  if (handled)
    return success();
  handled = true;

  auto minMax = [&](bool isMax) {
    // Ties split the gradient in half, as torch.maximum / torch.minimum.
    Value strict = isMax ? Value(b.create<GreaterOp>(e.loc, x(0), x(1)))
                         : Value(b.create<LessOp>(e.loc, x(0), x(1)));
    Value tie = b.create<EqualOp>(e.loc, x(0), x(1));
    Value half = e.mulScalar(g, 0.5);
    Value zero = e.scalar(g, 0.0);
    Value gFirst = e.select(strict, g, e.select(tie, half, zero));
    Value gSecond = e.select(strict, zero, e.select(tie, half, g));
    set(0, [&] { return e.unbroadcast(gFirst, x(0)); });
    set(1, [&] { return e.unbroadcast(gSecond, x(1)); });
  };

  llvm::TypeSwitch<Operation *>(op)
      .Case([&](MaxOp) { minMax(true); })
      .Case([&](MinOp) { minMax(false); })
      .Case([&](SelectOp s) {
        Value zero = e.scalar(g, 0.0);
        set(1, [&] { return e.unbroadcast(e.select(s.getCond(), g, zero), x(1)); });
        set(2, [&] { return e.unbroadcast(e.select(s.getCond(), zero, g), x(2)); });
      })
      .Case([&](NegOp) { unary([&] { return e.neg(g); }); })
      .Case([&](AbsOp) {
        unary([&] {
          // g * sign(x), 0 at 0.
          Value zero = e.scalar(x(0), 0.0);
          Value pos = b.create<GreaterOp>(e.loc, x(0), zero);
          Value negative = b.create<LessOp>(e.loc, x(0), zero);
          return e.select(pos, g, e.select(negative, e.neg(g), e.scalar(g, 0.0)));
        });
      })
      .Case([&](ReluOp) {
        unary([&] {
          Value pos = b.create<GreaterOp>(e.loc, y, e.scalar(y, 0.0));
          return e.select(pos, g, e.scalar(g, 0.0));
        });
      })
      .Case([&](ExpOp) { unary([&] { return e.mul(g, y); }); })
      .Case([&](LogOp) { unary([&] { return e.div(g, x(0)); }); })
      .Case([&](SqrtOp) {
        unary([&] { return e.div(g, e.mulScalar(y, 2.0)); });
      })
      .Case([&](RsqrtOp) {
        // -0.5 * g * y^3
        unary([&] {
          return e.mul(e.mulScalar(g, -0.5), e.mul(y, e.mul(y, y)));
        });
      })
      .Case([&](ReciprocalOp) {
        unary([&] { return e.neg(e.mul(g, e.mul(y, y))); });
      })
      .Case([&](TanhOp) {
        unary([&] {
          return e.mul(g, e.sub(e.scalar(y, 1.0), e.mul(y, y)));
        });
      })
      .Case([&](SigmoidOp) {
        unary([&] {
          return e.mul(g, e.mul(y, e.sub(e.scalar(y, 1.0), y)));
        });
      })
      .Case([&](ErfOp) {
        unary([&] {
          Value sq = e.mul(x(0), x(0));
          Value d = b.create<ExpOp>(e.loc, e.neg(sq));
          return e.mul(e.mulScalar(g, 2.0 / std::sqrt(M_PI)), d);
        });
      })
      .Case([&](SinOp) {
        unary([&] { return e.mul(g, b.create<CosOp>(e.loc, x(0))); });
      })
      .Case([&](CosOp) {
        unary([&] { return e.neg(e.mul(g, b.create<SinOp>(e.loc, x(0)))); });
      })
      .Case([&](SiluOp) {
        unary([&] { return b.create<SiluGradOp>(e.loc, x(0), g); });
      })
      .Case([&](GeluOp gelu) {
        unary([&] {
          return b.create<GeluGradOp>(e.loc, x(0), g, gelu.getApproximate());
        });
      })
      .Case([&](DropoutOp dropout) {
        // dx = dy * mask / (1 - ratio): the same op on dy, whose mask is
        // drawn again from the same stream and elements (docs/dropout.md);
        // nothing of the forward is saved.
        unary([&] {
          return b
              .create<DropoutOp>(e.loc, g.getType(), g,
                                 dropout.getRatioAttr(),
                                 dropout.getStreamAttr(),
                                 dropout.getFullShapeAttr(),
                                 dropout.getSplitAttr())
              .getResult();
        });
      })
      .Case([&](CastOp) {
        unary([&] { return e.cast(g, typeOf(x(0)).getElementType()); });
      })
      .Case([&](MatmulOp m) {
        SmallVector<bool> w = {want(0), want(1)};
        matmulGradients(e, m, g, w, grads);
      })
      .Case([&](ReduceSumOp r) {
        unary([&] { return spreadReduced(e, g, typeOf(x(0)), r.getAxes()); });
      })
      .Case([&](ReduceMeanOp r) {
        unary([&] {
          auto xt = typeOf(x(0));
          int64_t n = 1;
          for (int64_t a : r.getAxes())
            n *= xt.getDimSize(a);
          return spreadReduced(e, e.mulScalar(g, 1.0 / double(n)), xt,
                               r.getAxes());
        });
      })
      .Default([&](Operation *) { handled = false; });
  if (handled)
    return success();
  handled = true;

  auto extremum = [&](ArrayRef<int64_t> axes) {
    // The gradient goes to every position equal to the extremum, split
    // evenly between them (torch.amax / amin).
    unary([&] {
      auto xt = typeOf(x(0));
      Value yKept = e.broadcast(e.reshape(y, keptShape(xt, axes)), xt);
      Value hit = e.cast(b.create<EqualOp>(e.loc, x(0), yKept),
                         xt.getElementType());
      Value count = b.create<ReduceSumOp>(e.loc, hit, axes, true);
      Value share = e.div(e.reshape(g, keptShape(xt, axes)), count);
      return e.mul(hit, e.broadcast(share, xt));
    });
  };

  llvm::TypeSwitch<Operation *>(op)
      .Case([&](ReduceMaxOp r) { extremum(r.getAxes()); })
      .Case([&](CumsumOp c) {
        // x[j] reaches y[i] for the i at or after j (before, reversed; not
        // i == j when exclusive): gx is g summed the other way.
        unary([&] {
          return b.create<CumsumOp>(e.loc, g, c.getAxisAttr(),
                                    c.getExclusiveAttr(),
                                    b.getBoolAttr(!c.getReverse()));
        });
      })
      .Case([&](ReduceMinOp r) { extremum(r.getAxes()); })
      .Case([&](SoftmaxOp s) {
        unary([&] {
          return b.create<SoftmaxGradOp>(e.loc, y, g, s.getAxisAttr());
        });
      })
      .Case([&](LogSoftmaxOp s) {
        unary([&] {
          return b.create<LogSoftmaxGradOp>(e.loc, y, g, s.getAxisAttr());
        });
      })
      .Case([&](LayerNormOp ln) {
        auto xt = typeOf(ln.getX());
        auto pt = RankedTensorType::get(xt.getShape().drop_front(ln.getAxis()),
                                        xt.getElementType());
        auto grad = b.create<LayerNormGradOp>(
            e.loc, TypeRange{xt, pt, pt}, g, ln.getX(), ln.getScale(),
            ln.getAxisAttr(), ln.getEpsilonAttr());
        // Operands: x, then the optional scale and bias.
        unsigned next = 1;
        set(0, [&] { return grad.getDx(); });
        if (ln.getScale()) {
          set(next, [&] { return grad.getDscale(); });
          ++next;
        }
        if (ln.getBias())
          set(next, [&] { return grad.getDbias(); });
      })
      .Case([&](RmsNormOp rn) {
        auto xt = typeOf(rn.getX());
        auto grad = b.create<RmsNormGradOp>(
            e.loc, TypeRange{xt, typeOf(rn.getScale())}, g, rn.getX(),
            rn.getScale(), rn.getAxisAttr(), rn.getEpsilonAttr());
        set(0, [&] { return grad.getDx(); });
        set(1, [&] { return grad.getDscale(); });
      })
      .Case([&](RotaryOp r) {
        // y = x cos + rot(x) sin with rot^T = -rot, so
        // gx = g cos - rot(g sin) = g cos + rot(g) (-swap(sin)), where swap
        // exchanges the halves of the table: gx = rotary(g, cos, -swap(sin)).
        // (For Llama's tables, whose halves are equal, swap(sin) = sin.)
        set(0, [&] {
          Value sin = r.getSin();
          int64_t last = typeOf(sin).getRank() - 1;
          int64_t d = typeOf(sin).getDimSize(last);
          Value swapped = b.create<ConcatOp>(
              e.loc, ValueRange{sliceAxis(e, sin, last, d / 2, d),
                                sliceAxis(e, sin, last, 0, d / 2)},
              last);
          return b.create<RotaryOp>(e.loc, typeOf(g), g, r.getCos(),
                                    e.neg(swapped))
              .getResult();
        });
        auto xt = typeOf(r.getX());
        SmallVector<int64_t> lead(xt.getRank() - 2);
        std::iota(lead.begin(), lead.end(), 0);
        auto sumLead = [&](Value v) -> Value {
          if (lead.empty())
            return v;
          return b.create<ReduceSumOp>(e.loc, v, lead, false);
        };
        set(1, [&] { return sumLead(e.mul(g, r.getX())); });
        set(2, [&] {
          auto table = typeOf(r.getSin());
          Value rotated = b.create<RotaryOp>(e.loc, xt, r.getX(),
                                             e.splat(table, 0.0),
                                             e.splat(table, 1.0));
          return sumLead(e.mul(g, rotated));
        });
      })
      .Case([&](AttentionOp a) {
        auto grad = b.create<AttentionGradOp>(
            e.loc,
            TypeRange{typeOf(a.getQ()), typeOf(a.getK()), typeOf(a.getV())}, g,
            a.getQ(), a.getK(), a.getV(), a.getMask(), a.getScaleAttr(),
            a.getCausalAttr());
        set(0, [&] { return grad.getDq(); });
        set(1, [&] { return grad.getDk(); });
        set(2, [&] { return grad.getDv(); });
        // The mask (operand 3) has no rule: masks are data. One that
        // depends on a trained parameter (a learned bias, or a mask buffer
        // the export made an initializer) is refused below rather than
        // left without its gradient.
        maskDepends = a.getMask() && want(3);
      })
      .Case([&](EmbeddingOp em) {
        // nn.Embedding's padding_idx: that row gets nothing from the lookup
        // (a tied head still adds its own gradient to it).
        set(0, [&] {
          return b.create<EmbeddingGradOp>(e.loc, typeOf(em.getTable()), g,
                                           em.getIds(), em.getPaddingIdxAttr());
        });
      })
      .Case([&](GatherOp ga) {
        set(0, [&] {
          return b.create<GatherGradOp>(e.loc, typeOf(ga.getData()), g,
                                        ga.getIndices(), ga.getAxisAttr());
        });
      })
      .Case([&](GatherElementsOp ge) {
        set(0, [&] {
          return b.create<GatherElementsGradOp>(e.loc, typeOf(ge.getData()), g,
                                                ge.getIndices(),
                                                ge.getAxisAttr());
        });
      })
      .Case([&](ScatterNdOp s) {
        // none: the written slices come from updates, the rest from data;
        // add: data reaches every element, updates their slices.
        bool none = s.getReduction() == "none";
        if (!none && s.getReduction() != "add") {
          if (want(0) || want(2))
            unsupported = s.getReduction().str();
          return;
        }
        set(0, [&]() -> Value {
          if (!none)
            return g;
          return b.create<ScatterNdOp>(e.loc, typeOf(g), g, s.getIndices(),
                                       e.splat(typeOf(s.getUpdates()), 0.0),
                                       s.getReductionAttr());
        });
        set(2, [&] {
          return b.create<GatherNdOp>(e.loc, typeOf(s.getUpdates()), g,
                                      s.getIndices());
        });
      })
      .Case([&](SoftmaxCrossEntropyOp l) {
        set(0, [&] {
          return b.create<SoftmaxCrossEntropyGradOp>(
              e.loc, typeOf(l.getInput()), g, l.getInput(), l.getTarget(),
              l.getReductionAttr(), l.getIgnoreIndexAttr());
        });
      })
      .Case([&](NllLossOp l) {
        set(0, [&] {
          return b.create<NllLossGradOp>(e.loc, typeOf(l.getInput()), g,
                                         l.getTarget(), l.getReductionAttr(),
                                         l.getIgnoreIndexAttr());
        });
      })
      // Megatron's conjugate f and g (docs/tensor-parallel.md): f's
      // gradient is summed over its group, g's passes through.
      .Case([&](TpCopyOp f) {
        unary([&] {
          return b.create<TpReduceOp>(e.loc, g, f.getAxesAttr()).getResult();
        });
      })
      .Case([&](TpReduceOp) { unary([&] { return g; }); })
      // Sequence parallelism's pair (docs/tensor-parallel.md): the
      // gather's gradient is summed over the group and each rank keeps its
      // part of the sequence; the reduce-scatter's is gathered back.
      .Case([&](SpAllGatherOp f) {
        unary([&] {
          if (f.getSplitGrad())
            return rankPart(e, g, f.getAxes()[0].cast<StringAttr>(),
                            f.getDim(), typeOf(x(0)).getDimSize(f.getDim()));
          return Value(b.create<SpReduceScatterOp>(e.loc, typeOf(x(0)), g,
                                                   f.getAxesAttr(),
                                                   f.getDimAttr()));
        });
      })
      .Case([&](SpReduceScatterOp r) {
        unary([&] {
          return b
              .create<SpAllGatherOp>(e.loc, typeOf(x(0)), g, r.getAxesAttr(),
                                     r.getDimAttr(), UnitAttr())
              .getResult();
        });
      })
      // A maximum over a group is the shift of a vocab-parallel softmax
      // (cleave-partition-tensor), which the loss does not depend on: it
      // is not differentiated. Other all-reduces have no rule.
      .Case([&](AllReduceOp r) { handled = r.getReduce() == "max"; })
      .Case([&](ReshapeOp) {
        unary([&] { return e.reshape(g, typeOf(x(0)).getShape()); });
      })
      .Case([&](TransposeOp t) {
        unary([&] {
          ArrayRef<int64_t> perm = t.getPerm();
          SmallVector<int64_t> inverse(perm.size());
          for (auto [i, p] : llvm::enumerate(perm))
            inverse[p] = i;
          return b.create<TransposeOp>(e.loc, g, inverse).getResult();
        });
      })
      .Case([&](BroadcastToOp) {
        unary([&] { return e.unbroadcast(g, x(0)); });
      })
      .Case([&](SliceOp s) {
        unary([&] {
          return b.create<SliceGradOp>(e.loc, typeOf(x(0)), g, s.getStartAttr(),
                                       s.getLimitAttr(), s.getStepAttr());
        });
      })
      .Case([&](ConcatOp c) {
        int64_t axis = c.getAxis(), at = 0;
        for (unsigned i = 0; i < op->getNumOperands(); ++i) {
          int64_t size = typeOf(x(i)).getDimSize(axis);
          set(i, [&] { return sliceAxis(e, g, axis, at, at + size); });
          at += size;
        }
      })
      .Default([&](Operation *) { handled = false; });
  if (!unsupported.empty())
    return op->emitOpError()
           << "has no gradient rule for reduction '" << unsupported
           << "' (only none and add), but the loss depends on a parameter "
              "through it";
  if (maskDepends)
    return op->emitOpError()
           << "has no gradient rule for its mask, but the mask depends on a "
              "trained parameter; if that parameter is a buffer (a fixed "
              "mask), list it in the spec's frozen_parameters";
  if (handled)
    return success();
  return op->emitOpError() << "has no gradient rule, but the loss depends "
                              "on a parameter through it";
}
