//===- ConstantFolding.cpp - host evaluation of ONNX nodes ---------------===//
//
// Only the ops that traced exports use to compute shapes, masks, positions
// and scales. Floating point is evaluated in double and rounded to the
// tensor's precision after each op, as PyTorch would compute it.
//
//===----------------------------------------------------------------------===//

#include "frontend/ConstantFolding.h"
#include "frontend/OnnxShapes.h"
#include "ir/CleaveOps.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <functional>

using namespace cleave;
using llvm::Expected;

static llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

namespace {

enum class Unary { Neg, Abs, Sqrt, Reciprocal, Exp, Log, Sin, Cos, Tanh,
                   Sigmoid, Erf, Floor, Ceil, Relu, Not };
enum class Binary { Add, Sub, Mul, Div, Pow, Max, Min, Mod, Equal, Less,
                    Greater, LessOrEqual, GreaterOrEqual, And, Or };

std::optional<Unary> unaryOp(llvm::StringRef op) {
  return llvm::StringSwitch<std::optional<Unary>>(op)
      .Case("Neg", Unary::Neg).Case("Abs", Unary::Abs)
      .Case("Sqrt", Unary::Sqrt).Case("Reciprocal", Unary::Reciprocal)
      .Case("Exp", Unary::Exp).Case("Log", Unary::Log)
      .Case("Sin", Unary::Sin).Case("Cos", Unary::Cos)
      .Case("Tanh", Unary::Tanh).Case("Sigmoid", Unary::Sigmoid)
      .Case("Erf", Unary::Erf).Case("Floor", Unary::Floor)
      .Case("Ceil", Unary::Ceil).Case("Relu", Unary::Relu)
      .Case("Not", Unary::Not)
      .Default(std::nullopt);
}

std::optional<Binary> binaryOp(llvm::StringRef op) {
  return llvm::StringSwitch<std::optional<Binary>>(op)
      .Case("Add", Binary::Add).Case("Sub", Binary::Sub)
      .Case("Mul", Binary::Mul).Case("Div", Binary::Div)
      .Case("Pow", Binary::Pow).Case("Max", Binary::Max)
      .Case("Min", Binary::Min).Case("Mod", Binary::Mod)
      .Case("Equal", Binary::Equal).Case("Less", Binary::Less)
      .Case("Greater", Binary::Greater)
      .Case("LessOrEqual", Binary::LessOrEqual)
      .Case("GreaterOrEqual", Binary::GreaterOrEqual)
      .Case("And", Binary::And).Case("Or", Binary::Or)
      .Default(std::nullopt);
}

bool isComparison(Binary op) {
  return op == Binary::Equal || op == Binary::Less || op == Binary::Greater ||
         op == Binary::LessOrEqual || op == Binary::GreaterOrEqual;
}

/// For every element of `outShape`, the flat index into a tensor of shape
/// `inShape` that numpy broadcasting reads.
std::vector<int64_t> broadcastIndex(llvm::ArrayRef<int64_t> inShape,
                                    llvm::ArrayRef<int64_t> outShape) {
  int64_t n = 1;
  for (int64_t d : outShape)
    n *= d;
  auto inStrides = stridesOf(inShape);
  size_t offset = outShape.size() - inShape.size();
  std::vector<int64_t> index(n);
  Shape pos(outShape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t flat = 0;
    for (size_t d = 0; d < inShape.size(); ++d)
      if (inShape[d] != 1)
        flat += pos[d + offset] * inStrides[d];
    index[i] = flat;
    for (int64_t d = (int64_t)outShape.size() - 1; d >= 0; --d) {
      if (++pos[d] < outShape[d])
        break;
      pos[d] = 0;
    }
  }
  return index;
}

Expected<Shape> broadcast(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b,
                          int64_t limitBytes) {
  auto r = mlir::cleave::broadcastShapes(a, b);
  if (mlir::failed(r))
    return fail("shapes " + shapeToString(a) + " and " + shapeToString(b) +
                " do not broadcast");
  if (auto e = checkHostTensorSize(*r, limitBytes))
    return std::move(e);
  return Shape(r->begin(), r->end());
}

double applyUnary(Unary op, double x) {
  switch (op) {
  case Unary::Neg: return -x;
  case Unary::Abs: return std::fabs(x);
  case Unary::Sqrt: return std::sqrt(x);
  case Unary::Reciprocal: return 1.0 / x;
  case Unary::Exp: return std::exp(x);
  case Unary::Log: return std::log(x);
  case Unary::Sin: return std::sin(x);
  case Unary::Cos: return std::cos(x);
  case Unary::Tanh: return std::tanh(x);
  case Unary::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
  case Unary::Erf: return std::erf(x);
  case Unary::Floor: return std::floor(x);
  case Unary::Ceil: return std::ceil(x);
  case Unary::Relu: return x > 0 ? x : 0;
  case Unary::Not: return x == 0;
  }
  return x;
}

double applyFloat(Binary op, double a, double b) {
  switch (op) {
  case Binary::Add: return a + b;
  case Binary::Sub: return a - b;
  case Binary::Mul: return a * b;
  case Binary::Div: return a / b;
  case Binary::Pow: return std::pow(a, b);
  case Binary::Max: return std::max(a, b);
  case Binary::Min: return std::min(a, b);
  case Binary::Mod: return std::fmod(a, b);
  case Binary::Equal: return a == b;
  case Binary::Less: return a < b;
  case Binary::Greater: return a > b;
  case Binary::LessOrEqual: return a <= b;
  case Binary::GreaterOrEqual: return a >= b;
  case Binary::And: return a != 0 && b != 0;
  case Binary::Or: return a != 0 || b != 0;
  }
  return 0;
}

/// Two's-complement arithmetic, as ONNX runtimes and numpy compute int64
/// (signed overflow is undefined in C++).
int64_t wrap(uint64_t v) { return static_cast<int64_t>(v); }

Expected<int64_t> applyInt(Binary op, int64_t a, int64_t b) {
  switch (op) {
  case Binary::Add: return wrap(uint64_t(a) + uint64_t(b));
  case Binary::Sub: return wrap(uint64_t(a) - uint64_t(b));
  case Binary::Mul: return wrap(uint64_t(a) * uint64_t(b));
  case Binary::Div:
    if (b == 0)
      return fail("integer division by zero");
    if (b == -1)
      return wrap(0 - uint64_t(a)); // INT64_MIN / -1 wraps
    return a / b;
  case Binary::Mod: {
    if (b == 0)
      return fail("integer modulo by zero");
    if (b == -1)
      return int64_t(0);
    int64_t r = a % b; // ONNX Mod with fmod=0 takes the divisor's sign
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
  }
  case Binary::Pow: {
    if (b < 0)
      return fail(llvm::formatv("integer {0} to the negative power {1}", a, b));
    uint64_t r = 1, base = uint64_t(a);
    for (uint64_t e = uint64_t(b); e; e >>= 1, base *= base)
      if (e & 1)
        r *= base;
    return wrap(r);
  }
  default:
    return static_cast<int64_t>(applyFloat(op, a, b));
  }
}

Expected<HostTensor> foldBinary(Binary op, const HostTensor &a,
                                const HostTensor &b, int64_t limitBytes) {
  auto shape = broadcast(a.shape(), b.shape(), limitBytes);
  if (!shape)
    return shape.takeError();
  bool floating = a.isFloating() || b.isFloating();
  DType resultType = isComparison(op) ? DType::Bool
                     : (op == Binary::Pow || a.isFloating()) ? a.dtype()
                                                             : b.dtype();
  if (op == Binary::And || op == Binary::Or)
    resultType = DType::Bool;
  HostTensor out(resultType, *shape);
  auto ia = broadcastIndex(a.shape(), *shape);
  auto ib = broadcastIndex(b.shape(), *shape);
  for (int64_t i = 0; i < out.numElements(); ++i) {
    if (floating) {
      out.setDouble(i, applyFloat(op, a.getDouble(ia[i]), b.getDouble(ib[i])));
      continue;
    }
    auto v = applyInt(op, a.getInt(ia[i]), b.getInt(ib[i]));
    if (!v)
      return v.takeError();
    out.setInt(i, *v);
  }
  return out;
}

/// Copies `in` into a tensor of `outShape` reading element `index[i]`.
HostTensor gatherElements(const HostTensor &in, llvm::ArrayRef<int64_t> outShape,
                          llvm::ArrayRef<int64_t> index) {
  HostTensor out(in.dtype(), outShape);
  for (int64_t i = 0; i < out.numElements(); ++i) {
    if (in.isFloating())
      out.setDouble(i, in.getDouble(index[i]));
    else
      out.setInt(i, in.getInt(index[i]));
  }
  return out;
}

Expected<HostTensor> foldTranspose(const HostTensor &in,
                                   std::vector<int64_t> perm) {
  int64_t rank = in.rank();
  if (perm.empty())
    for (int64_t d = rank - 1; d >= 0; --d)
      perm.push_back(d);
  if ((int64_t)perm.size() != rank)
    return fail(llvm::formatv("perm has {0} entries for rank {1}", perm.size(),
                              rank));
  Shape outShape;
  for (int64_t p : perm) {
    if (p < 0 || p >= rank)
      return fail("perm is not a permutation");
    outShape.push_back(in.shape()[p]);
  }
  auto inStrides = stridesOf(in.shape());
  std::vector<int64_t> index;
  Shape pos(rank, 0);
  int64_t n = in.numElements();
  for (int64_t i = 0; i < n; ++i) {
    int64_t flat = 0;
    for (int64_t d = 0; d < rank; ++d)
      flat += pos[d] * inStrides[perm[d]];
    index.push_back(flat);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++pos[d] < outShape[d])
        break;
      pos[d] = 0;
    }
  }
  return gatherElements(in, outShape, index);
}

