//===- OnnxImporter.cpp - ONNX graph to cleave IR ------------------------===//
//
// Walks the (topologically sorted) ONNX graph once. Every value is either a
// host constant (initializers that are not parameters, Constant nodes, and
// anything computed only from those) or an SSA value in the function being
// built. Nodes whose inputs are all constants are evaluated on the host;
// the rest become cleave ops through their op type's handler, found in
// onnxOpTable() (ImportNode.h; the handlers are in Import<Family>.cpp). Float initializers of rank one or more are
// trainable parameters unless the model's `cleave.buffers` metadata lists
// them (then they are constants); they are never folded, so their gradients
// exist later. Those that match ImportOptions::frozen stay parameters,
// marked `cleave.frozen`, which autodiff does not differentiate.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxImporter.h"
#include "frontend/ConstantFolding.h"
#include "frontend/ImportNode.h"
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
#include <map>
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

using Tensor = ::cleave::ImportedValue;

namespace cleave {

/// Imports one model: setup, then one pass over the sorted nodes, each
/// evaluated on the host or mapped by its op's handler (onnxOpTable()).
class GraphImporter {
public:
  GraphImporter(MLIRContext &context, const onnx::ModelProto &model,
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
  LogicalResult readPaddingRows();
  LogicalResult checkPaddingRowsUsed();
  FailureOr<RankedTensorType> inputType(const onnx::ValueInfoProto &info);

  // Per node.
  LogicalResult checkArity(const onnx::NodeProto &node, llvm::StringRef name,
                           Location loc);
  /// `index` is the node's position in the main graph (its line in
  /// locations), or -1 for a node of a subgraph.
  LogicalResult importNode(const onnx::NodeProto &node, int index);
  LogicalResult importSubgraph(const onnx::GraphProto &graph);

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

  MLIRContext &context;
  OpBuilder builder;
  const onnx::ModelProto &model;
  std::string path, modelDir;
  const ::cleave::ImportOptions &options;
  int64_t opset = 0;
  ModuleOp module;
  llvm::StringMap<Tensor> values;
  llvm::DenseMap<Attribute, Value> constantCache; // materialize()'s ops
  // valueOf()'s constants by the value they were folded into: a traced
  // model's every block reads the one causal mask (4M elements for GPT-3),
  // converted to an attribute once, not once per block. The pointer is
  // kept alive with it, so no later value reuses its address.
  llvm::DenseMap<const ::cleave::HostTensor *,
                 std::pair<std::shared_ptr<::cleave::HostTensor>, Value>>
      materialized;
  // Folded nodes' results by op, attributes and input values (kept alive,
  // so their addresses stay theirs).
  std::map<std::string, std::pair<std::vector<std::shared_ptr<HostTensor>>,
                                  std::vector<std::shared_ptr<HostTensor>>>>
      folded;
  // The same for a constant converted to another element type (a binary
  // op's constant operand): by the value and the type.
  llvm::DenseMap<std::pair<const ::cleave::HostTensor *, int>,
                 std::pair<std::shared_ptr<::cleave::HostTensor>, Value>>
      materializedAs;

public:
  /// `t` converted to `dtype`, as a constant op: once per value and type.
  Value materializeAs(const std::shared_ptr<::cleave::HostTensor> &t,
                      ::cleave::DType dtype, Location loc) {
    auto &[kept, value] = materializedAs[{t.get(), int(dtype)}];
    if (!value) {
      kept = t;
      value = materialize(t->castTo(dtype), loc);
    }
    return value;
  }

private:
  llvm::StringMap<const onnx::TensorProto *> paramInitializers;
  llvm::StringSet<> declaredParams;
  /// Parameters that match ImportOptions::frozen: declared `cleave.frozen`.
  llvm::StringSet<> frozenParams;
  /// From the `cleave.init` metadata: how the runtime initializes a
  /// parameter that comes without data ("normal:0.02", "zeros", "ones").
  llvm::StringMap<std::string> initSpecs;
  /// From the `cleave.padding_idx` metadata: the embedding tables (by
  /// initializer name) whose padding row the lookups give no gradient, and
  /// those an embedding lookup has taken so far.
  llvm::StringMap<int64_t> paddingRows;
  llvm::StringSet<> paddingRowsUsed;
  llvm::StringSet<> paddedParams; // the trainable ones among paddingRows
  std::string paddingMetadata;    // its text, for messages
  bool shapesOnly = false;
  bool batchBound = false; // a symbolic batch axis took the batch size
  std::optional<int64_t> resolvedBatch; // from options.resolveBatch
  std::optional<int64_t> batchSize() const {
    return resolvedBatch ? resolvedBatch : options.batchSize;
  }
  friend class NodeImport;
};

} // namespace cleave

using ::cleave::GraphImporter;
using ::cleave::NodeImport;

namespace {

std::string nodeName(const onnx::NodeProto &node, int index) {
  if (!node.name().empty())
    return node.name();
  return node.op_type() + "_" + std::to_string(index);
}

/// Calls `read` with every value name `node` reads: its inputs, and what
/// the nodes and outputs of its subgraphs (If's branches) read, which may
/// be values of the enclosing graph.
void forEachRead(const onnx::NodeProto &node,
                 llvm::function_ref<void(const std::string &)> read) {
  for (const auto &input : node.input())
    if (!input.empty())
      read(input);
  auto walk = [&](const onnx::GraphProto &graph) {
    for (const auto &inner : graph.node())
      forEachRead(inner, read);
    for (const auto &output : graph.output())
      read(output.name());
  };
  for (const auto &attr : node.attribute()) {
    if (attr.has_g())
      walk(attr.g());
    for (const auto &graph : attr.graphs())
      walk(graph);
  }
}

} // namespace

const ::cleave::OnnxOpTable &::cleave::onnxOpTable() {
  static const OnnxOpTable table = [] {
    OnnxOpTable t;
    registerConstantOps(t);
    registerElementwiseOps(t);
    registerMovementOps(t);
    registerNNOps(t);
    registerReductionOps(t);
    registerLossOps(t);
    registerControlFlowOps(t);
    return t;
  }();
  return table;
}

const std::vector<std::string> &::cleave::supportedOnnxOps() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> names;
    for (const auto &entry : onnxOpTable())
      names.push_back(entry.getKey().str());
    llvm::sort(names);
    return names;
  }();
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
  return ::cleave::onnxOpTable().count(op);
}

