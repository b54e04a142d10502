//===- ImportReductions.cpp - ONNX reductions to cleave IR ----------------===//
//
// ReduceSum, ReduceMean, ReduceMax and ReduceMin over constant axes (an
// input from opset 13 (ReduceSum) or 18 (the others) on, an attribute before),
// and CumSum, a running sum along a constant axis.
//
//===----------------------------------------------------------------------===//

#include "frontend/ConstantFolding.h"
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

struct Reductions : NodeImport {
  Reductions(const NodeImport &n) : NodeImport(n) {}

  LogicalResult reduce() {
    int64_t since = op == "ReduceSum" ? 13 : 18;
    if (opset >= since && has(1) && !constant(1))
      return requireConstant(1, "axes") ? success() : failure();
    auto axesList = ::cleave::axesOf(node, constant(1), opset, since);
    auto x = value(0);
    if (failed(x))
      return failure();
    int64_t rank = type(0).getRank();
    if (axesList.empty()) {
      if (intAttr(node, "noop_with_empty_axes", 0)) {
        out(*x);
        return success();
      }
      for (int64_t d = 0; d < rank; ++d)
        axesList.push_back(d);
    }
    auto axes = ::cleave::normalizeAxes(axesList, rank);
    if (!axes)
      return report(axes.takeError());
    SmallVector<NamedAttribute> attrs{
        builder.getNamedAttr("axes", arrayAttr(*axes)),
        builder.getNamedAttr(
            "keepdims", builder.getBoolAttr(intAttr(node, "keepdims", 1)))};
    FailureOr<Value> r;
    if (op == "ReduceSum")
      r = inferred<ReduceSumOp>(loc, {*x}, attrs);
    else if (op == "ReduceMean")
      r = inferred<ReduceMeanOp>(loc, {*x}, attrs);
    else if (op == "ReduceMax")
      r = inferred<ReduceMaxOp>(loc, {*x}, attrs);
    else
      r = inferred<ReduceMinOp>(loc, {*x}, attrs);
    if (failed(r))
      return failure();
    out(*r);
    return success();
  }

  /// CumSum along a constant axis (input 1, a scalar).
  LogicalResult cumsum() {
    const HostTensor *axisInput = requireConstant(1, "axis");
    auto x = value(0);
    if (!axisInput || failed(x))
      return failure();
    if (axisInput->numElements() != 1)
      return error(loc) << "CumSum's axis must be one integer, got "
                        << type(1);
    auto axis = ::cleave::normalizeAxis(axisInput->getInt(0), type(0).getRank());
    if (!axis)
      return report(axis.takeError());
    out(builder.create<CumsumOp>(
        loc, *x, i64(*axis), builder.getBoolAttr(intAttr(node, "exclusive", 0)),
        builder.getBoolAttr(intAttr(node, "reverse", 0))));
    return success();
  }
};

} // namespace

void ::cleave::registerReductionOps(::cleave::OnnxOpTable &table) {
  table["CumSum"] = [](NodeImport &n) { return Reductions(n).cumsum(); };
  for (const char *op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"})
    table[op] = [](NodeImport &n) { return Reductions(n).reduce(); };
}
