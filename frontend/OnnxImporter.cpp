//===- OnnxImporter.cpp - ONNX graph to cleave IR ------------------------===//
//
// Walks the (topologically sorted) ONNX graph once. Every value is either a
// host constant (initializers that are not parameters, Constant nodes, and
// anything computed only from those) or an SSA value in the function being
// built. Nodes whose inputs are all constants are evaluated on the host;
// the rest become cleave ops. Float initializers of rank one or more are
// trainable parameters unless the model's `cleave.buffers` metadata lists
// them (then they are constants); they are never folded, so their gradients
// exist later. Those that match ImportOptions::frozen stay parameters,
// marked `cleave.frozen`, which autodiff does not differentiate.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxImporter.h"
#include "frontend/ConstantFolding.h"
#include "frontend/OnnxModel.h"
#include "frontend/OnnxShapes.h"
#include "ir/CleaveOps.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/GlobPattern.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"

#include "onnx/defs/schema.h"

#include <cstring>
#include <functional>
#include <limits>
#include <memory>

using namespace mlir;
using namespace mlir::cleave;
using ::cleave::DType;
using ::cleave::HostTensor;
using ::cleave::findAttr;
using ::cleave::floatAttr;
using ::cleave::intAttr;
using ::cleave::intsAttr;
using ::cleave::stringAttr;

namespace {

/// A value of the ONNX graph as the importer holds it.
struct Tensor {
  Value value;                          // an SSA value, or
  std::shared_ptr<HostTensor> constant; // a host constant, or
  std::string param;                    // a parameter not read yet
  RankedTensorType type;
};

class Importer {
public:
  Importer(MLIRContext &context, const onnx::ModelProto &model,
           llvm::StringRef path, const ::cleave::ImportOptions &options)
      : context(context), builder(&context), model(model), path(path),
        modelDir(llvm::sys::path::parent_path(path)), options(options) {
    if (modelDir.empty())
      modelDir = ".";
  }

  FailureOr<OwningOpRef<ModuleOp>> run();

private:
  // Setup.
  LogicalResult readOpset();
  LogicalResult declareInitializers();
  FailureOr<RankedTensorType> inputType(const onnx::ValueInfoProto &info);

  // Per node.
  LogicalResult checkArity(const onnx::NodeProto &node, llvm::StringRef name,
                           Location loc);
  LogicalResult importNode(const onnx::NodeProto &node, int index);
  LogicalResult mapNode(const onnx::NodeProto &node, Location loc);
  LogicalResult weightedLoss(const onnx::NodeProto &node, Location loc);

  // Values.
  FailureOr<Type> elementType(DType dtype, Location loc, llvm::StringRef what);
  FailureOr<Value> valueOf(const Tensor &t, Location loc);
  Value materialize(const HostTensor &t, Location loc);
  void define(const std::string &name, Value v) {
    values[name] = Tensor{v, nullptr, "", v.getType().cast<RankedTensorType>()};
  }
  LogicalResult defineConstant(const std::string &name, HostTensor t,
                               Location loc);
  InFlightDiagnostic error(Location loc) { return emitError(loc); }
  LogicalResult foldError(Location loc, const llvm::Twine &what,
                          llvm::Error e);
  /// A graph input's, output's or initializer's location: its name in the
  /// model file (line 0: not a node).
  Location valueLoc(llvm::StringRef name) {
    return NameLoc::get(builder.getStringAttr(name),
                        FileLineColLoc::get(&context, path, 0, 0));
  }

  template <typename OpTy>
  FailureOr<Value> inferred(Location loc, ArrayRef<Value> operands,
                            const SmallVector<NamedAttribute> &attrs = {}) {
    SmallVector<Type> types;
    auto dict = DictionaryAttr::get(&context, attrs);
    if (failed(OpTy::inferReturnTypes(&context, loc, ValueRange(operands),
                                      dict, {}, types)))
      return failure();
    return builder.create<OpTy>(loc, types, operands, attrs)->getResult(0);
  }

  MLIRContext &context;
  OpBuilder builder;
  const onnx::ModelProto &model;
  std::string path, modelDir;
  const ::cleave::ImportOptions &options;
  int64_t opset = 0;
  ModuleOp module;
  llvm::StringMap<Tensor> values;
  llvm::DenseMap<Attribute, Value> constantCache; // materialize()'s ops
  llvm::StringMap<const onnx::TensorProto *> paramInitializers;
  llvm::StringSet<> declaredParams;
  /// Parameters that match ImportOptions::frozen: declared `cleave.frozen`.
  llvm::StringSet<> frozenParams;
  /// From the `cleave.init` metadata: how the runtime initializes a
  /// parameter that comes without data ("normal:0.02", "zeros", "ones").
  llvm::StringMap<std::string> initSpecs;
  bool shapesOnly = false;
  bool batchBound = false; // a symbolic batch axis took the batch size
  std::optional<int64_t> resolvedBatch; // from options.resolveBatch
  std::optional<int64_t> batchSize() const {
    return resolvedBatch ? resolvedBatch : options.batchSize;
  }
};

std::string nodeName(const onnx::NodeProto &node, int index) {
  if (!node.name().empty())
    return node.name();
  return node.op_type() + "_" + std::to_string(index);
}

/// Binary ONNX ops that map to broadcasting cleave ops.
using BinaryBuilder = std::function<FailureOr<Value>(Location, Value, Value)>;

} // namespace

