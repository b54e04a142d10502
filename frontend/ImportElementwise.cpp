//===- ImportElementwise.cpp - ONNX elementwise ops to cleave IR ----------===//
//
// Arithmetic, comparisons, logic, activations, Cast and Where: ops that
// map one element to one element (with numpy broadcasting).
//
//===----------------------------------------------------------------------===//

#include "frontend/ImportNode.h"
#include "frontend/OnnxImporter.h"
#include "frontend/OnnxShapes.h"
#include "ir/CleaveOps.h"

#include <sstream>

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

struct Elementwise : NodeImport {
  Elementwise(const NodeImport &n) : NodeImport(n) {}

  /// The exponent may have another element type than the base (T and T1 in
  /// the spec); the result has the base's.
  LogicalResult pow() {
    // The exponent may have another element type than the base (T and T1 in
    // the spec); the result has the base's.
    if (node.input_size() < 2)
      return error(loc) << "Pow needs two inputs";
    Type baseType = type(0).getElementType(),
         expType = type(1).getElementType();
    auto base = value(0);
    if (failed(base))
      return failure();
    FailureOr<Value> r;
    if (!baseType.isa<FloatType>() && expType.isa<FloatType>()) {
      // An integer to a floating-point power is computed in floating point
      // (as numpy does) and truncated back.
      auto exponent = value(1);
      if (failed(exponent))
        return failure();
      r = inferred<PowOp>(loc, {cast(*base, expType), *exponent});
      if (succeeded(r))
        r = cast(*r, baseType);
    } else {
      const HostTensor *c = constant(1);
      auto exponent =
          c ? FailureOr<Value>(materialize(c->castTo(dtypeOf(baseType)), loc))
            : value(1);
      if (failed(exponent))
        return failure();
      r = inferred<PowOp>(loc, {*base, cast(*exponent, baseType)});
    }
    if (failed(r))
      return failure();
    out(*r);
    return success();
  }

  /// Broadcasting binary ops; Max and Min are variadic.
  LogicalResult binaryOp() {
    static const llvm::StringMap<int> binaryKinds = {{"Add", 0},
                                                     {"Sub", 1},
                                                     {"Mul", 2},
                                                     {"Div", 3},
                                                     {"Max", 5},
                                                     {"Min", 6},
                                                     {"And", 7},
                                                     {"Or", 8},
                                                     {"Equal", 9},
                                                     {"Less", 10},
                                                     {"LessOrEqual", 11},
                                                     {"Greater", 12},
                                                     {"GreaterOrEqual", 13}};
    auto binary = binaryKinds.find(op);
    auto build = [&](Value a, Value b) -> FailureOr<Value> {
      switch (binary->second) {
      case 0:
        return inferred<AddOp>(loc, {a, b});
      case 1:
        return inferred<SubOp>(loc, {a, b});
      case 2:
        return inferred<MulOp>(loc, {a, b});
      case 3:
        return inferred<DivOp>(loc, {a, b});
      case 5:
        return inferred<MaxOp>(loc, {a, b});
      case 6:
        return inferred<MinOp>(loc, {a, b});
      case 7:
        return inferred<AndOp>(loc, {a, b});
      case 8:
        return inferred<OrOp>(loc, {a, b});
      case 9:
        return inferred<EqualOp>(loc, {a, b});
      case 10:
        return inferred<LessOp>(loc, {a, b});
      case 11:
        return inferred<LessEqualOp>(loc, {a, b});
      case 12:
        return inferred<GreaterOp>(loc, {a, b});
      default:
        return inferred<GreaterEqualOp>(loc, {a, b});
      }
    };
    if (node.input_size() < 2 && op != "Max" && op != "Min")
      return error(loc) << op << " needs two inputs";
    if (node.input_size() == 1) {
      auto v = value(0);
      if (failed(v))
        return failure();
      out(*v);
      return success();
    }
    auto operands = binaryOperands(0, 1);
    if (failed(operands))
      return failure();
    auto result = build(operands->first, operands->second);
    // Max and Min are variadic.
    for (int i = 2; succeeded(result) && i < node.input_size(); ++i) {
      auto next = value(i);
      if (failed(next))
        return failure();
      result = build(*result, *next);
    }
    if (failed(result))
      return failure();
    out(*result);
    return success();
  }