HostTensor foldSlice(const HostTensor &in, const SliceBounds &b) {
  auto inStrides = stridesOf(in.shape());
  int64_t rank = in.rank();
  int64_t n = 1;
  for (int64_t d : b.resultShape)
    n *= d;
  std::vector<int64_t> index;
  Shape pos(rank, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t flat = 0;
    for (int64_t d = 0; d < rank; ++d)
      flat += (b.start[d] + pos[d] * b.step[d]) * inStrides[d];
    index.push_back(flat);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++pos[d] < b.resultShape[d])
        break;
      pos[d] = 0;
    }
  }
  return gatherElements(in, b.resultShape, index);
}

Expected<HostTensor> foldGather(const HostTensor &data,
                                const HostTensor &indices, int64_t axisAttr,
                                int64_t limitBytes) {
  auto axis = normalizeAxis(axisAttr, data.rank());
  if (!axis)
    return axis.takeError();
  int64_t dim = data.shape()[*axis];
  Shape outShape(data.shape().take_front(*axis));
  outShape.append(indices.shape().begin(), indices.shape().end());
  outShape.append(data.shape().begin() + *axis + 1, data.shape().end());
  if (auto e = checkHostTensorSize(outShape, limitBytes))
    return std::move(e);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < *axis; ++d)
    outer *= data.shape()[d];
  for (int64_t d = *axis + 1; d < data.rank(); ++d)
    inner *= data.shape()[d];
  std::vector<int64_t> index;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < indices.numElements(); ++j) {
      int64_t k = indices.getInt(j);
      if (k < -dim || k >= dim)
        return fail(llvm::formatv("gather index {0} is out of range for a "
                                  "dimension of size {1}",
                                  k, dim));
      if (k < 0)
        k += dim;
      for (int64_t i = 0; i < inner; ++i)
        index.push_back((o * dim + k) * inner + i);
    }
  return gatherElements(data, outShape, index);
}