const std::vector<std::string> &::cleave::supportedOnnxOps() {
  static const std::vector<std::string> ops = {
      "Abs", "Add", "And", "Cast", "Concat", "Constant", "ConstantOfShape",
      "Cos", "Div", "Dropout", "Equal", "Erf", "Exp", "Expand", "Flatten",
      "Gather", "Gelu", "Gemm", "Greater", "GreaterOrEqual", "Identity",
      "LayerNormalization", "Less", "LessOrEqual", "Log", "LogSoftmax",
      "MatMul", "Max", "Min", "Mul", "Neg", "NegativeLogLikelihoodLoss", "Not",
      "Or", "Pow", "Range", "Reciprocal", "ReduceMax", "ReduceMean",
      "ReduceMin", "ReduceSum", "Relu", "Reshape", "Shape", "Sigmoid", "Sin",
      "Size", "Slice", "Softmax", "SoftmaxCrossEntropyLoss", "Split", "Sqrt",
      "Squeeze", "Sub", "Tanh", "Transpose", "Trilu", "Unsqueeze", "Where"};
  return ops;
}

/// A resource key the MLIR parser reads back: a bare identifier
/// ([A-Za-z_][A-Za-z0-9_.$]*). ONNX names such as "onnx::MatMul_12" or
/// "h.0/attn" are spelled with '_' for each other character; the manager
/// adds a suffix where two names collide.
static std::string resourceKey(llvm::StringRef name) {
  std::string key;
  for (char c : name)
    key += llvm::isAlnum(c) || c == '_' || c == '.' || c == '$' ? c : '_';
  if (key.empty() || llvm::isDigit(key[0]))
    key.insert(key.begin(), '_');
  return key;
}

static bool isSupportedOp(llvm::StringRef op) {
  const auto &ops = ::cleave::supportedOnnxOps();
  return std::binary_search(ops.begin(), ops.end(), op.str());
}

FailureOr<Type> Importer::elementType(DType dtype, Location loc,
                                      llvm::StringRef what) {
  switch (dtype) {
  case DType::F32: return Type(builder.getF32Type());
  case DType::F16: return Type(builder.getF16Type());
  case DType::BF16: return Type(builder.getBF16Type());
  case DType::F64: return Type(builder.getF64Type());
  case DType::Bool: return Type(builder.getI1Type());
  case DType::I8: return Type(builder.getI8Type());
  case DType::I16: return Type(builder.getI16Type());
  case DType::I32: return Type(builder.getI32Type());
  case DType::I64: return Type(builder.getI64Type());
  case DType::U8: return Type(builder.getIntegerType(8, false));
  case DType::U16: return Type(builder.getIntegerType(16, false));
  case DType::U32: return Type(builder.getIntegerType(32, false));
  case DType::U64: return Type(builder.getIntegerType(64, false));
  default:
    return error(loc) << what << " has element type " << ::cleave::dtypeName(dtype)
                      << ", which Cleave does not support (supported: float32, "
                         "float16, bfloat16, float64, bool and integers)";
  }
}

auto ::cleave::dtypeOf(mlir::Type type) -> DType {
  if (type.isF32()) return DType::F32;
  if (type.isF16()) return DType::F16;
  if (type.isBF16()) return DType::BF16;
  if (type.isF64()) return DType::F64;
  if (type.isInteger(1)) return DType::Bool;
  if (auto i = type.dyn_cast<IntegerType>()) {
    bool u = i.isUnsigned();
    switch (i.getWidth()) {
    case 8: return u ? DType::U8 : DType::I8;
    case 16: return u ? DType::U16 : DType::I16;
    case 32: return u ? DType::U32 : DType::I32;
    case 64: return u ? DType::U64 : DType::I64;
    }
  }
  return DType::Undefined;
}
using ::cleave::dtypeOf;

Value Importer::materialize(const HostTensor &t, Location loc) {
  Type element = *elementType(t.dtype(), loc, "constant");
  auto type = RankedTensorType::get(t.shape(), element);
  int64_t n = t.numElements();
  DenseElementsAttr attr;
  // Build from a raw buffer: masks of real models have millions of elements.
  if (element.isInteger(1)) {
    std::vector<bool> bits(n);
    for (int64_t i = 0; i < n; ++i)
      bits[i] = t.getInt(i) != 0;
    SmallVector<bool> packed(bits.begin(), bits.end());
    attr = DenseElementsAttr::get(type, ArrayRef<bool>(packed));
  } else if (element.isF32() || element.isF64()) {
    std::vector<char> raw(n * (element.isF32() ? 4 : 8));
    for (int64_t i = 0; i < n; ++i) {
      if (element.isF32()) {
        float f = t.getDouble(i);
        std::memcpy(&raw[4 * i], &f, 4);
      } else {
        double d = t.getDouble(i);
        std::memcpy(&raw[8 * i], &d, 8);
      }
    }
    attr = DenseElementsAttr::getFromRawBuffer(type, raw);
  } else if (auto f = element.dyn_cast<FloatType>()) {
    SmallVector<APFloat> v;
    for (int64_t i = 0; i < n; ++i) {
      bool lost;
      APFloat x(t.getDouble(i));
      x.convert(f.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      v.push_back(x);
    }
    attr = DenseElementsAttr::get(type, v);
  } else {
    int64_t bytes = element.getIntOrFloatBitWidth() / 8;
    std::vector<char> raw(n * bytes);
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = t.getInt(i); // little-endian: the low bytes come first
      std::memcpy(&raw[bytes * i], &v, bytes);
    }
    attr = DenseElementsAttr::getFromRawBuffer(type, raw);
  }
  // One op per distinct value: every block of a traced model folds its own
  // copy of the causal mask and rotary tables, which would otherwise print
  // (and later be planned) once per block. Ops are built in one block in
  // order, so the first one dominates every later use.
  Value &cached = constantCache[attr];
  if (!cached)
    cached = builder.create<ConstantOp>(loc, attr);
  return cached;
}

LogicalResult Importer::defineConstant(const std::string &name, HostTensor t,
                                       Location loc) {
  auto element = elementType(t.dtype(), loc, "value '" + name + "'");
  if (failed(element))
    return failure();
  auto type = RankedTensorType::get(t.shape(), *element);
  values[name] = Tensor{Value(), std::make_shared<HostTensor>(std::move(t)),
                        "", type};
  return success();
}