  LogicalResult unaryOp() {
    static const llvm::StringMap<int> unaryKinds = {
        {"Neg", 0},  {"Abs", 1},       {"Relu", 2},     {"Not", 3},
        {"Exp", 4},  {"Log", 5},       {"Sqrt", 6},     {"Reciprocal", 7},
        {"Tanh", 8}, {"Erf", 9},       {"Sigmoid", 10}, {"Sin", 11},
        {"Cos", 12}, {"Identity", 13}, {"Dropout", 14}, {"Gelu", 15}};
    auto unary = unaryKinds.find(op);
    auto x = value(0);
    if (failed(x))
      return failure();
    bool isFloatOp = unary->second >= 4 && unary->second <= 12;
    if (isFloatOp && !type(0).getElementType().isa<FloatType>())
      return error(loc) << op << " needs a floating-point input, got "
                        << type(0);
    if (unary->second == 3 && !type(0).getElementType().isInteger(1))
      return error(loc) << "Not needs a bool input, got " << type(0);
    Value r;
    switch (unary->second) {
    case 0:
      r = builder.create<NegOp>(loc, *x);
      break;
    case 1:
      r = builder.create<AbsOp>(loc, *x);
      break;
    case 2:
      r = builder.create<ReluOp>(loc, *x);
      break;
    case 3:
      r = builder.create<NotOp>(loc, *x);
      break;
    case 4:
      r = builder.create<ExpOp>(loc, *x);
      break;
    case 5:
      r = builder.create<LogOp>(loc, *x);
      break;
    case 6:
      r = builder.create<SqrtOp>(loc, *x);
      break;
    case 7:
      r = builder.create<ReciprocalOp>(loc, *x);
      break;
    case 8:
      r = builder.create<TanhOp>(loc, *x);
      break;
    case 9:
      r = builder.create<ErfOp>(loc, *x);
      break;
    case 10:
      r = builder.create<SigmoidOp>(loc, *x);
      break;
    case 11:
      r = builder.create<SinOp>(loc, *x);
      break;
    case 12:
      r = builder.create<CosOp>(loc, *x);
      break;
    case 13:
      r = *x;
      break;
    case 14: {
      auto dropped = dropout(*x);
      if (failed(dropped))
        return failure();
      r = *dropped;
      break;
    }
    default: {
      std::string approximate = stringAttr(node, "approximate", "none");
      r = builder.create<GeluOp>(loc, *x, builder.getStringAttr(approximate));
      break;
    }
    }
    out(r);
    return success();
  }

