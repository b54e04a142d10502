//===- ImportNN.cpp - ONNX matrix products and normalizations to cleave IR
//---===//
//
// MatMul and Gemm, Softmax and LogSoftmax, LayerNormalization: the ops a
// transformer block spends its time in.
//
//===----------------------------------------------------------------------===//

#include "frontend/ImportNode.h"
#include "frontend/OnnxImporter.h"
#include "frontend/OnnxShapes.h"
#include "ir/CleaveOps.h"

using namespace mlir;
using namespace mlir::cleave;
using ::cleave::DType;
using ::cleave::dtypeOf;
using ::cleave::findAttr;
using ::cleave::floatAttr;
using ::cleave::HostTensor;
using ::cleave::intAttr;
using ::cleave::intsAttr;
using ::cleave::NodeImport;
using ::cleave::stringAttr;

namespace {

struct NN : NodeImport {
  NN(const NodeImport &n) : NodeImport(n) {}

  LogicalResult matmul() {
    auto a = value(0), b = value(1);
    if (failed(a) || failed(b))
      return failure();
    Value lhs = *a, rhs = *b;
    if (op == "Gemm") {
      if (type(0).getRank() != 2 || type(1).getRank() != 2)
        return error(loc) << "Gemm needs 2-D inputs, got " << type(0) << " and "
                          << type(1);
      auto transpose = [&](Value v) {
        return *inferred<TransposeOp>(
            loc, {v}, {builder.getNamedAttr("perm", arrayAttr({1, 0}))});
      };
      if (intAttr(node, "transA", 0))
        lhs = transpose(lhs);
      if (intAttr(node, "transB", 0))
        rhs = transpose(rhs);
    }
    int64_t lhsRank = lhs.getType().cast<RankedTensorType>().getRank();
    int64_t rhsRank = rhs.getType().cast<RankedTensorType>().getRank();
    if (lhsRank == 0 || rhsRank == 0)
      return error(loc) << "MatMul needs inputs of rank 1 or more";
    // Rank-1 operands become matrices and the added dimension is dropped.
    if (lhsRank == 1)
      lhs = reshape(lhs, {1, shape(0)[0]});
    if (rhsRank == 1)
      rhs = reshape(rhs, {shape(1)[0], 1});
    auto r = inferred<MatmulOp>(loc, {lhs, rhs});
    if (failed(r))
      return failure();
    Value result = *r;
    if (lhsRank == 1 || rhsRank == 1) {
      SmallVector<int64_t> s(
          result.getType().cast<RankedTensorType>().getShape());
      if (rhsRank == 1)
        s.erase(s.end() - 1);
      if (lhsRank == 1)
        s.erase(s.end() - (rhsRank == 1 ? 1 : 2));
      result = reshape(result, s);
    }
    if (op == "Gemm") {
      float alpha = floatAttr(node, "alpha", 1.0f),
            beta = floatAttr(node, "beta", 1.0f);
      Type element = result.getType().cast<RankedTensorType>().getElementType();
      auto scalar = [&](float v) {
        HostTensor t(dtypeOf(element), {});
        t.setDouble(0, v);
        return materialize(t, loc);
      };
      if (alpha != 1.0f)
        result = *inferred<MulOp>(loc, {result, scalar(alpha)});
      if (has(2)) {
        auto c = value(2);
        if (failed(c))
          return failure();
        Value cv = *c;
        if (beta != 1.0f)
          cv = *inferred<MulOp>(loc, {cv, scalar(beta)});
        auto sum = inferred<AddOp>(loc, {result, cv});
        if (failed(sum))
          return failure();
        result = *sum;
      }
    }
    out(result);
    return success();
  }

  LogicalResult softmax() {
    auto x = value(0);
    if (failed(x))
      return failure();
    if (!type(0).getElementType().isa<FloatType>())
      return error(loc) << op << " needs a floating-point input";
    int64_t rank = type(0).getRank();
    auto axis = ::cleave::normalizeAxis(
        intAttr(node, "axis", opset >= 13 ? -1 : 1), rank);
    if (!axis)
      return report(axis.takeError());
    Value in = *x;
    int64_t softmaxAxis = *axis;
    // Before opset 13 the op normalizes over all dimensions from `axis` on.
    bool flatten = opset < 13 && *axis != rank - 1;
    if (flatten) {
      int64_t outer = 1, inner = 1;
      for (int64_t d = 0; d < rank; ++d)
        (d < *axis ? outer : inner) *= shape(0)[d];
      in = reshape(in, {outer, inner});
      softmaxAxis = 1;
    }
    Value r =
        op == "Softmax"
            ? builder.create<SoftmaxOp>(loc, in, i64(softmaxAxis)).getResult()
            : builder.create<LogSoftmaxOp>(loc, in, i64(softmaxAxis))
                  .getResult();
    out(flatten ? reshape(r, shape(0)) : r);
    return success();
  }