FailureOr<Value> Importer::valueOf(const Tensor &t, Location loc) {
  if (t.value)
    return t.value;
  if (t.constant)
    return materialize(*t.constant, loc);
  // A parameter: declare it on first use, read it where it is used (so a
  // later pipeline split finds each use next to its consumer).
  if (!declaredParams.contains(t.param)) {
    // Shapes-only exports give parameters as graph inputs: no data.
    const onnx::TensorProto *init = paramInitializers.lookup(t.param);
    llvm::Expected<std::optional<std::vector<char>>> bytes =
        std::optional<std::vector<char>>();
    if (init)
      bytes = ::cleave::readTensorBytes(*init, modelDir);
    if (!bytes) {
      error(loc) << llvm::toString(bytes.takeError());
      return failure();
    }
    // Declared at the end of the module for now; run() moves every
    // parameter before the function once the graph is imported.
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToEnd(module.getBody());
    ElementsAttr value;
    if (*bytes) {
      auto blob = HeapAsmResourceBlob::allocateAndCopyWithAlign(
          ArrayRef<char>(**bytes), alignof(double));
      auto &blobs = DenseResourceElementsHandle::getManagerInterface(&context);
      value = DenseResourceElementsAttr::get(
          t.type, blobs.insert(resourceKey(t.param), std::move(blob)));
    }
    auto paramLoc = NameLoc::get(builder.getStringAttr(t.param));
    auto param = builder.create<ParameterOp>(
        paramLoc, builder.getStringAttr(t.param), TypeAttr::get(t.type), value,
        StringAttr());
    auto initSpec = initSpecs.find(t.param);
    if (initSpec != initSpecs.end())
      param.setInitAttr(builder.getStringAttr(initSpec->second));
    if (frozenParams.contains(t.param))
      param->setAttr("cleave.frozen", builder.getUnitAttr());
    declaredParams.insert(t.param);
  }
  return builder
      .create<GetParamOp>(loc, t.type,
                          FlatSymbolRefAttr::get(&context, t.param))
      .getResult();
}

LogicalResult Importer::readOpset() {
  for (const auto &entry : model.opset_import())
    if (entry.domain().empty() || entry.domain() == "ai.onnx")
      opset = entry.version();
  if (opset == 0)
    return emitError(FileLineColLoc::get(&context, path, 0, 0))
           << "the model imports no default-domain (ai.onnx) opset";
  // Older opsets give some ops other meanings (Softmax's axis, Squeeze's and
  // ReduceSum's axes as attributes), so they are refused, not guessed at.
  if (opset < 13 || opset > 21)
    return emitError(FileLineColLoc::get(&context, path, 0, 0))
           << "the model uses opset " << opset << "; Cleave reads opsets "
           << "13 to 21: export again with torch.onnx.export(..., "
           << "opset_version=17)";
  return success();
}

LogicalResult Importer::declareInitializers() {
  llvm::StringSet<> buffers;
  for (const auto &prop : model.metadata_props()) {
    if (prop.key() == "cleave.shapes_only")
      shapesOnly = prop.value() == "1" || prop.value() == "true";
    if (prop.key() == "cleave.init") {
      auto parsed = llvm::json::parse(prop.value());
      if (!parsed)
        return emitError(FileLineColLoc::get(&context, path, 0, 0))
               << "metadata cleave.init is not valid JSON: "
               << llvm::toString(parsed.takeError());
      if (auto *object = parsed->getAsObject())
        for (const auto &entry : *object) {
          const auto *spec = entry.second.getAsArray();
          if (!spec || spec->empty() || !(*spec)[0].getAsString())
            continue;
          std::string text = (*spec)[0].getAsString()->str();
          if (spec->size() > 1 && (*spec)[1].getAsNumber() && text == "normal") {
            char number[32];
            std::snprintf(number, sizeof(number), ":%.9g",
                          *(*spec)[1].getAsNumber());
            text += number;
          }
          initSpecs[entry.first.str()] = text;
        }
    }
  }
  for (const auto &prop : model.metadata_props())
    if (prop.key() == "cleave.buffers") {
      llvm::SmallVector<llvm::StringRef> names;
      llvm::StringRef(prop.value()).split(names, ',', -1, false);
      for (auto n : names)
        buffers.insert(n.trim());
    }
  SmallVector<llvm::GlobPattern> frozen;
  SmallVector<bool> frozenUsed(options.frozen.size(), false);
  for (const std::string &pattern : options.frozen) {
    auto glob = llvm::GlobPattern::create(pattern);
    if (!glob)
      return emitError(FileLineColLoc::get(&context, path, 0, 0))
             << "spec key 'frozen_parameters': bad pattern '" << pattern
             << "': " << llvm::toString(glob.takeError());
    frozen.push_back(std::move(*glob));
  }
  auto isFrozen = [&](StringRef name) {
    bool any = false;
    for (auto [i, glob] : llvm::enumerate(frozen))
      if (glob.match(name))
        any = frozenUsed[i] = true;
    return any;
  };
  for (const auto &init : model.graph().initializer()) {
    DType dtype = static_cast<DType>(init.data_type());
    auto loc = valueLoc(init.name());
    auto element = elementType(dtype, loc, "initializer '" + init.name() + "'");
    if (failed(element))
      return failure();
    SmallVector<int64_t> shape(init.dims().begin(), init.dims().end());
    auto type = RankedTensorType::get(shape, *element);
    bool trainable = ::cleave::isFloat(dtype) && !shape.empty() &&
                     !buffers.contains(init.name());
    if (trainable) {
      if (isFrozen(init.name()))
        frozenParams.insert(init.name());
      paramInitializers[init.name()] = &init;
      values[init.name()] = Tensor{Value(), nullptr, init.name(), type};
      continue;
    }
    auto t = ::cleave::decodeTensor(init, modelDir);
    if (!t)
      return error(loc) << llvm::toString(t.takeError());
    if (failed(defineConstant(init.name(), std::move(*t), loc)))
      return failure();
  }
  for (auto [i, used] : llvm::enumerate(frozenUsed)) {
    if (used)
      continue;
    std::string some;
    int shown = 0;
    for (const auto &init : model.graph().initializer())
      if (paramInitializers.count(init.name()) && shown++ < 8)
        some += (some.empty() ? "'" : ", '") + init.name() + "'";
    return emitError(FileLineColLoc::get(&context, path, 0, 0))
           << "spec key 'frozen_parameters': '" << options.frozen[i]
           << "' matches no parameter of the model (its float initializers "
              "of rank one or more); its parameters include "
           << (some.empty() ? "none" : some);
  }
  return success();
}