Expected<HostTensor> foldConcat(llvm::ArrayRef<const HostTensor *> inputs,
                                int64_t axisAttr, int64_t limitBytes) {
  if (inputs.empty())
    return fail("Concat has no inputs");
  const HostTensor &first = *inputs[0];
  auto axis = normalizeAxis(axisAttr, first.rank());
  if (!axis)
    return axis.takeError();
  Shape outShape(first.shape());
  outShape[*axis] = 0;
  for (const HostTensor *t : inputs) {
    if (t->rank() != first.rank())
      return fail("Concat inputs have different ranks");
    for (int64_t d = 0; d < t->rank(); ++d)
      if (d != *axis && t->shape()[d] != first.shape()[d])
        return fail("Concat inputs " + shapeToString(first.shape()) + " and " +
                    shapeToString(t->shape()) + " differ outside the axis");
    outShape[*axis] += t->shape()[*axis];
  }
  int64_t outer = 1;
  for (int64_t d = 0; d < *axis; ++d)
    outer *= outShape[d];
  if (auto e = checkHostTensorSize(outShape, limitBytes))
    return std::move(e);
  HostTensor out(first.dtype(), outShape);
  int64_t k = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (const HostTensor *t : inputs) {
      int64_t chunk = t->numElements() / std::max<int64_t>(outer, 1);
      for (int64_t i = 0; i < chunk; ++i, ++k) {
        int64_t src = o * chunk + i;
        if (out.isFloating())
          out.setDouble(k, t->getDouble(src));
        else
          out.setInt(k, t->getInt(src));
      }
    }
  return out;
}

} // namespace

