//===- ImportMovement.cpp - ONNX data movement ops to cleave IR -----------===//
//
// Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Expand, Concat, Slice,
// Split, Gather and Trilu: ops that move elements without computing new
// ones. Their shape operands must be known at compile time.
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

struct Movement : NodeImport {
  Movement(const NodeImport &n) : NodeImport(n) {}

  LogicalResult reshapeLike() {
    auto x = value(0);
    if (failed(x))
      return failure();
    llvm::Expected<::cleave::Shape> to = ::cleave::Shape();
    if (op == "Reshape") {
      const HostTensor *s = requireConstant(1, "shape");
      if (!s)
        return failure();
      to = ::cleave::reshapeTarget(shape(0), s->toInts(),
                                   intAttr(node, "allowzero", 0));
    } else if (op == "Flatten") {
      to = ::cleave::flattenShape(shape(0), intAttr(node, "axis", 1));
    } else {
      if (opset >= 13 && has(1) && !requireConstant(1, "axes"))
        return failure();
      auto axes = ::cleave::axesOf(node, constant(1), opset, 13);
      to = op == "Squeeze" ? ::cleave::squeezeShape(shape(0), axes)
                           : ::cleave::unsqueezeShape(shape(0), axes);
    }
    if (!to)
      return report(to.takeError());
    out(reshape(*x, *to));
    return success();
  }

  LogicalResult transpose() {
    auto x = value(0);
    if (failed(x))
      return failure();
    auto perm = intsAttr(node, "perm");
    if (perm.empty())
      for (int64_t d = type(0).getRank() - 1; d >= 0; --d)
        perm.push_back(d);
    auto r = inferred<TransposeOp>(
        loc, {*x}, {builder.getNamedAttr("perm", arrayAttr(perm))});
    if (failed(r))
      return failure();
    out(*r);
    return success();
  }

  LogicalResult expand() {
    const HostTensor *s = requireConstant(1, "shape");
    auto x = value(0);
    if (!s || failed(x))
      return failure();
    auto dims = s->toInts();
    auto merged = broadcastShapes(shape(0), dims);
    if (failed(merged))
      return error(loc) << "Expand: cannot broadcast "
                        << ::cleave::shapeToString(shape(0)) << " to "
                        << ::cleave::shapeToString(dims);
    if (ArrayRef<int64_t>(*merged) == shape(0)) {
      out(*x);
      return success();
    }
    out(builder.create<BroadcastToOp>(
        loc, RankedTensorType::get(*merged, type(0).getElementType()), *x));
    return success();
  }

  LogicalResult concat() {
    if (node.input_size() == 0)
      return error(loc) << "Concat has no inputs";
    auto axis =
        ::cleave::normalizeAxis(intAttr(node, "axis", 0), type(0).getRank());
    if (!axis)
      return report(axis.takeError());
    SmallVector<Value> inputs;
    for (int i = 0; i < node.input_size(); ++i) {
      if (!has(i))
        continue;
      auto v = value(i);
      if (failed(v))
        return failure();
      inputs.push_back(*v);
    }
    auto r = inferred<ConcatOp>(loc, inputs,
                                {builder.getNamedAttr("axis", i64(*axis))});
    if (failed(r))
      return failure();
    out(*r);
    return success();
  }