LogicalResult Importer::foldError(Location loc, const llvm::Twine &what,
                                  llvm::Error e) {
  std::string message;
  bool tooLarge = false;
  llvm::handleAllErrors(std::move(e), [&](const llvm::ErrorInfoBase &info) {
    message = info.message();
    tooLarge = info.convertToErrorCode() == std::errc::value_too_large;
  });
  auto diag = error(loc) << what << ": " << message;
  if (!tooLarge)
    return diag;
  // The constant grew from the graph inputs' sizes (a mask of seq x seq):
  // name them, since that is what the user changes.
  std::string sizes;
  auto func = cast<func::FuncOp>(builder.getBlock()->getParentOp());
  for (BlockArgument arg : func.getArguments())
    if (auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                      "cleave.onnx_name"))
      sizes += (sizes.empty() ? "'" : ", '") + name.str() + "' " +
               ::cleave::shapeToString(
                   arg.getType().cast<RankedTensorType>().getShape());
  diag.attachNote() << "its shape follows from the graph inputs (" << sizes
                    << "); export with, or bind (--bind-dim), smaller "
                       "dimensions";
  return diag;
}

FailureOr<RankedTensorType>
Importer::inputType(const onnx::ValueInfoProto &info) {
  auto loc = valueLoc(info.name());
  if (!info.type().has_tensor_type())
    return error(loc) << "graph input '" << info.name()
                      << "' is not a tensor";
  const auto &tt = info.type().tensor_type();
  auto element = elementType(static_cast<DType>(tt.elem_type()), loc,
                             "graph input '" + info.name() + "'");
  if (failed(element))
    return failure();
  if (!tt.has_shape())
    return error(loc) << "graph input '" << info.name()
                      << "' has no shape; export with static shapes or a "
                         "symbolic batch axis (dynamic_axes)";
  SmallVector<int64_t> shape;
  for (auto [i, dim] : llvm::enumerate(tt.shape().dim())) {
    // A dimension of size 0 is static (an empty tensor), not unknown.
    if (dim.has_dim_value() && dim.dim_value() >= 0) {
      shape.push_back(dim.dim_value());
      continue;
    }
    std::string symbol = dim.has_dim_param() ? dim.dim_param() : "";
    auto bound = options.dims.find(symbol);
    if (!symbol.empty() && bound != options.dims.end()) {
      shape.push_back(bound->second);
    } else if (i == 0 && batchSize()) {
      shape.push_back(*batchSize());
      batchBound = true;
    } else {
      auto diag = error(loc);
      diag << "graph input '" << info.name() << "' dimension " << i;
      if (!symbol.empty())
        diag << " ('" << symbol << "')";
      diag << " is symbolic and cannot be made static; ";
      if (i == 0)
        diag << "give the batch size (--batch N)";
      else
        diag << "bind it with --bind-dim " << (symbol.empty() ? "NAME" : symbol)
             << "=N, or export with a fixed size";
      return failure();
    }
  }
  if (auto e = ::cleave::checkInputSize(
          info.name(), shape, dtypeSize(static_cast<DType>(tt.elem_type()))))
    return error(loc) << llvm::toString(std::move(e));
  return RankedTensorType::get(shape, *element);
}

