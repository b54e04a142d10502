//===- ImportMovement.cpp - ONNX data movement ops to cleave IR -----------===//
//
// Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Expand, Concat, Slice,
// Split, Gather, GatherElements, ScatterND, Trilu, Pad and Tile: ops that
// move elements without
// computing new ones. Their shape operands must be known at compile time.
//
//===----------------------------------------------------------------------===//

#include "frontend/ConstantFolding.h"
#include "frontend/ImportNode.h"
#include "frontend/OnnxImporter.h"
#include "frontend/OnnxShapes.h"
#include "ir/CleaveOps.h"

#include "mlir/IR/Verifier.h"

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
    // A lookup of run-time ids in a 2-D parameter is an embedding; so is
    // any lookup in a table with a padding row (cleave.padding_idx), which
    // only the embedding's gradient leaves out.
    bool rows = !tensor(0).param.empty() && type(0).getRank() == 2 && *axis == 0;
    std::optional<int64_t> padding =
        rows ? paddingRow(tensor(0).param) : std::nullopt;
    bool embedding = rows && (!constant(1) || padding);
    SmallVector<NamedAttribute> paddingAttr;
    if (padding)
      paddingAttr.push_back(builder.getNamedAttr("padding_idx", i64(*padding)));
    auto r =
        embedding
            ? inferred<EmbeddingOp>(loc, {*data, *indices}, paddingAttr)
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
    if (auto e = ::cleave::checkHostTensorSize({rows, cols}, foldLimit))
      return foldError(std::move(e));
    HostTensor ones(DType::Bool, {rows, cols});
    for (int64_t i = 0; i < ones.numElements(); ++i)
      ones.setInt(i, 1);
    SmallVector<const HostTensor *> maskInputs{&ones, constant(1)};
    auto mask =
        ::cleave::foldNode(node, maskInputs, opset, modelDir, foldLimit);
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

  /// `x[start:limit:step]` in every dimension.
  FailureOr<Value> sliceOf(Value v, ArrayRef<int64_t> start,
                           ArrayRef<int64_t> limit, ArrayRef<int64_t> step) {
    return inferred<SliceOp>(loc, {v},
                             {builder.getNamedAttr("start", arrayAttr(start)),
                              builder.getNamedAttr("limit", arrayAttr(limit)),
                              builder.getNamedAttr("step", arrayAttr(step))});
  }

  /// `v` along `axis` from `begin` to `end` by `step` (the other
  /// dimensions whole).
  FailureOr<Value> sliceAxis(Value v, int64_t axis, int64_t begin, int64_t end,
                             int64_t step = 1) {
    auto t = v.getType().cast<RankedTensorType>();
    SmallVector<int64_t> start(t.getRank(), 0), limit(t.getShape()),
        steps(t.getRank(), 1);
    start[axis] = begin;
    limit[axis] = end;
    steps[axis] = step;
    return sliceOf(v, start, limit, steps);
  }

  Value broadcastTo(Value v, ArrayRef<int64_t> shape) {
    auto t = v.getType().cast<RankedTensorType>();
    if (t.getShape() == shape)
      return v;
    return builder.create<BroadcastToOp>(
        loc, RankedTensorType::get(shape, t.getElementType()), v);
  }

  /// Pad as the ops it is made of, so it needs no kernel or gradient rule
  /// of its own: for each padded axis one concat of the border pieces and
  /// the tensor (constant: the value broadcast; edge: the edge slice
  /// broadcast; reflect: a reversed slice; wrap: a slice of the other end),
  /// then one slice for negative pads. As ONNX's reference does, positive
  /// pads are applied before negative ones crop.
  LogicalResult pad() {
    std::string mode = stringAttr(node, "mode", "constant");
    if (mode != "constant" && mode != "reflect" && mode != "edge" &&
        mode != "wrap")
      return error(loc) << "Pad's mode must be constant, reflect, edge or "
                           "wrap, got '"
                        << mode << "'";
    const HostTensor *padsInput = requireConstant(1, "pads");
    if (!padsInput)
      return failure();
    int64_t rank = type(0).getRank();
    std::vector<int64_t> axes;
    if (has(3)) {
      const HostTensor *axesInput = requireConstant(3, "axes");
      if (!axesInput)
        return failure();
      for (int64_t a : axesInput->toInts()) {
        auto axis = ::cleave::normalizeAxis(a, rank);
        if (!axis)
          return report(axis.takeError());
        if (llvm::is_contained(axes, *axis))
          return error(loc) << "Pad's axes name axis " << *axis << " twice";
        axes.push_back(*axis);
      }
    } else {
      for (int64_t d = 0; d < rank; ++d)
        axes.push_back(d);
    }
    std::vector<int64_t> pads = padsInput->toInts();
    if (pads.size() != 2 * axes.size())
      return error(loc) << "Pad's pads has " << pads.size()
                        << " values; expected " << 2 * axes.size()
                        << " (a begin and an end for each of the "
                        << axes.size() << " padded axes of " << type(0) << ")";
    SmallVector<int64_t> before(rank, 0), after(rank, 0);
    for (auto [i, axis] : llvm::enumerate(axes)) {
      before[axis] = pads[i];
      after[axis] = pads[i + axes.size()];
    }
    SmallVector<int64_t> padded(shape(0));
    for (int64_t d = 0; d < rank; ++d)
      if (llvm::AddOverflow(padded[d], before[d], padded[d]) ||
          llvm::AddOverflow(padded[d], after[d], padded[d]) || padded[d] < 0)
        return error(loc) << "Pad's pads " << before[d] << " and " << after[d]
                          << " for axis " << d << " of " << type(0)
                          << " give no valid size";
    if (auto e = ::cleave::checkShape("Pad's result", padded))
      return report(std::move(e));
    auto x = value(0);
    if (failed(x))
      return failure();
    Type element = type(0).getElementType();
    SmallVector<int64_t> ones(rank, 1);
    Value fill;
    if (mode == "constant") {
      if (has(2)) {
        if (type(2).getNumElements() != 1)
          return error(loc)
                 << "Pad's constant_value must be one value, got " << type(2);
        if (const HostTensor *c = constant(2)) {
          fill = materialize(c->castTo(dtypeOf(element)), loc);
        } else {
          if (type(2).getElementType() != element)
            return error(loc) << "Pad's constant_value has type " << type(2)
                              << ", but the data has " << type(0);
          auto v = value(2);
          if (failed(v))
            return failure();
          fill = *v;
        }
      } else {
        fill = materialize(HostTensor(dtypeOf(element), {}), loc);
      }
      fill = reshape(fill, ones);
    }

    Value result = *x;
    for (int64_t d = 0; d < rank; ++d) {
      int64_t b = std::max<int64_t>(before[d], 0),
              a = std::max<int64_t>(after[d], 0);
      if (b == 0 && a == 0)
        continue;
      SmallVector<int64_t> shape(
          result.getType().cast<RankedTensorType>().getShape());
      int64_t n = shape[d];
      auto piece = [&](int64_t size, bool atStart) -> FailureOr<Value> {
        SmallVector<int64_t> pieceShape(shape);
        pieceShape[d] = size;
        if (mode == "constant")
          return broadcastTo(fill, pieceShape);
        if (n == 0)
          return error(loc) << "Pad in " << mode << " mode cannot pad axis "
                            << d << " of " << type(0) << ", which is empty";
        if (mode == "edge") {
          auto edge = atStart ? sliceAxis(result, d, 0, 1)
                              : sliceAxis(result, d, n - 1, n);
          if (failed(edge))
            return failure();
          return broadcastTo(*edge, pieceShape);
        }
        if (mode == "reflect") {
          // x[size], ..., x[1] before; x[n-2], ..., x[n-1-size] after.
          if (size > n - 1)
            return error(loc) << "Pad in reflect mode pads axis " << d << " by "
                              << size << ", but a dimension of " << n
                              << " reflects at most " << n - 1;
          return atStart ? sliceAxis(result, d, size, 0, -1)
                         : sliceAxis(result, d, n - 2, n - 2 - size, -1);
        }
        if (size > n)
          return error(loc) << "Pad in wrap mode pads axis " << d << " by "
                            << size << ", more than its size " << n;
        return atStart ? sliceAxis(result, d, n - size, n)
                       : sliceAxis(result, d, 0, size);
      };
      SmallVector<Value> parts;
      if (b) {
        auto p = piece(b, true);
        if (failed(p))
          return failure();
        parts.push_back(*p);
      }
      parts.push_back(result);
      if (a && a == b && mode == "constant") {
        parts.push_back(parts.front()); // the same broadcast value
      } else if (a) {
        auto p = piece(a, false);
        if (failed(p))
          return failure();
        parts.push_back(*p);
      }
      auto joined = inferred<ConcatOp>(loc, parts,
                                       {builder.getNamedAttr("axis", i64(d))});
      if (failed(joined))
        return failure();
      result = *joined;
    }

    bool crop = false;
    SmallVector<int64_t> start(rank, 0),
        limit(result.getType().cast<RankedTensorType>().getShape()),
        step(rank, 1);
    for (int64_t d = 0; d < rank; ++d) {
      if (before[d] >= 0 && after[d] >= 0)
        continue;
      crop = true;
      start[d] = -std::min<int64_t>(before[d], 0);
      limit[d] += std::min<int64_t>(after[d], 0);
      if (limit[d] < start[d])
        return error(loc) << "Pad's pads " << before[d] << " and " << after[d]
                          << " on axis " << d << " of " << type(0)
                          << " leave a negative size";
    }
    if (crop) {
      auto cropped = sliceOf(result, start, limit, step);
      if (failed(cropped))
        return failure();
      result = *cropped;
    }
    out(result);
    return success();
  }

  /// Tile as a broadcast: [.., d, ..] viewed as [.., 1, d, ..], broadcast
  /// to [.., r, d, ..] and viewed as [.., r * d, ..] for every axis repeated
  /// r != 1 times. The broadcast's gradient rule sums the copies.
  LogicalResult tile() {
    const HostTensor *r = requireConstant(1, "repeats");
    auto x = value(0);
    if (!r || failed(x))
      return failure();
    std::vector<int64_t> repeats = r->toInts();
    int64_t rank = type(0).getRank();
    if ((int64_t)repeats.size() != rank)
      return error(loc) << "Tile's repeats has " << repeats.size()
                        << " values for " << type(0) << "; expected " << rank;
    SmallVector<int64_t> viewed, broadcast, tiled;
    for (auto [d, n] : llvm::enumerate(shape(0))) {
      int64_t times = repeats[d];
      if (times < 0)
        return error(loc) << "Tile's repeats must not be negative, got "
                          << times << " for axis " << d;
      int64_t product;
      if (llvm::MulOverflow(times, n, product))
        return error(loc) << "Tile's repeats " << times << " for axis " << d
                          << " of " << type(0) << " overflow 64 bits";
      tiled.push_back(product);
      if (times != 1) {
        viewed.push_back(1);
        broadcast.push_back(times);
      }
      viewed.push_back(n);
      broadcast.push_back(n);
    }
    if (auto e = ::cleave::checkShape("Tile's result", tiled))
      return report(std::move(e));
    if (ArrayRef<int64_t>(tiled) == shape(0)) {
      out(*x);
      return success();
    }
    out(reshape(broadcastTo(reshape(*x, viewed), broadcast), tiled));
    return success();
  }

  LogicalResult gatherElements() {
    auto axis =
        ::cleave::normalizeAxis(intAttr(node, "axis", 0), type(0).getRank());
    if (!axis)
      return report(axis.takeError());
    if (!type(1).getElementType().isInteger(64) &&
        !type(1).getElementType().isInteger(32))
      return error(loc) << "GatherElements' indices must be int32 or int64, "
                           "got "
                        << type(1);
    auto data = value(0), indices = value(1);
    if (failed(data) || failed(indices))
      return failure();
    auto r = inferred<GatherElementsOp>(
        loc, {*data, *indices}, {builder.getNamedAttr("axis", i64(*axis))});
    if (failed(r))
      return failure();
    out(*r);
    return success();
  }

  LogicalResult scatterNd() {
    std::string reduction = stringAttr(node, "reduction", "none");
    if (reduction != "none" && reduction != "add" && reduction != "mul" &&
        reduction != "max" && reduction != "min")
      return error(loc) << "ScatterND's reduction must be none, add, mul, "
                           "max or min, got '"
                        << reduction << "'";
    if (!type(1).getElementType().isInteger(64) &&
        !type(1).getElementType().isInteger(32))
      return error(loc) << "ScatterND's indices must be int32 or int64, got "
                        << type(1);
    auto data = value(0), indices = value(1);
    auto updates = binaryOperands(0, 2);
    if (failed(data) || failed(indices) || failed(updates))
      return failure();
    auto r = builder.create<ScatterNdOp>(loc, type(0), *data, *indices,
                                         updates->second,
                                         builder.getStringAttr(reduction));
    if (failed(mlir::verify(r))) {
      r->erase();
      return failure();
    }
    out(r);
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
  table["GatherElements"] = [](NodeImport &n) {
    return Movement(n).gatherElements();
  };
  table["ScatterND"] = [](NodeImport &n) { return Movement(n).scatterNd(); };
  table["Pad"] = [](NodeImport &n) { return Movement(n).pad(); };
  table["Tile"] = [](NodeImport &n) { return Movement(n).tile(); };
}