std::vector<int64_t> cleave::axesOf(const onnx::NodeProto &node,
                                    const HostTensor *axesInput, int64_t opset,
                                    int64_t sinceOpset) {
  if (opset >= sinceOpset)
    return axesInput ? axesInput->toInts() : std::vector<int64_t>{};
  return intsAttr(node, "axes");
}

Expected<HostTensor> cleave::constantValue(const onnx::NodeProto &node,
                                           llvm::StringRef modelDir) {
  for (const auto &attr : node.attribute()) {
    const std::string &name = attr.name();
    if (name == "value")
      return decodeTensor(attr.t(), modelDir);
    if (name == "value_float") {
      HostTensor t(DType::F32, {});
      t.setDouble(0, attr.f());
      return t;
    }
    if (name == "value_floats") {
      HostTensor t(DType::F32, {attr.floats_size()});
      for (int i = 0; i < attr.floats_size(); ++i)
        t.setDouble(i, attr.floats(i));
      return t;
    }
    if (name == "value_int")
      return HostTensor::scalarInt(attr.i());
    if (name == "value_ints")
      return HostTensor::ints(
          std::vector<int64_t>(attr.ints().begin(), attr.ints().end()));
  }
  return fail("Constant has no supported value attribute (value, "
              "value_float(s), value_int(s))");
}

bool cleave::isFoldable(llvm::StringRef op) {
  return unaryOp(op) || binaryOp(op) ||
         llvm::StringSwitch<bool>(op)
             .Cases("Identity", "Cast", "Reshape", "Flatten", "Squeeze",
                    "Unsqueeze", true)
             .Cases("Concat", "Gather", "Slice", "Transpose", "Expand", true)
             .Cases("ConstantOfShape", "Range", "Trilu", "Where", "Split", true)
             .Cases("Constant", "Dropout", true)
             .Default(false);
}