FailureOr<OwningOpRef<ModuleOp>> Importer::run() {
  if (failed(readOpset()))
    return failure();
  Location fileLoc = FileLineColLoc::get(&context, path, 0, 0);
  module = ModuleOp::create(fileLoc);
  OwningOpRef<ModuleOp> owned(module);
  builder.setInsertionPointToEnd(module.getBody());
  if (failed(declareInitializers()))
    return failure();

  const onnx::GraphProto &graph = model.graph();
  if (options.resolveBatch) {
    for (const auto &input : graph.input()) {
      if (values.count(input.name()) || !input.type().has_tensor_type() ||
          input.type().tensor_type().shape().dim_size() == 0)
        continue;
      const auto &dim = input.type().tensor_type().shape().dim(0);
      std::optional<int64_t> exported;
      if (dim.has_dim_value() && dim.dim_value() > 0)
        exported = dim.dim_value();
      llvm::Expected<int64_t> chosen = options.resolveBatch(exported);
      if (!chosen)
        return error(valueLoc(input.name()))
               << llvm::toString(chosen.takeError());
      resolvedBatch = *chosen;
      break;
    }
  }
  SmallVector<Type> argTypes;
  SmallVector<std::string> argNames;
  for (const auto &input : graph.input()) {
    if (values.count(input.name()))
      continue; // older exports list initializers as inputs too
    auto bound = options.constantInputs.find(input.name());
    if (bound != options.constantInputs.end()) {
      if (failed(defineConstant(input.name(), bound->second, fileLoc)))
        return failure();
      continue;
    }
    auto type = inputType(input);
    if (failed(type))
      return failure();
    if (shapesOnly && type->getElementType().isa<FloatType>() &&
        type->getRank() > 0) {
      values[input.name()] = Tensor{Value(), nullptr, input.name(), *type};
      continue;
    }
    argTypes.push_back(*type);
    argNames.push_back(input.name());
  }
  // A batch size given for a model whose batch is fixed must agree with it:
  // silently compiling another batch than the user asked for is wrong.
  if (batchSize() && !batchBound) {
    for (auto [type, name] : llvm::zip(argTypes, argNames)) {
      auto ranked = type.cast<RankedTensorType>();
      if (ranked.getRank() == 0 || ranked.getDimSize(0) == *batchSize())
        continue;
      return error(valueLoc(name))
             << "the model's batch size is fixed at " << ranked.getDimSize(0)
             << " (graph input '" << name << "' dimension 0), but batch "
             << *batchSize() << " was asked for; use batch "
             << ranked.getDimSize(0) << ", or export with dynamic_axes={'"
             << name << "': {0: 'batch'}}";
    }
  }

  auto func = builder.create<func::FuncOp>(
      fileLoc, options.functionName, builder.getFunctionType(argTypes, {}));
  Block *body = func.addEntryBlock();
  for (auto [i, name] : llvm::enumerate(argNames)) {
    func.setArgAttr(i, "cleave.onnx_name", builder.getStringAttr(name));
    body->getArgument(i).setLoc(NameLoc::get(builder.getStringAttr(name)));
    define(name, body->getArgument(i));
  }
  builder.setInsertionPointToEnd(body);

  // Drop each value after its last use: the folded masks of a large model
  // would otherwise hold gigabytes.
  llvm::StringMap<int> remainingUses;
  for (const auto &node : graph.node())
    for (const auto &input : node.input())
      ++remainingUses[input];
  for (const auto &output : graph.output())
    ++remainingUses[output.name()];
  for (auto [i, node] : llvm::enumerate(graph.node())) {
    if (failed(importNode(node, i)))
      return failure();
    for (const auto &input : node.input())
      if (!input.empty() && --remainingUses[input] == 0)
        values.erase(input);
  }

  SmallVector<Value> results;
  for (const auto &output : graph.output()) {
    auto it = values.find(output.name());
    if (it == values.end())
      return error(fileLoc) << "graph output '" << output.name()
                            << "' is not produced by any node";
    auto v = valueOf(it->second, NameLoc::get(builder.getStringAttr(output.name())));
    if (failed(v))
      return failure();
    results.push_back(*v);
  }
  builder.create<func::ReturnOp>(fileLoc, results);
  func.setType(builder.getFunctionType(argTypes, ValueRange(results).getTypes()));
  for (auto [i, output] : llvm::enumerate(graph.output()))
    func.setResultAttr(i, "cleave.onnx_name",
                       builder.getStringAttr(output.name()));

  // Parameters precede the function.
  for (auto param : llvm::make_early_inc_range(module.getOps<ParameterOp>()))
    param->moveBefore(func);
  if (failed(verify(module)))
    return failure();
  return std::move(owned);
}

LogicalResult Importer::checkArity(const onnx::NodeProto &node,
                                   llvm::StringRef name, Location loc) {
  const onnx::OpSchema *schema =
      onnx::OpSchemaRegistry::Schema(node.op_type(), opset, "");
  if (!schema)
    return success(); // an op ONNX does not know: refused as unsupported
  // The schemas of Debian's ONNX end at some opset; a newer opset's version
  // of an op may take more (optional) inputs or outputs, so past it only
  // the minimums of the last known version are checked.
  const auto &known =
      onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto domain = known.find(onnx::ONNX_DOMAIN);
  bool newer = domain == known.end() || opset > domain->second.second;
  llvm::StringRef op = node.op_type();
  auto fix = "; the graph is malformed: export the model again";
  auto range = [&](int min, int max) {
    if (max == min && !newer)
      return std::to_string(min);
    if (newer || max == std::numeric_limits<int>::max()) // variadic
      return "at least " + std::to_string(min);
    return std::to_string(min) + " to " + std::to_string(max);
  };
  if (node.input_size() < schema->min_input() ||
      (!newer && node.input_size() > schema->max_input()))
    return error(loc) << "node '" << name << "' (" << op << ") has "
                      << node.input_size()
                      << (node.input_size() == 1 ? " input" : " inputs")
                      << ", but " << op
                      << " (opset " << opset << ") takes "
                      << range(schema->min_input(), schema->max_input())
                      << fix;
  if (node.output_size() < schema->min_output() ||
      (!newer && node.output_size() > schema->max_output()))
    return error(loc) << "node '" << name << "' (" << op << ") has "
                      << node.output_size()
                      << (node.output_size() == 1 ? " output" : " outputs")
                      << ", but " << op
                      << " (opset " << opset << ") gives "
                      << range(schema->min_output(), schema->max_output())
                      << fix;
  for (int list = 0; list < 2; ++list) {
    const auto &formals = list == 0 ? schema->inputs() : schema->outputs();
    const auto &actuals = list == 0 ? node.input() : node.output();
    for (int i = 0, e = std::min<int>(formals.size(), actuals.size()); i < e;
         ++i)
      if (formals[i].GetOption() == onnx::OpSchema::Single &&
          actuals[i].empty() &&
          (!newer || i < (list == 0 ? schema->min_input()
                                    : schema->min_output())))
        return error(loc) << "node '" << name << "' (" << op << ") has no "
                          << (list == 0 ? "input " : "output ") << i << " ('"
                          << formals[i].GetName() << "'), which " << op
                          << " requires" << fix;
  }
  return success();
}

