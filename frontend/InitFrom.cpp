//===- InitFrom.cpp - starting weights from a safetensors file ------------===//
//
// The file is safetensors (an 8-byte little-endian header length, a JSON
// header {name: {dtype, shape, data_offsets}}, the data). Everything is
// checked before any parameter changes, so an error leaves the module as
// imported.
//
//===----------------------------------------------------------------------===//

#include "frontend/InitFrom.h"
#include "ir/CleaveOps.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstring>

using namespace mlir;

namespace {

/// The MLIR element type of a safetensors dtype; null when unknown.
Type elementTypeOf(MLIRContext *context, StringRef dtype) {
  Builder b(context);
  if (dtype == "F32")
    return b.getF32Type();
  if (dtype == "F16")
    return b.getF16Type();
  if (dtype == "BF16")
    return b.getBF16Type();
  if (dtype == "F64")
    return b.getF64Type();
  if (dtype == "I64")
    return b.getI64Type();
  if (dtype == "I32")
    return b.getI32Type();
  if (dtype == "I16")
    return b.getI16Type();
  if (dtype == "I8")
    return b.getI8Type();
  if (dtype == "BOOL")
    return b.getI1Type();
  return {};
}

std::string shapeText(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string typeText(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << type;
  return os.str();
}

struct FileTensor {
  std::string name;
  Type elementType;
  std::string dtype;
  SmallVector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

} // namespace

LogicalResult(::cleave::initParametersFrom)(ModuleOp module, StringRef path,
                                            int64_t &applied) {
  MLIRContext *context = module.getContext();
  Location loc = FileLineColLoc::get(context, path, 0, 0);
  applied = 0;
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return emitError(loc) << "cannot read --init-from file: "
                          << buffer.getError().message();
  StringRef data = (*buffer)->getBuffer();
  uint64_t headerSize = 0;
  if (data.size() >= 8)
    std::memcpy(&headerSize, data.data(), 8);
  if (data.size() < 8 || headerSize > data.size() - 8)
    return emitError(loc) << "not a safetensors file: the header length at "
                             "byte 0 does not fit the file's "
                          << data.size() << " bytes";
  StringRef body = data.drop_front(8 + headerSize);
  llvm::Expected<llvm::json::Value> header =
      llvm::json::parse(data.substr(8, headerSize));
  if (!header)
    return emitError(loc) << "not a safetensors file: its header is not "
                             "valid JSON: "
                          << llvm::toString(header.takeError());
  const llvm::json::Object *entries = header->getAsObject();
  if (!entries)
    return emitError(loc) << "not a safetensors file: its header is not a "
                             "JSON object";

  std::vector<FileTensor> tensors;
  for (const auto &[key, value] : *entries) {
    if (key == "__metadata__")
      continue;
    FileTensor t;
    t.name = key.str();
    const llvm::json::Object *o = value.getAsObject();
    const llvm::json::Array *shape = o ? o->getArray("shape") : nullptr;
    const llvm::json::Array *offsets =
        o ? o->getArray("data_offsets") : nullptr;
    std::optional<StringRef> dtype = o ? o->getString("dtype") : std::nullopt;
    bool ok = shape && offsets && dtype && offsets->size() == 2;
    for (size_t i = 0; ok && i < shape->size(); ++i) {
      std::optional<int64_t> d = (*shape)[i].getAsInteger();
      ok = d && *d >= 0;
      if (ok)
        t.shape.push_back(*d);
    }
    std::optional<int64_t> begin = ok ? (*offsets)[0].getAsInteger() : 0;
    std::optional<int64_t> end = ok ? (*offsets)[1].getAsInteger() : 0;
    if (!ok || !begin || !end || *begin < 0 || *end < *begin ||
        uint64_t(*end) > body.size())
      return emitError(loc) << "tensor '" << t.name
                            << "': dtype, shape or data_offsets missing, "
                               "malformed or outside the file";
    t.dtype = dtype->str();
    t.elementType = elementTypeOf(context, *dtype);
    if (!t.elementType)
      return emitError(loc) << "tensor '" << t.name << "' has dtype " << t.dtype
                            << ", which no parameter can have";
    t.begin = uint64_t(*begin);
    t.end = uint64_t(*end);
    tensors.push_back(std::move(t));
  }

  llvm::StringMap<mlir::cleave::ParameterOp> params;
  for (auto param : module.getOps<mlir::cleave::ParameterOp>())
    params[param.getSymName()] = param;
  std::vector<std::pair<mlir::cleave::ParameterOp, const FileTensor *>> uses;
  for (const FileTensor &t : tensors) {
    auto it = params.find(t.name);
    if (it == params.end()) {
      // Optimizer state of an export with --optimizer: the run starts a
      // fresh optimizer.
      StringRef name = t.name;
      bool state = false;
      for (StringRef suffix : {".exp_avg", ".exp_avg_sq", ".momentum_buffer"})
        state |= name.endswith(suffix) &&
                 params.count(name.drop_back(suffix.size()));
      if (state)
        continue;
      return emitError(loc)
             << "tensor '" << t.name
             << "' is not a parameter of the model; --init-from takes the "
                "model's own parameters, by ONNX initializer name (remove "
                "the tensor from the file, or compile the model it came "
                "from)";
    }
    auto type = it->second.getType().cast<RankedTensorType>();
    int64_t bytes = (type.getElementTypeBitWidth() + 7) / 8;
    for (int64_t d : type.getShape())
      bytes *= d;
    if (type.getShape() != ArrayRef<int64_t>(t.shape) ||
        type.getElementType() != t.elementType)
      return emitError(loc)
             << "tensor '" << t.name << "' is " << t.dtype << " "
             << shapeText(t.shape) << ", but the model's parameter is "
             << typeText(type.getElementType()) << " "
             << shapeText(type.getShape()) << ": the file is of another model";
    if (uint64_t(bytes) != t.end - t.begin)
      return emitError(loc)
             << "tensor '" << t.name << "' has " << (t.end - t.begin)
             << " bytes of data, its " << t.dtype << " " << shapeText(t.shape)
             << " needs " << bytes;
    uses.push_back({it->second, &t});
  }

  // Checked: now set the values.
  auto &blobs = DenseResourceElementsHandle::getManagerInterface(context);
  for (auto &[param, t] : uses) {
    ArrayRef<char> bytes(body.data() + t->begin, t->end - t->begin);
    AsmResourceBlob blob =
        HeapAsmResourceBlob::allocateAndCopyWithAlign(bytes, alignof(double));
    auto type = param.getType().cast<ShapedType>();
    if (auto old = param.getValueAttr()
                       .dyn_cast_or_null<DenseResourceElementsAttr>()) {
      // Replace the imported data in place: its memory is freed.
      DenseResourceElementsHandle handle = old.getRawHandle();
      handle.getResource()->setBlob(std::move(blob));
    } else {
      param.setValueAttr(DenseResourceElementsAttr::get(
          type, blobs.insert(param.getSymName(), std::move(blob))));
    }
    param.removeInitAttr();
    ++applied;
  }
  return success();
}