Expected<std::vector<HostTensor>>
cleave::foldNode(const onnx::NodeProto &node,
                 llvm::ArrayRef<const HostTensor *> inputs, int64_t opset,
                 llvm::StringRef modelDir, int64_t limitBytes) {
  llvm::StringRef op = node.op_type();
  auto in = [&](size_t i) -> const HostTensor * {
    return i < inputs.size() ? inputs[i] : nullptr;
  };
  auto one = [](Expected<HostTensor> t) -> Expected<std::vector<HostTensor>> {
    if (!t)
      return t.takeError();
    return std::vector<HostTensor>{std::move(*t)};
  };
  auto need = [&](size_t count) -> llvm::Error {
    for (size_t i = 0; i < count; ++i)
      if (!in(i))
        return fail(llvm::formatv("{0} needs input {1}", op, i));
    return llvm::Error::success();
  };

  if (op == "Constant")
    return one(constantValue(node, modelDir));
  if (op == "ConstantOfShape") {
    if (auto e = need(1))
      return std::move(e);
    auto dims = in(0)->toInts();
    for (int64_t d : dims)
      if (d < 0)
        return fail("ConstantOfShape with a negative dimension");
    if (auto e = checkHostTensorSize(dims, limitBytes))
      return std::move(e);
    HostTensor fill(DType::F32, {});
    if (const auto *attr = findAttr(node, "value")) {
      auto v = decodeTensor(attr->t(), modelDir);
      if (!v)
        return v.takeError();
      fill = *v;
    }
    if (fill.numElements() != 1)
      return fail("ConstantOfShape value must have one element");
    HostTensor out(fill.dtype(), Shape(dims.begin(), dims.end()));
    for (int64_t i = 0; i < out.numElements(); ++i)
      out.setDouble(i, fill.getDouble(0));
    if (!out.isFloating())
      for (int64_t i = 0; i < out.numElements(); ++i)
        out.setInt(i, fill.getInt(0));
    return std::vector<HostTensor>{out};
  }
  if (auto e = need(op == "Concat" ? inputs.size() : 1))
    return std::move(e);
  const HostTensor &x = *in(0);

  if (auto u = unaryOp(op)) {
    HostTensor out(*u == Unary::Not ? DType::Bool : x.dtype(), x.shape());
    for (int64_t i = 0; i < out.numElements(); ++i) {
      if (!x.isFloating() && (*u == Unary::Neg || *u == Unary::Abs ||
                              *u == Unary::Relu || *u == Unary::Not))
        out.setInt(i, static_cast<int64_t>(applyUnary(*u, x.getInt(i))));
      else
        out.setDouble(i, applyUnary(*u, x.getDouble(i)));
    }
    return std::vector<HostTensor>{out};
  }
  if (auto b = binaryOp(op)) {
    // Max and Min are variadic in ONNX.
    auto acc = x;
    for (size_t i = 1; i < inputs.size(); ++i) {
      if (!in(i))
        return fail(llvm::formatv("{0} needs input {1}", op, i));
      auto r = foldBinary(*b, acc, *in(i), limitBytes);
      if (!r)
        return r.takeError();
      acc = std::move(*r);
    }
    if (inputs.size() < 2 && *b != Binary::Max && *b != Binary::Min)
      return fail(op + " needs two inputs");
    return std::vector<HostTensor>{acc};
  }
  if (op == "Dropout" && in(2) && in(2)->getInt(0) &&
      (!in(1) || in(1)->getDouble(0) != 0))
    return fail("Dropout in training mode draws its mask at run time; its "
                "input cannot be a constant");
  if (op == "Identity" || op == "Dropout")
    return std::vector<HostTensor>{x};
  if (op == "Cast")
    return std::vector<HostTensor>{
        x.castTo(static_cast<DType>(intAttr(node, "to", 1)))};
  if (op == "Reshape") {
    if (auto e = need(2))
      return std::move(e);
    auto shape = reshapeTarget(x.shape(), in(1)->toInts(),
                               intAttr(node, "allowzero", 0));
    if (!shape)
      return shape.takeError();
    return std::vector<HostTensor>{x.reshaped(*shape)};
  }
  if (op == "Flatten") {
    auto shape = flattenShape(x.shape(), intAttr(node, "axis", 1));
    if (!shape)
      return shape.takeError();
    return std::vector<HostTensor>{x.reshaped(*shape)};
  }
  if (op == "Unsqueeze" || op == "Squeeze") {
    auto axes = axesOf(node, in(1), opset, 13);
    auto shape = op == "Unsqueeze" ? unsqueezeShape(x.shape(), axes)
                                   : squeezeShape(x.shape(), axes);
    if (!shape)
      return shape.takeError();
    return std::vector<HostTensor>{x.reshaped(*shape)};
  }
  if (op == "Concat")
    return one(foldConcat(inputs, intAttr(node, "axis", 0), limitBytes));
  if (op == "Gather") {
    if (auto e = need(2))
      return std::move(e);
    return one(foldGather(x, *in(1), intAttr(node, "axis", 0), limitBytes));
  }
  if (op == "Transpose")
    return one(foldTranspose(x, intsAttr(node, "perm")));
  if (op == "Slice") {
    std::vector<int64_t> starts, ends, axes, steps;
    if (opset >= 10) {
      if (auto e = need(3))
        return std::move(e);
      starts = in(1)->toInts();
      ends = in(2)->toInts();
      if (in(3))
        axes = in(3)->toInts();
      if (in(4))
        steps = in(4)->toInts();
    } else {
      starts = intsAttr(node, "starts");
      ends = intsAttr(node, "ends");
      axes = intsAttr(node, "axes");
    }
    auto bounds = sliceBounds(x.shape(), starts, ends, axes, steps);
    if (!bounds)
      return bounds.takeError();
    return std::vector<HostTensor>{foldSlice(x, *bounds)};
  }
  if (op == "Split") {
    auto axis = normalizeAxis(intAttr(node, "axis", 0), x.rank());
    if (!axis)
      return axis.takeError();
    std::vector<int64_t> split =
        opset >= 13 ? (in(1) ? in(1)->toInts() : std::vector<int64_t>{})
                    : intsAttr(node, "split");
    auto sizes = splitSizes(x.shape()[*axis], split,
                            intAttr(node, "num_outputs", node.output_size()));
    if (!sizes)
      return sizes.takeError();
    std::vector<HostTensor> outs;
    int64_t offset = 0;
    for (int64_t size : *sizes) {
      auto bounds = sliceBounds(x.shape(), {offset}, {offset + size}, {*axis},
                                {});
      if (!bounds)
        return bounds.takeError();
      outs.push_back(foldSlice(x, *bounds));
      offset += size;
    }
    return outs;
  }
  if (op == "Expand") {
    if (auto e = need(2))
      return std::move(e);
    auto dims = in(1)->toInts();
    auto shape = broadcast(x.shape(), dims, limitBytes);
    if (!shape)
      return shape.takeError();
    return std::vector<HostTensor>{
        gatherElements(x, *shape, broadcastIndex(x.shape(), *shape))};
  }
  if (op == "Where") {
    if (auto e = need(3))
      return std::move(e);
    auto s1 = broadcast(x.shape(), in(1)->shape(), limitBytes);
    if (!s1)
      return s1.takeError();
    auto shape = broadcast(*s1, in(2)->shape(), limitBytes);
    if (!shape)
      return shape.takeError();
    auto ic = broadcastIndex(x.shape(), *shape);
    auto ia = broadcastIndex(in(1)->shape(), *shape);
    auto ib = broadcastIndex(in(2)->shape(), *shape);
    HostTensor out(in(1)->dtype(), *shape);
    for (int64_t i = 0; i < out.numElements(); ++i) {
      const HostTensor &src = x.getInt(ic[i]) ? *in(1) : *in(2);
      int64_t j = x.getInt(ic[i]) ? ia[i] : ib[i];
      if (out.isFloating())
        out.setDouble(i, src.getDouble(j));
      else
        out.setInt(i, src.getInt(j));
    }
    return std::vector<HostTensor>{out};
  }
  if (op == "Range") {
    if (auto e = need(3))
      return std::move(e);
    double start = x.getDouble(0), limit = in(1)->getDouble(0),
           delta = in(2)->getDouble(0);
    if (delta == 0)
      return fail("Range with delta 0");
    double count = std::ceil((limit - start) / delta);
    // Checked as a double first: casting a count past 2^63 (or NaN) to
    // int64 is undefined.
    if (!(count < 0x1p62))
      return fail(llvm::formatv("Range from {0} to {1} by {2} has too many "
                                "elements",
                                start, limit, delta));
    int64_t n = std::max<int64_t>(0, static_cast<int64_t>(count));
    if (auto e = checkHostTensorSize({n}, limitBytes))
      return std::move(e);
    HostTensor out(x.dtype(), {n});
    for (int64_t i = 0; i < n; ++i) {
      if (out.isFloating())
        out.setDouble(i, start + i * delta);
      else
        out.setInt(i, x.getInt(0) + i * in(2)->getInt(0));
    }
    return std::vector<HostTensor>{out};
  }
  if (op == "Trilu") {
    if (x.rank() < 2)
      return fail("Trilu needs rank 2 or more");
    int64_t k = in(1) ? in(1)->getInt(0) : 0;
    bool upper = intAttr(node, "upper", 1);
    int64_t rows = x.shape()[x.rank() - 2], cols = x.shape()[x.rank() - 1];
    HostTensor out = x;
    for (int64_t i = 0; i < out.numElements(); ++i) {
      int64_t r = (i / cols) % rows, c = i % cols;
      bool keep = upper ? c - r >= k : c - r <= k;
      if (!keep)
        out.setInt(i, 0);
    }
    return std::vector<HostTensor>{out};
  }
  return fail("no host evaluation for " + op);
}