LogicalResult Importer::importNode(const onnx::NodeProto &node, int index) {
  std::string name = nodeName(node, index);
  Location loc = NameLoc::get(builder.getStringAttr(name),
                              FileLineColLoc::get(&context, path, index + 1, 0));
  llvm::StringRef op = node.op_type();
  // Every error about this node says which node and op it is.
  ScopedDiagnosticHandler annotate(&context, [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error)
      diag.attachNote(loc) << "while importing ONNX node '" << name << "' ("
                           << op << ", opset " << opset << ")";
    return failure(); // keep propagating to the real handler
  });

  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return error(loc) << "node '" << name << "' has op " << op
                      << " from domain '" << node.domain()
                      << "', which is not supported; Cleave supports the "
                         "default ONNX domain";

  // The numbers of inputs and outputs the ONNX schema of the op requires
  // (the op handlers and the folder index them without checking).
  if (failed(checkArity(node, name, loc)))
    return failure();

  // Gather inputs; every one must be known already (graphs are sorted).
  SmallVector<const HostTensor *> constants;
  bool allConstant = true;
  for (const auto &input : node.input()) {
    if (input.empty()) {
      constants.push_back(nullptr);
      continue;
    }
    auto it = values.find(input);
    if (it == values.end())
      return error(loc) << "node '" << name << "' (" << op << ") reads '"
                        << input << "', which no earlier node produces";
    constants.push_back(it->second.constant.get());
    allConstant &= it->second.constant != nullptr;
  }

  // Shape and Size need only the static type.
  if (op == "Shape" || op == "Size") {
    if (node.input_size() < 1)
      return error(loc) << op << " needs an input";
    auto shape = values[node.input(0)].type.getShape();
    HostTensor result;
    if (op == "Size") {
      int64_t n = 1;
      for (int64_t d : shape)
        n *= d;
      result = HostTensor::scalarInt(n);
    } else {
      int64_t rank = shape.size();
      int64_t start = intAttr(node, "start", 0), end = intAttr(node, "end", rank);
      start = std::clamp<int64_t>(start < 0 ? start + rank : start, 0, rank);
      end = std::clamp<int64_t>(end < 0 ? end + rank : end, 0, rank);
      result = HostTensor::ints(
          shape.slice(start, std::max<int64_t>(end - start, 0)));
    }
    return defineConstant(node.output(0), std::move(result), loc);
  }

  if (op == "Constant" || (allConstant && ::cleave::isFoldable(op))) {
    auto outs = ::cleave::foldNode(node, constants, opset, modelDir);
    if (!outs)
      return foldError(loc, "node '" + name + "' (" + op + ")",
                       outs.takeError());
    for (auto [i, out] : llvm::enumerate(*outs)) {
      if ((int)i >= node.output_size())
        break;
      if (failed(defineConstant(node.output(i), std::move(out), loc)))
        return failure();
    }
    return success();
  }

  if (!isSupportedOp(op)) {
    auto diag = error(loc);
    diag << "node '" << name << "' has op " << op << " (opset " << opset
         << "), which Cleave does not support";
    if (::cleave::isFoldable(op))
      diag << " on values computed at run time (only on constants)";
    diag << "; supported ops: ";
    llvm::interleaveComma(::cleave::supportedOnnxOps(), diag);
    return failure();
  }
  return mapNode(node, loc);
}