FailureOr<Type> GraphImporter::elementType(DType dtype, Location loc,
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

Value GraphImporter::materialize(const HostTensor &t, Location loc) {
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

LogicalResult GraphImporter::defineConstant(const std::string &name, HostTensor t,
                                       Location loc) {
  auto element = elementType(t.dtype(), loc, "value '" + name + "'");
  if (failed(element))
    return failure();
  auto type = RankedTensorType::get(t.shape(), *element);
  values[name] = Tensor{Value(), std::make_shared<HostTensor>(std::move(t)),
                        "", type};
  return success();
}

FailureOr<Value> GraphImporter::valueOf(const Tensor &t, Location loc) {
  if (t.value)
    return t.value;
  if (t.constant) {
    auto &[kept, value] = materialized[t.constant.get()];
    if (!value) {
      kept = t.constant;
      value = materialize(*t.constant, loc);
    }
    return value;
  }
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
    if (*bytes && (*bytes)->empty()) {
      // No elements: no blob (copying from an empty buffer's null data is
      // undefined behaviour).
      value = DenseElementsAttr::getFromRawBuffer(t.type, ArrayRef<char>());
    } else if (*bytes) {
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

LogicalResult GraphImporter::readOpset() {
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

LogicalResult GraphImporter::declareInitializers() {
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

/// `cleave.padding_idx` is a JSON object {initializer name: row} that
/// models/export.py writes for every nn.Embedding with a padding_idx (ONNX
/// has no way to say it). Read once the graph inputs are declared, so that
/// a shapes-only export's parameters (graph inputs) are found too.
LogicalResult GraphImporter::readPaddingRows() {
  constexpr llvm::StringLiteral key = "cleave.padding_idx";
  Location fileLoc = FileLineColLoc::get(&context, path, 0, 0);
  for (const auto &prop : model.metadata_props()) {
    if (prop.key() != key)
      continue;
    auto fail = [&]() {
      return emitError(fileLoc) << "metadata '" << key << "' = '"
                                << prop.value() << "': ";
    };
    paddingMetadata = prop.value();
    auto parsed = llvm::json::parse(prop.value());
    if (!parsed) {
      std::string why = llvm::toString(parsed.takeError());
      return fail() << "not valid JSON (" << why
                    << "); it must be an object {\"initializer name\": "
                       "padding row}, as models/export.py writes it";
    }
    const llvm::json::Object *rows = parsed->getAsObject();
    if (!rows)
      return fail() << "not a JSON object; it must be {\"initializer "
                       "name\": padding row}, as models/export.py writes it";
    // Sorted, so that the first error does not depend on hash order.
    SmallVector<std::pair<std::string, const llvm::json::Value *>> entries;
    for (const auto &entry : *rows)
      entries.push_back({entry.first.str(), &entry.second});
    llvm::sort(entries, [](const auto &a, const auto &b) {
      return a.first < b.first;
    });
    for (const auto &[name, row] : entries) {
      std::optional<int64_t> index = row->getAsInteger();
      if (!index) {
        std::string text;
        llvm::raw_string_ostream os(text);
        os << *row;
        return fail() << "the padding row of '" << name << "' is " << os.str()
                      << ", not an integer";
      }
      auto found = values.find(name);
      bool isInitializer =
          found != values.end() &&
          (!found->second.param.empty() || found->second.constant);
      if (!isInitializer) {
        std::string tables;
        int shown = 0;
        for (const auto &init : model.graph().initializer())
          if (init.dims_size() == 2 && shown++ < 8)
            tables += (tables.empty() ? "'" : ", '") + init.name() + "'";
        return fail() << "the model has no initializer '" << name
                      << "' (give the ONNX initializer name of the table); "
                         "its 2-D initializers are "
                      << (tables.empty() ? "none" : tables);
      }
      RankedTensorType type = found->second.type;
      if (type.getRank() != 2) {
        std::string shape;
        llvm::raw_string_ostream os(shape);
        llvm::interleaveComma(type.getShape(), os);
        return fail() << "'" << name << "' has shape [" << os.str()
                      << "], not an embedding table [vocabulary, dim]";
      }
      int64_t vocabulary = type.getDimSize(0);
      if (*index < 0 || *index >= vocabulary)
        return fail() << "padding row " << *index << " of '" << name
                      << "' is out of range: the table has " << vocabulary
                      << " rows (0 to " << vocabulary - 1 << ")";
      paddingRows[name] = *index;
      if (!found->second.param.empty())
        paddedParams.insert(name);
    }
  }
  return success();
}

/// A parameter with a padding row that no embedding lookup read would
/// train that row like any other: refused rather than silently unlike
/// PyTorch.
LogicalResult GraphImporter::checkPaddingRowsUsed() {
  SmallVector<std::string> unused;
  for (const auto &entry : paddingRows)
    if (paddedParams.contains(entry.getKey()) &&
        !paddingRowsUsed.contains(entry.getKey()))
      unused.push_back(entry.getKey().str());
  if (unused.empty())
    return success();
  llvm::sort(unused);
  return emitError(FileLineColLoc::get(&context, path, 0, 0))
         << "metadata 'cleave.padding_idx' = '" << paddingMetadata
         << "': '" << unused.front() << "' has padding row "
         << paddingRows.lookup(unused.front())
         << ", but no Gather looks its rows up (a Gather along axis 0 of the "
            "initializer itself, as torch exports nn.Embedding), so there is "
            "no lookup to leave the row out of; remove the entry";
}

LogicalResult GraphImporter::foldError(Location loc, const llvm::Twine &what,
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
GraphImporter::inputType(const onnx::ValueInfoProto &info) {
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

FailureOr<OwningOpRef<ModuleOp>> GraphImporter::run() {
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

  if (failed(readPaddingRows()))
    return failure();

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
    forEachRead(node, [&](const std::string &name) { ++remainingUses[name]; });
  for (const auto &output : graph.output())
    ++remainingUses[output.name()];
  for (auto [i, node] : llvm::enumerate(graph.node())) {
    if (failed(importNode(node, i)))
      return failure();
    forEachRead(node, [&](const std::string &name) {
      if (--remainingUses[name] == 0)
        values.erase(name);
    });
  }

  if (failed(checkPaddingRowsUsed()))
    return failure();

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

LogicalResult GraphImporter::checkArity(const onnx::NodeProto &node,
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

LogicalResult GraphImporter::importNode(const onnx::NodeProto &node, int index) {
  std::string name = nodeName(node, index);
  Location loc = NameLoc::get(builder.getStringAttr(name),
                              FileLineColLoc::get(&context, path, index + 1, 0));
  if (index < 0) // a subgraph's node: no line of the main graph
    loc = NameLoc::get(builder.getStringAttr(name),
                       FileLineColLoc::get(&context, path, 0, 0));
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
  std::vector<std::shared_ptr<HostTensor>> held;
  bool allConstant = true;
  for (const auto &input : node.input()) {
    if (input.empty()) {
      constants.push_back(nullptr);
      held.push_back(nullptr);
      continue;
    }
    auto it = values.find(input);
    if (it == values.end())
      return error(loc) << "node '" << name << "' (" << op << ") reads '"
                        << input << "', which no earlier node produces";
    constants.push_back(it->second.constant.get());
    held.push_back(it->second.constant);
    allConstant &= it->second.constant != nullptr;
  }

  if (op == "Constant" || (allConstant && ::cleave::isFoldable(op))) {
    // A node folded before on the same values with the same attributes
    // (every block of a traced model casts and slices the one causal
    // mask) shares that result.
    std::string key;
    if (op != "Constant" && !node.input().empty()) {
      key = op;
      for (const onnx::AttributeProto &a : node.attribute())
        key += "\n" + a.SerializeAsString();
      for (const HostTensor *c : constants)
        key += "\n" + std::to_string(reinterpret_cast<uintptr_t>(c));
      if (auto it = folded.find(key); it != folded.end()) {
        for (auto [i, out] : llvm::enumerate(it->second.second))
          if ((int)i < node.output_size() && !node.output(i).empty())
            values[node.output(i)] = Tensor{Value(), out, "",
                                            RankedTensorType::get(
                                                out->shape(),
                                                *elementType(out->dtype(), loc,
                                                             "constant"))};
        return success();
      }
    }
    auto outs = ::cleave::foldNode(node, constants, opset, modelDir,
                                   options.foldLimitBytes);
    if (!outs)
      return foldError(loc, "node '" + name + "' (" + op + ")",
                       outs.takeError());
    std::vector<std::shared_ptr<HostTensor>> results;
    for (auto [i, out] : llvm::enumerate(*outs)) {
      if ((int)i >= node.output_size())
        break;
      if (failed(defineConstant(node.output(i), std::move(out), loc)))
        return failure();
      results.push_back(node.output(i).empty()
                            ? nullptr
                            : values[node.output(i)].constant);
    }
    if (!key.empty() && llvm::all_of(results, [](const auto &r) { return r; }))
      folded[key] = {std::move(held), std::move(results)};
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
  NodeImport import(*this, node, loc);
  return ::cleave::onnxOpTable().lookup(op)(import);
}

/// A subgraph (an If branch) is imported into the function being built: its
/// initializers are constants, its nodes see the enclosing graph's values,
/// and its outputs stay defined under their names for the caller to take.
LogicalResult GraphImporter::importSubgraph(const onnx::GraphProto &graph) {
  for (const auto &init : graph.initializer()) {
    auto t = ::cleave::decodeTensor(init, modelDir);
    if (!t)
      return error(valueLoc(init.name())) << llvm::toString(t.takeError());
    if (failed(defineConstant(init.name(), std::move(*t),
                              valueLoc(init.name()))))
      return failure();
  }
  for (const auto &node : graph.node())
    if (failed(importNode(node, -1)))
      return failure();
  return success();
}

NodeImport::NodeImport(GraphImporter &graph, const onnx::NodeProto &node,
                       Location loc)
    : graph(graph), node(node), loc(loc), op(node.op_type()),
      builder(graph.builder), context(graph.context), opset(graph.opset),
      modelDir(graph.modelDir), foldLimit(graph.options.foldLimitBytes) {}

LogicalResult NodeImport::foldError(llvm::Error e) {
  return graph.foldError(loc, op, std::move(e));
}

LogicalResult NodeImport::importSubgraph(const onnx::GraphProto &subgraph) {
  return graph.importSubgraph(subgraph);
}

const Tensor *NodeImport::lookup(llvm::StringRef name) const {
  auto it = graph.values.find(name);
  return it == graph.values.end() ? nullptr : &it->second;
}

void NodeImport::outValue(const Tensor &t, int i) {
  if (i < node.output_size() && !node.output(i).empty())
    graph.values[node.output(i)] = t;
}

/// Whether a node of `graph` (or of a subgraph in its attributes) reads
/// `name`, or the graph returns it.
static bool readsValue(const onnx::GraphProto &graph, const std::string &name) {
  for (const auto &output : graph.output())
    if (output.name() == name)
      return true;
  for (const onnx::NodeProto &n : graph.node()) {
    for (const std::string &input : n.input())
      if (input == name)
        return true;
    for (const onnx::AttributeProto &attr : n.attribute()) {
      if (attr.has_g() && readsValue(attr.g(), name))
        return true;
      for (const onnx::GraphProto &g : attr.graphs())
        if (readsValue(g, name))
          return true;
    }
  }
  return false;
}

bool NodeImport::outputRead(int i) const {
  return i < node.output_size() && !node.output(i).empty() &&
         readsValue(graph.model.graph(), node.output(i));
}

std::optional<int64_t> NodeImport::paddingRow(llvm::StringRef param) {
  auto it = graph.paddingRows.find(param);
  if (it == graph.paddingRows.end())
    return std::nullopt;
  graph.paddingRowsUsed.insert(param);
  return it->second;
}

const Tensor &NodeImport::tensor(int i) const {
  return graph.values.find(node.input(i))->second;
}

FailureOr<Value> NodeImport::value(int i) {
  return graph.valueOf(tensor(i), loc);
}

FailureOr<Value> NodeImport::valueOf(const Tensor &t) {
  return graph.valueOf(t, loc);
}

const HostTensor *NodeImport::requireConstant(int i, llvm::StringRef what) {
  const HostTensor *c = constant(i);
  if (!c)
    error(loc) << op << "'s " << what << " (input " << i << ", '"
               << node.input(i)
               << "') is computed at run time, so the dimension cannot be "
                  "made static; Cleave needs it to be a constant";
  return c;
}

void NodeImport::out(Value v, int i) {
  if (i < node.output_size() && !node.output(i).empty())
    graph.define(node.output(i), v);
}

LogicalResult NodeImport::outConstant(HostTensor t, int i) {
  if (i >= node.output_size() || node.output(i).empty())
    return success();
  return graph.defineConstant(node.output(i), std::move(t), loc);
}

Value NodeImport::materialize(const HostTensor &t, Location at) {
  return graph.materialize(t, at);
}

FailureOr<Type> NodeImport::elementType(DType dtype, Location at,
                                        llvm::StringRef what) {
  return graph.elementType(dtype, at, what);
}

Value NodeImport::reshape(Value v, ArrayRef<int64_t> to) {
  auto t = v.getType().cast<RankedTensorType>();
  if (t.getShape() == to)
    return v;
  return builder.create<ReshapeOp>(
      loc, RankedTensorType::get(to, t.getElementType()), v);
}

Value NodeImport::cast(Value v, Type element) {
  auto t = v.getType().cast<RankedTensorType>();
  if (t.getElementType() == element)
    return v;
  return builder.create<CastOp>(
      loc, RankedTensorType::get(t.getShape(), element), v);
}

FailureOr<std::pair<Value, Value>> NodeImport::binaryOperands(int a, int b) {
  Type ta = type(a).getElementType(), tb = type(b).getElementType();
  auto operand = [&](int i, Type want) -> FailureOr<Value> {
    const HostTensor *c = constant(i);
    if (c && type(i).getElementType() != want &&
        dtypeOf(want) != DType::Undefined)
      return graph.materializeAs(tensor(i).constant, dtypeOf(want), loc);
    return value(i);
  };
  bool aConst = constant(a), bConst = constant(b);
  auto va = operand(a, aConst && !bConst ? tb : ta);
  auto vb = operand(b, bConst ? (aConst ? tb : ta) : tb);
  if (failed(va) || failed(vb))
    return failure();
  return std::make_pair(*va, *vb);
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
  GraphImporter importer(context, **model, path, options);
  return importer.run();
}
} // namespace cleave