  LogicalResult sliceOrSplit() {
    auto x = value(0);
    if (failed(x))
      return failure();
    auto slice = [&](const ::cleave::SliceBounds &b) {
      return inferred<SliceOp>(
          loc, {*x},
          {builder.getNamedAttr("start", arrayAttr(b.start)),
           builder.getNamedAttr("limit", arrayAttr(b.limit)),
           builder.getNamedAttr("step", arrayAttr(b.step))});
    };
    if (op == "Slice") {
      std::vector<int64_t> starts, ends, axes, steps;
      if (opset >= 10) {
        const HostTensor *s = requireConstant(1, "starts");
        const HostTensor *e = s ? requireConstant(2, "ends") : nullptr;
        if (!s || !e)
          return failure();
        if (has(3) && !requireConstant(3, "axes"))
          return failure();
        if (has(4) && !requireConstant(4, "steps"))
          return failure();
        starts = s->toInts();
        ends = e->toInts();
        if (has(3))
          axes = constant(3)->toInts();
        if (has(4))
          steps = constant(4)->toInts();
      } else {
        starts = intsAttr(node, "starts");
        ends = intsAttr(node, "ends");
        axes = intsAttr(node, "axes");
      }
      auto bounds = ::cleave::sliceBounds(shape(0), starts, ends, axes, steps);
      if (!bounds)
        return report(bounds.takeError());
      auto r = slice(*bounds);
      if (failed(r))
        return failure();
      out(*r);
      return success();
    }
    auto axis =
        ::cleave::normalizeAxis(intAttr(node, "axis", 0), type(0).getRank());
    if (!axis)
      return report(axis.takeError());
    std::vector<int64_t> split;
    if (opset >= 13 && has(1)) {
      const HostTensor *s = requireConstant(1, "split");
      if (!s)
        return failure();
      split = s->toInts();
    } else if (opset < 13) {
      split = intsAttr(node, "split");
    }
    auto sizes =
        ::cleave::splitSizes(shape(0)[*axis], split,
                             intAttr(node, "num_outputs", node.output_size()));
    if (!sizes)
      return report(sizes.takeError());
    if ((int)sizes->size() != node.output_size())
      return error(loc) << "Split has " << node.output_size() << " outputs but "
                        << sizes->size() << " split sizes";
    int64_t offset = 0;
    for (auto [i, size] : llvm::enumerate(*sizes)) {
      auto bounds = ::cleave::sliceBounds(shape(0), {offset}, {offset + size},
                                          {*axis}, {});
      if (!bounds)
        return report(bounds.takeError());
      auto r = slice(*bounds);
      if (failed(r))
        return failure();
      out(*r, i);
      offset += size;
    }
    return success();
  }

  LogicalResult gather() {
    auto axis =
        ::cleave::normalizeAxis(intAttr(node, "axis", 0), type(0).getRank());
    if (!axis)
      return report(axis.takeError());
    if (!type(1).getElementType().isInteger(64) &&
        !type(1).getElementType().isInteger(32))
      return error(loc) << "Gather's indices must be int32 or int64, got "
                        << type(1);
    auto data = value(0), indices = value(1);
    if (failed(data) || failed(indices))
      return failure();
    // A lookup of run-time ids in a 2-D parameter is an embedding.
    bool embedding = !tensor(0).param.empty() && type(0).getRank() == 2 &&
                     *axis == 0 && !constant(1);
    auto r =
        embedding
            ? inferred<EmbeddingOp>(loc, {*data, *indices})
            : inferred<GatherOp>(loc, {*data, *indices},
                                 {builder.getNamedAttr("axis", i64(*axis))});
    if (failed(r))
      return failure();
    out(*r);
    return success();
  }

  /// On a run-time value: select against the folded triangular mask.
  LogicalResult trilu() {
    // On a run-time value: select against the folded triangular mask.
    if (type(0).getRank() < 2)
      return error(loc) << "Trilu needs rank 2 or more, got " << type(0);
    if (has(1) && !requireConstant(1, "k"))
      return failure();
    auto x = value(0);
    if (failed(x))
      return failure();
    int64_t rows = shape(0)[type(0).getRank() - 2], cols = shape(0).back();
    HostTensor ones(DType::Bool, {rows, cols});
    for (int64_t i = 0; i < ones.numElements(); ++i)
      ones.setInt(i, 1);
    SmallVector<const HostTensor *> maskInputs{&ones, constant(1)};
    auto mask = ::cleave::foldNode(node, maskInputs, opset, modelDir);
    if (!mask)
      return report(mask.takeError());
    HostTensor zero(dtypeOf(type(0).getElementType()), {});
    auto r = inferred<SelectOp>(
        loc, {materialize((*mask)[0], loc), *x, materialize(zero, loc)});
    if (failed(r))
      return failure();
    out(*r);
    return success();
  }
};

} // namespace

void ::cleave::registerMovementOps(::cleave::OnnxOpTable &table) {
  for (const char *op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze"})
    table[op] = [](NodeImport &n) { return Movement(n).reshapeLike(); };
  table["Transpose"] = [](NodeImport &n) { return Movement(n).transpose(); };
  table["Expand"] = [](NodeImport &n) { return Movement(n).expand(); };
  table["Concat"] = [](NodeImport &n) { return Movement(n).concat(); };
  for (const char *op : {"Slice", "Split"})
    table[op] = [](NodeImport &n) { return Movement(n).sliceOrSplit(); };
  table["Gather"] = [](NodeImport &n) { return Movement(n).gather(); };
  table["Trilu"] = [](NodeImport &n) { return Movement(n).trilu(); };
}