  /// Dropout (docs/dropout.md). Opsets 12+ give ratio and training_mode as
  /// inputs; both must be constants. In training mode with a nonzero ratio
  /// it is cleave.dropout, whose mask the runtime draws per element of the
  /// global tensor from a stream named after the node; otherwise (eval
  /// mode, ratio 0, or an opset before 12, where Dropout is inference's)
  /// the identity. The optional mask output is the kept elements: a
  /// dropout of ones, greater than zero.
  FailureOr<Value> dropout(Value x) {
    const HostTensor *ratio = constant(1), *training = constant(2);
    if (has(2) && !training)
      return error(loc) << "Dropout's training_mode is computed at run "
                           "time; Cleave needs a constant (export with "
                           "model.train() or model.eval())";
    if (training && training->numElements() != 1)
      return error(loc) << "Dropout's training_mode must be a scalar, got "
                        << training->numElements() << " elements";
    bool train = opset >= 12 && training && training->getInt(0);
    double p = 0;
    if (train) {
      if (has(1) && !ratio)
        return error(loc) << "Dropout's ratio is computed at run time; "
                             "Cleave needs a constant";
      if (ratio && ratio->numElements() != 1)
        return error(loc) << "Dropout's ratio must be a scalar, got "
                          << ratio->numElements() << " elements";
      p = ratio ? ratio->getDouble(0) : 0.5; // ONNX's default
      if (!(p >= 0 && p < 1)) {
        std::ostringstream got; // -0.5, not -5.000000e-01
        got << p;
        return error(loc) << "Dropout's ratio must be in [0, 1), got "
                          << got.str();
      }
    }
    bool named = node.output_size() > 1 && !node.output(1).empty();
    if (p == 0) {
      // The identity; the mask keeps every element.
      if (named) {
        if (auto e = ::cleave::checkHostTensorSize(shape(0), foldLimit))
          return foldError(std::move(e));
        HostTensor keep(DType::Bool, shape(0));
        for (int64_t i = 0; i < keep.numElements(); ++i)
          keep.setInt(i, 1);
        out(materialize(keep, loc), 1);
      }
      return x;
    }
    auto type = x.getType().cast<RankedTensorType>();
    if (!type.getElementType().isa<FloatType>())
      return error(loc) << "Dropout in training mode needs a floating-point "
                           "input, got "
                        << type;
    if (type.getRank() == 0)
      return error(loc) << "Dropout in training mode needs samples along "
                           "dimension 0, got a scalar";
    std::string stream = node.name();
    if (stream.empty())
      stream = node.output(0); // unique in the graph too
    auto build = [&](Value v) {
      return builder.create<DropoutOp>(
          loc, v.getType(), v, builder.getF64FloatAttr(p),
          builder.getStringAttr(stream), DenseI64ArrayAttr(), ShardingAttr());
    };
    // torch.onnx.export names the mask output, which nothing reads.
    if (named && outputRead(1)) {
      auto ones = builder.create<ConstantOp>(
          loc, DenseElementsAttr::get(type, builder.getFloatAttr(
                                                type.getElementType(), 1.0)));
      auto zero = builder.create<ConstantOp>(
          loc, DenseElementsAttr::get(
                   RankedTensorType::get({}, type.getElementType()),
                   builder.getFloatAttr(type.getElementType(), 0.0)));
      auto mask = inferred<GreaterOp>(loc, {build(ones), zero});
      if (failed(mask))
        return failure();
      out(*mask, 1);
    }
    return build(x).getResult();
  }

  LogicalResult castOp() {
    auto to = elementType(static_cast<DType>(intAttr(node, "to", 1)), loc,
                          "Cast's target");
    auto x = value(0);
    if (failed(to) || failed(x))
      return failure();
    if (type(0).getElementType() == *to)
      out(*x);
    else
      out(builder.create<CastOp>(loc, RankedTensorType::get(shape(0), *to),
                                 *x));
    return success();
  }

  LogicalResult where() {
    auto c = value(0);
    auto operands = binaryOperands(1, 2);
    if (failed(c) || failed(operands))
      return failure();
    if (!type(0).getElementType().isInteger(1))
      return error(loc) << "Where's condition must be bool, got " << type(0);
    auto r = inferred<SelectOp>(loc, {*c, operands->first, operands->second});
    if (failed(r))
      return failure();
    out(*r);
    return success();
  }
};

} // namespace

void ::cleave::registerElementwiseOps(::cleave::OnnxOpTable &table) {
  table["Pow"] = [](NodeImport &n) { return Elementwise(n).pow(); };
  for (const char *op :
       {"Add", "Sub", "Mul", "Div", "Max", "Min", "And", "Or", "Equal", "Less",
        "LessOrEqual", "Greater", "GreaterOrEqual"})
    table[op] = [](NodeImport &n) { return Elementwise(n).binaryOp(); };
  for (const char *op :
       {"Neg", "Abs", "Relu", "Not", "Exp", "Log", "Sqrt", "Reciprocal", "Tanh",
        "Erf", "Sigmoid", "Sin", "Cos", "Identity", "Dropout", "Gelu"})
    table[op] = [](NodeImport &n) { return Elementwise(n).unaryOp(); };
  table["Cast"] = [](NodeImport &n) { return Elementwise(n).castOp(); };
  table["Where"] = [](NodeImport &n) { return Elementwise(n).where(); };
}