LogicalResult Importer::mapNode(const onnx::NodeProto &node, Location loc) {
  llvm::StringRef op = node.op_type();
  auto has = [&](int i) {
    return i < node.input_size() && !node.input(i).empty();
  };
  auto tensor = [&](int i) -> const Tensor & {
    return values.find(node.input(i))->second;
  };
  auto value = [&](int i) { return valueOf(tensor(i), loc); };
  auto type = [&](int i) { return tensor(i).type; };
  auto shape = [&](int i) { return tensor(i).type.getShape(); };
  auto constant = [&](int i) -> const HostTensor * {
    return has(i) ? tensor(i).constant.get() : nullptr;
  };
  // An operand that must be known at compile time (shapes, axes, bounds).
  auto requireConstant = [&](int i, llvm::StringRef what) -> const HostTensor * {
    const HostTensor *c = constant(i);
    if (!c)
      error(loc) << op << "'s " << what << " (input " << i << ", '"
                 << node.input(i)
                 << "') is computed at run time, so the dimension cannot be "
                    "made static; Cleave needs it to be a constant";
    return c;
  };
  auto out = [&](Value v, int i = 0) {
    if (i < node.output_size() && !node.output(i).empty())
      define(node.output(i), v);
  };
  auto report = [&](llvm::Error e) -> LogicalResult {
    return error(loc) << op << ": " << llvm::toString(std::move(e));
  };
  auto i64 = [&](int64_t v) { return builder.getI64IntegerAttr(v); };
  auto arrayAttr = [&](ArrayRef<int64_t> v) {
    return builder.getDenseI64ArrayAttr(v);
  };
  auto reshape = [&](Value v, ArrayRef<int64_t> to) -> Value {
    auto t = v.getType().cast<RankedTensorType>();
    if (t.getShape() == to)
      return v;
    return builder.create<ReshapeOp>(
        loc, RankedTensorType::get(to, t.getElementType()), v);
  };
  auto cast = [&](Value v, Type element) -> Value {
    auto t = v.getType().cast<RankedTensorType>();
    if (t.getElementType() == element)
      return v;
    return builder.create<CastOp>(
        loc, RankedTensorType::get(t.getShape(), element), v);
  };
  // Binary operands: a constant takes the other side's element type (ONNX
  // exporters write `x * 0.5` with a scalar of either type).
  auto binaryOperands = [&](int a, int b) -> FailureOr<std::pair<Value, Value>> {
    Type ta = type(a).getElementType(), tb = type(b).getElementType();
    auto operand = [&](int i, Type want) -> FailureOr<Value> {
      const HostTensor *c = constant(i);
      if (c && type(i).getElementType() != want && dtypeOf(want) != DType::Undefined)
        return materialize(c->castTo(dtypeOf(want)), loc);
      return value(i);
    };
    bool aConst = constant(a), bConst = constant(b);
    auto va = operand(a, aConst && !bConst ? tb : ta);
    auto vb = operand(b, bConst ? (aConst ? tb : ta) : tb);
    if (failed(va) || failed(vb))
      return failure();
    return std::make_pair(*va, *vb);
  };

  if (op == "Pow") {
    // The exponent may have another element type than the base (T and T1 in
    // the spec); the result has the base's.
    if (node.input_size() < 2)
      return error(loc) << "Pow needs two inputs";
    Type baseType = type(0).getElementType(), expType = type(1).getElementType();
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
      auto exponent = c ? FailureOr<Value>(materialize(
                              c->castTo(dtypeOf(baseType)), loc))
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

  // Elementwise binary.
  static const llvm::StringMap<int> binaryKinds = {
      {"Add", 0}, {"Sub", 1}, {"Mul", 2}, {"Div", 3},
      {"Max", 5}, {"Min", 6}, {"And", 7}, {"Or", 8}, {"Equal", 9},
      {"Less", 10}, {"LessOrEqual", 11}, {"Greater", 12},
      {"GreaterOrEqual", 13}};
  auto binary = binaryKinds.find(op);
  if (binary != binaryKinds.end()) {
    auto build = [&](Value a, Value b) -> FailureOr<Value> {
      switch (binary->second) {
      case 0: return inferred<AddOp>(loc, {a, b});
      case 1: return inferred<SubOp>(loc, {a, b});
      case 2: return inferred<MulOp>(loc, {a, b});
      case 3: return inferred<DivOp>(loc, {a, b});
      case 5: return inferred<MaxOp>(loc, {a, b});
      case 6: return inferred<MinOp>(loc, {a, b});
      case 7: return inferred<AndOp>(loc, {a, b});
      case 8: return inferred<OrOp>(loc, {a, b});
      case 9: return inferred<EqualOp>(loc, {a, b});
      case 10: return inferred<LessOp>(loc, {a, b});
      case 11: return inferred<LessEqualOp>(loc, {a, b});
      case 12: return inferred<GreaterOp>(loc, {a, b});
      default: return inferred<GreaterEqualOp>(loc, {a, b});
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

  // Elementwise unary.
  static const llvm::StringMap<int> unaryKinds = {
      {"Neg", 0}, {"Abs", 1}, {"Relu", 2}, {"Not", 3}, {"Exp", 4},
      {"Log", 5}, {"Sqrt", 6}, {"Reciprocal", 7}, {"Tanh", 8},
      {"Erf", 9}, {"Sigmoid", 10}, {"Sin", 11}, {"Cos", 12},
      {"Identity", 13}, {"Dropout", 14}, {"Gelu", 15}};
  auto unary = unaryKinds.find(op);
  if (unary != unaryKinds.end()) {
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
    case 0: r = builder.create<NegOp>(loc, *x); break;
    case 1: r = builder.create<AbsOp>(loc, *x); break;
    case 2: r = builder.create<ReluOp>(loc, *x); break;
    case 3: r = builder.create<NotOp>(loc, *x); break;
    case 4: r = builder.create<ExpOp>(loc, *x); break;
    case 5: r = builder.create<LogOp>(loc, *x); break;
    case 6: r = builder.create<SqrtOp>(loc, *x); break;
    case 7: r = builder.create<ReciprocalOp>(loc, *x); break;
    case 8: r = builder.create<TanhOp>(loc, *x); break;
    case 9: r = builder.create<ErfOp>(loc, *x); break;
    case 10: r = builder.create<SigmoidOp>(loc, *x); break;
    case 11: r = builder.create<SinOp>(loc, *x); break;
    case 12: r = builder.create<CosOp>(loc, *x); break;
    case 13: r = *x; break;
    case 14: {
      // Dropout imports as identity: inference mode, or ratio 0. Its mask
      // output then keeps every element.
      const HostTensor *ratio = constant(1), *training = constant(2);
      bool train = training && training->getInt(0);
      if (has(2) && !training)
        return error(loc) << "Dropout's training_mode is computed at run "
                             "time; export in eval mode";
      if (train && (!ratio || ratio->getDouble(0) != 0))
        return error(loc) << "Dropout in training mode with a nonzero ratio "
                             "is not supported yet; export with "
                             "model.eval() or p=0";
      r = *x;
      if (node.output_size() > 1 && !node.output(1).empty()) {
        if (auto e = ::cleave::checkHostTensorSize(shape(0)))
          return foldError(loc, op, std::move(e));
        HostTensor keep(DType::Bool, shape(0));
        for (int64_t i = 0; i < keep.numElements(); ++i)
          keep.setInt(i, 1);
        out(materialize(keep, loc), 1);
      }
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

  if (op == "Cast") {
    auto to = elementType(static_cast<DType>(intAttr(node, "to", 1)), loc,
                          "Cast's target");
    auto x = value(0);
    if (failed(to) || failed(x))
      return failure();
    if (type(0).getElementType() == *to)
      out(*x);
    else
      out(builder.create<CastOp>(loc, RankedTensorType::get(shape(0), *to), *x));
    return success();
  }

  if (op == "Where") {
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

  if (op == "MatMul" || op == "Gemm") {
    auto a = value(0), b = value(1);
    if (failed(a) || failed(b))
      return failure();
    Value lhs = *a, rhs = *b;
    if (op == "Gemm") {
      if (type(0).getRank() != 2 || type(1).getRank() != 2)
        return error(loc) << "Gemm needs 2-D inputs, got " << type(0)
                          << " and " << type(1);
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
      SmallVector<int64_t> s(result.getType().cast<RankedTensorType>().getShape());
      if (rhsRank == 1)
        s.erase(s.end() - 1);
      if (lhsRank == 1)
        s.erase(s.end() - (rhsRank == 1 ? 1 : 2));
      result = reshape(result, s);
    }
    if (op == "Gemm") {
      float alpha = floatAttr(node, "alpha", 1.0f), beta = floatAttr(node, "beta", 1.0f);
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

  if (op == "ReduceSum" || op == "ReduceMean" || op == "ReduceMax" ||
      op == "ReduceMin") {
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
        builder.getNamedAttr("keepdims",
                             builder.getBoolAttr(intAttr(node, "keepdims", 1)))};
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

  if (op == "Softmax" || op == "LogSoftmax") {
    auto x = value(0);
    if (failed(x))
      return failure();
    if (!type(0).getElementType().isa<FloatType>())
      return error(loc) << op << " needs a floating-point input";
    int64_t rank = type(0).getRank();
    auto axis = ::cleave::normalizeAxis(intAttr(node, "axis", opset >= 13 ? -1 : 1),
                                      rank);
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
    Value r = op == "Softmax"
                  ? builder.create<SoftmaxOp>(loc, in, i64(softmaxAxis)).getResult()
                  : builder.create<LogSoftmaxOp>(loc, in, i64(softmaxAxis)).getResult();
    out(flatten ? reshape(r, shape(0)) : r);
    return success();
  }

  if (op == "LayerNormalization") {
    auto x = value(0);
    if (failed(x))
      return failure();
    auto axis = ::cleave::normalizeAxis(intAttr(node, "axis", -1), type(0).getRank());
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
      auto stash = elementType(static_cast<DType>(intAttr(node, "stash_type", 1)),
                               loc, "LayerNormalization's stash_type");
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

  if (op == "SoftmaxCrossEntropyLoss" || op == "NegativeLogLikelihoodLoss") {
    if (has(2))
      return weightedLoss(node, loc);
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

  if (op == "Reshape" || op == "Flatten" || op == "Squeeze" ||
      op == "Unsqueeze") {
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

  if (op == "Transpose") {
    auto x = value(0);
    if (failed(x))
      return failure();
    auto perm = intsAttr(node, "perm");
    if (perm.empty())
      for (int64_t d = type(0).getRank() - 1; d >= 0; --d)
        perm.push_back(d);
    auto r = inferred<TransposeOp>(loc, {*x},
                                   {builder.getNamedAttr("perm", arrayAttr(perm))});
    if (failed(r))
      return failure();
    out(*r);
    return success();
  }

  if (op == "Expand") {
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

  if (op == "Concat") {
    if (node.input_size() == 0)
      return error(loc) << "Concat has no inputs";
    auto axis = ::cleave::normalizeAxis(intAttr(node, "axis", 0), type(0).getRank());
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

  if (op == "Slice" || op == "Split") {
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
    auto axis = ::cleave::normalizeAxis(intAttr(node, "axis", 0), type(0).getRank());
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
    auto sizes = ::cleave::splitSizes(
        shape(0)[*axis], split, intAttr(node, "num_outputs", node.output_size()));
    if (!sizes)
      return report(sizes.takeError());
    if ((int)sizes->size() != node.output_size())
      return error(loc) << "Split has " << node.output_size()
                        << " outputs but " << sizes->size() << " split sizes";
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

  if (op == "Gather") {
    auto axis = ::cleave::normalizeAxis(intAttr(node, "axis", 0), type(0).getRank());
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
    auto r = embedding
                 ? inferred<EmbeddingOp>(loc, {*data, *indices})
                 : inferred<GatherOp>(loc, {*data, *indices},
                                      {builder.getNamedAttr("axis", i64(*axis))});
    if (failed(r))
      return failure();
    out(*r);
    return success();
  }

  if (op == "Trilu") {
    // On a run-time value: select against the folded triangular mask.
    if (type(0).getRank() < 2)
      return error(loc) << "Trilu needs rank 2 or more, got " << type(0);
    if (has(1) && !requireConstant(1, "k"))
      return failure();
    auto x = value(0);
    if (failed(x))
      return failure();
    int64_t rows = shape(0)[type(0).getRank() - 2], cols = shape(0).back();
    if (auto e = ::cleave::checkHostTensorSize({rows, cols}))
      return foldError(loc, op, std::move(e));
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

  // ConstantOfShape, Range and the like reach here only with run-time inputs.
  auto diag = error(loc);
  diag << op << " on inputs computed at run time cannot be made static; "
       << "Cleave needs its inputs to be constants";
  return failure();
}

/// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss with class weights,
/// which the loss ops do not take, as elementwise ops and reductions. A
/// one-hot comparison with the class ids picks each target's
/// log-probability and weight, so an ignored target (which may lie outside
/// [0, C)) reads nothing:
///   loss[n, d...] = -logp[n, t, d...] * w[t]   (0 where t == ignore_index)
///   mean = sum(loss) / sum(w[t] over targets not ignored)
LogicalResult Importer::weightedLoss(const onnx::NodeProto &node,
                                     Location loc) {
  llvm::StringRef op = node.op_type();
  auto get = [&](int i) -> FailureOr<Value> {
    return valueOf(values.find(node.input(i))->second, loc);
  };
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
                      << "-element vector of " << element << ", got " << wType;

  Value logp = *x;
  if (op == "SoftmaxCrossEntropyLoss") {
    logp = builder.create<LogSoftmaxOp>(loc, *x, builder.getI64IntegerAttr(1));
    if (node.output_size() > 1 && !node.output(1).empty())
      define(node.output(1), logp);
  }
  // [N, 1, d...] targets against [1, C, 1...] class ids.
  SmallVector<int64_t> oneHotShape(rank, 1), targetShape(tType.getShape());
  oneHotShape[1] = classes;
  targetShape.insert(targetShape.begin() + 1, 1);
  Type idType = tType.getElementType();
  if (auto e = ::cleave::checkHostTensorSize(oneHotShape))
    return foldError(loc, op, std::move(e));
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
        loc, {*target, materialize(HostTensor::scalarInt(ignore->i(),
                                                         dtypeOf(idType)),
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
  define(node.output(0), loss);
  return success();
}

namespace cleave {
FailureOr<OwningOpRef<ModuleOp>>
importOnnxFile(llvm::StringRef path, MLIRContext &context,
               const ImportOptions &options) {
  context.loadDialect<CleaveDialect, func::FuncDialect>();
  auto model = readOnnxModel(path);
  if (!model) {
    emitError(FileLineColLoc::get(&context, path, 0, 0))
        << llvm::toString(model.takeError());
    return failure();
  }
  Importer importer(context, **model, path, options);
  return importer.run();
}
} // namespace cleave