  LogicalResult layerNorm() {
    auto x = value(0);
    if (failed(x))
      return failure();
    auto axis =
        ::cleave::normalizeAxis(intAttr(node, "axis", -1), type(0).getRank());
    if (!axis)
      return report(axis.takeError());
    Value scale, bias;
    if (has(1)) {
      auto s = value(1);
      if (failed(s))
        return failure();
      scale = *s;
    }
    if (has(2)) {
      auto b = value(2);
      if (failed(b))
        return failure();
      bias = *b;
    }
    // Scale and bias may be given in a broadcastable shape; bring them to
    // x.shape[axis:] as the op expects.
    auto normalized = shape(0).drop_front(*axis);
    for (Value *p : {&scale, &bias}) {
      if (!*p)
        continue;
      auto t = p->getType().cast<RankedTensorType>();
      if (t.getShape() != normalized) {
        auto merged = broadcastShapes(t.getShape(), normalized);
        if (failed(merged) || ArrayRef<int64_t>(*merged) != normalized)
          return error(loc) << "LayerNormalization's scale/bias of shape "
                            << ::cleave::shapeToString(t.getShape())
                            << " does not broadcast to the normalized shape "
                            << ::cleave::shapeToString(normalized);
        *p = builder.create<BroadcastToOp>(
            loc, RankedTensorType::get(normalized, t.getElementType()), *p);
      }
    }
    float epsilon = floatAttr(node, "epsilon", 1e-5f);
    out(builder.create<LayerNormOp>(loc, type(0), *x, scale, bias, i64(*axis),
                                    builder.getF32FloatAttr(epsilon)));
    // The optional Mean and InvStdDev outputs (what a training backend would
    // save for the backward pass), computed in `stash_type`.
    bool wantStats = false;
    for (int i = 1; i < node.output_size(); ++i)
      wantStats |= !node.output(i).empty();
    if (wantStats) {
      auto stash =
          elementType(static_cast<DType>(intAttr(node, "stash_type", 1)), loc,
                      "LayerNormalization's stash_type");
      if (failed(stash))
        return failure();
      if (!stash->isa<FloatType>())
        return error(loc) << "LayerNormalization's stash_type must be a "
                             "floating-point type, got "
                          << *stash;
      SmallVector<int64_t> axes;
      for (int64_t d = *axis; d < type(0).getRank(); ++d)
        axes.push_back(d);
      SmallVector<NamedAttribute> attrs{
          builder.getNamedAttr("axes", arrayAttr(axes)),
          builder.getNamedAttr("keepdims", builder.getBoolAttr(true))};
      Value xs = cast(*x, *stash);
      Value mean = *inferred<ReduceMeanOp>(loc, {xs}, attrs);
      Value centered = *inferred<SubOp>(loc, {xs, mean});
      Value square = *inferred<MulOp>(loc, {centered, centered});
      Value variance = *inferred<ReduceMeanOp>(loc, {square}, attrs);
      HostTensor eps(dtypeOf(*stash), {});
      eps.setDouble(0, epsilon);
      Value shifted = *inferred<AddOp>(loc, {variance, materialize(eps, loc)});
      out(mean, 1);
      out(builder.create<RsqrtOp>(loc, shifted), 2);
    }
    return success();
  }
};

} // namespace

void ::cleave::registerNNOps(::cleave::OnnxOpTable &table) {
  for (const char *op : {"MatMul", "Gemm"})
    table[op] = [](NodeImport &n) { return NN(n).matmul(); };
  for (const char *op : {"Softmax", "LogSoftmax"})
    table[op] = [](NodeImport &n) { return NN(n).softmax(); };
  table["LayerNormalization"] = [](NodeImport &n) { return NN(n).layerNorm(); };
}
