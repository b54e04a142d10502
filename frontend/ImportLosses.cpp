//===- ImportLosses.cpp - ONNX losses to cleave IR ------------------------===//
//
// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss: the loss ops of the
// dialect, or with class weights, elementwise ops and reductions.
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

struct Losses : NodeImport {
  Losses(const NodeImport &n) : NodeImport(n) {}

  LogicalResult loss() {
    if (has(2))
      return weightedLoss();
    auto x = value(0), t = value(1);
    if (failed(x) || failed(t))
      return failure();
    std::string reductionName = stringAttr(node, "reduction", "mean");
    auto reduction = symbolizeLossReduction(reductionName);
    if (!reduction)
      return error(loc) << op << " reduction must be none, sum or mean, got '"
                        << reductionName << "'";
    SmallVector<NamedAttribute> attrs{builder.getNamedAttr(
        "reduction", LossReductionAttr::get(&context, *reduction))};
    if (const auto *ignore = findAttr(node, "ignore_index"))
      attrs.push_back(builder.getNamedAttr("ignore_index", i64(ignore->i())));
    auto r = op == "SoftmaxCrossEntropyLoss"
                 ? inferred<SoftmaxCrossEntropyOp>(loc, {*x, *t}, attrs)
                 : inferred<NllLossOp>(loc, {*x, *t}, attrs);
    if (failed(r))
      return failure();
    out(*r);
    if (op == "SoftmaxCrossEntropyLoss" && node.output_size() > 1 &&
        !node.output(1).empty())
      out(builder.create<LogSoftmaxOp>(loc, *x, i64(1)), 1);
    return success();
  }

  /// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss with class weights,
  /// which the loss ops do not take, as elementwise ops and reductions. A
  /// one-hot comparison with the class ids picks each target's
  /// log-probability and weight, so an ignored target (which may lie outside
  /// [0, C)) reads nothing:
  ///   loss[n, d...] = -logp[n, t, d...] * w[t]   (0 where t == ignore_index)
  ///   mean = sum(loss) / sum(w[t] over targets not ignored)
  LogicalResult weightedLoss() {
    auto get = [&](int i) { return value(i); };
    auto x = get(0), target = get(1), weight = get(2);
    if (failed(x) || failed(target) || failed(weight))
      return failure();
    auto xType = x->getType().cast<RankedTensorType>();
    auto tType = target->getType().cast<RankedTensorType>();
    auto wType = weight->getType().cast<RankedTensorType>();
    std::string reduction = stringAttr(node, "reduction", "mean");
    if (reduction != "none" && reduction != "sum" && reduction != "mean")
      return error(loc) << op << " reduction must be none, sum or mean, got '"
                        << reduction << "'";
    // The shape checks of the loss ops, for the same messages.
    SmallVector<Type> lossType;
    if (failed(SoftmaxCrossEntropyOp::inferReturnTypes(
            &context, loc, ValueRange{*x, *target},
            builder.getDictionaryAttr(builder.getNamedAttr(
                "reduction",
                LossReductionAttr::get(&context, LossReduction::none))),
            {}, lossType)))
      return failure();
    int64_t rank = xType.getRank(), classes = xType.getDimSize(1);
    Type element = xType.getElementType();
    if (wType.getShape() != ArrayRef<int64_t>{classes} ||
        wType.getElementType() != element)
      return error(loc) << op << "'s weights must be a " << classes
                        << "-element vector of " << element << ", got "
                        << wType;

    Value logp = *x;
    if (op == "SoftmaxCrossEntropyLoss") {
      logp =
          builder.create<LogSoftmaxOp>(loc, *x, builder.getI64IntegerAttr(1));
      if (node.output_size() > 1 && !node.output(1).empty())
        out(logp, 1);
    }
    // [N, 1, d...] targets against [1, C, 1...] class ids.
    SmallVector<int64_t> oneHotShape(rank, 1), targetShape(tType.getShape());
    oneHotShape[1] = classes;
    targetShape.insert(targetShape.begin() + 1, 1);
    Type idType = tType.getElementType();
    if (auto e = ::cleave::checkHostTensorSize(oneHotShape, foldLimit))
      return foldError(std::move(e));
    HostTensor ids(dtypeOf(idType), oneHotShape);
    for (int64_t c = 0; c < classes; ++c)
      ids.setInt(c, c);
    Value target1 = builder.create<ReshapeOp>(
        loc, RankedTensorType::get(targetShape, idType), *target);
    Value oneHot = *inferred<EqualOp>(loc, {target1, materialize(ids, loc)});
    HostTensor zeroT(dtypeOf(element), {});
    Value zero = materialize(zeroT, loc);
    auto sumOver = [&](Value v, ArrayRef<int64_t> axes) {
      return *inferred<ReduceSumOp>(
          loc, {v},
          {builder.getNamedAttr("axes", builder.getDenseI64ArrayAttr(axes)),
           builder.getNamedAttr("keepdims", builder.getBoolAttr(false))});
    };
    Value picked = sumOver(*inferred<SelectOp>(loc, {oneHot, logp, zero}), {1});
    Value weights = builder.create<ReshapeOp>(
        loc, RankedTensorType::get(oneHotShape, element), *weight);
    Value w = sumOver(*inferred<SelectOp>(loc, {oneHot, weights, zero}), {1});
    if (const auto *ignore = findAttr(node, "ignore_index")) {
      Value ignored = *inferred<EqualOp>(
          loc, {*target,
                materialize(HostTensor::scalarInt(ignore->i(), dtypeOf(idType)),
                            loc)});
      w = *inferred<SelectOp>(loc, {ignored, zero, w});
    }
    Value loss = builder.create<NegOp>(loc, *inferred<MulOp>(loc, {picked, w}));
    if (reduction != "none") {
      SmallVector<int64_t> all;
      for (int64_t d = 0; d < rank - 1; ++d)
        all.push_back(d);
      loss = sumOver(loss, all);
      if (reduction == "mean")
        loss = *inferred<DivOp>(loc, {loss, sumOver(w, all)});
    }
    out(loss);
    return success();
  }
};

} // namespace

void ::cleave::registerLossOps(::cleave::OnnxOpTable &table) {
  for (const char *op :
       {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"})
    table[op] = [](NodeImport &n) { return Losses(n).loss(); };
}
