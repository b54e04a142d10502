//===- ProgramEncoding.cpp - IR values in the runtime's words ------------===//
//
// Element types, constant bytes, attributes and function kinds as
// runtime/program.proto spells them (ProgramEncoding.h).
//
//===----------------------------------------------------------------------===//

#include "passes/ProgramEncoding.h"

#include "ir/CleaveOps.h"
#include "passes/Layout.h"

#include <climits>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "mlir/IR/DialectResourceBlobManager.h"

using namespace mlir;
using namespace mlir::cleave;

bool mlir::cleave::serializeProgram(const pb::Program &program,
                                    std::string &bytes) {
  // Sized once, then written in place (a string grown piece by piece
  // costs as much as the writing for a program of a large model).
  size_t size = program.ByteSizeLong();
  if (size > size_t(INT_MAX))
    return false;
  bytes.resize(size);
  google::protobuf::io::ArrayOutputStream stream(bytes.data(), int(size));
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  program.SerializeWithCachedSizes(&coded);
  return !coded.HadError() && size_t(coded.ByteCount()) == size;
}

FailureOr<pb::DType> mlir::cleave::dtypeOf(Type element, Operation *where) {
  if (element.isF32())
    return pb::F32;
  if (element.isF16())
    return pb::F16;
  if (element.isBF16())
    return pb::BF16;
  if (element.isF64())
    return pb::F64;
  if (element.isInteger(1))
    return pb::BOOL;
  if (auto i = element.dyn_cast<IntegerType>()) {
    bool u = i.isUnsigned();
    switch (i.getWidth()) {
    case 8:
      return u ? pb::U8 : pb::I8;
    case 16:
      return u ? pb::U16 : pb::I16;
    case 32:
      return u ? pb::U32 : pb::I32;
    case 64:
      return u ? pb::U64 : pb::I64;
    }
  }
  where->emitError() << "the runtime has no element type for " << element;
  return failure();
}

FailureOr<std::string> mlir::cleave::bytesOf(ElementsAttr value,
                                             Operation *where) {
  auto type = value.getType().cast<RankedTensorType>();
  int64_t n = type.getNumElements();
  Type element = type.getElementType();
  if (auto resource = value.dyn_cast<DenseResourceElementsAttr>()) {
    const AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return where->emitError()
             << "the data of resource '" << resource.getRawHandle().getKey()
             << "' is missing";
    ArrayRef<char> data = blob->getData();
    if ((int64_t)data.size() != tensorBytes(type))
      return where->emitError()
             << "resource holds " << data.size() << " bytes, but " << type
             << " needs " << tensorBytes(type);
    return std::string(data.data(), data.size());
  }
  auto dense = value.dyn_cast<DenseElementsAttr>();
  if (!dense)
    return where->emitError()
           << "cannot emit a value of attribute kind " << value;
  std::string out;
  if (element.isInteger(1)) {
    out.reserve(n);
    for (bool v : dense.getValues<bool>())
      out.push_back(v ? 1 : 0);
    return out;
  }
  if (dense.isSplat()) {
    ArrayRef<char> raw = dense.getRawData();
    std::string one(raw.data(), raw.size());
    out.reserve(one.size() * n);
    for (int64_t i = 0; i < n; ++i)
      out += one;
    return out;
  }
  ArrayRef<char> raw = dense.getRawData();
  return std::string(raw.data(), raw.size());
}

LogicalResult mlir::cleave::convertAttribute(Attribute attr,
                                             pb::Attribute &out) {
  if (auto i = attr.dyn_cast<IntegerAttr>()) {
    out.set_i(i.getType().isInteger(1) ? (int64_t)i.getValue().getBoolValue()
                                       : i.getValue().getSExtValue());
  } else if (auto f = attr.dyn_cast<FloatAttr>()) {
    out.set_f(f.getValueAsDouble());
  } else if (auto b = attr.dyn_cast<BoolAttr>()) {
    out.set_i(b.getValue());
  } else if (attr.isa<UnitAttr>()) {
    out.set_i(1);
  } else if (auto s = attr.dyn_cast<StringAttr>()) {
    out.set_s(s.getValue().str());
  } else if (auto a = attr.dyn_cast<DenseI64ArrayAttr>()) {
    auto *ints = out.mutable_ints();
    for (int64_t v : a.asArrayRef())
      ints->add_values(v);
  } else if (auto r = attr.dyn_cast<LossReductionAttr>()) {
    out.set_s(stringifyLossReduction(r.getValue()).str());
  } else {
    return failure();
  }
  return success();
}

int64_t mlir::cleave::intFrom(DictionaryAttr dict, StringRef key) {
  if (auto attr = dict ? dict.getAs<IntegerAttr>(key) : IntegerAttr())
    return attr.getInt();
  return 0;
}

pb::FunctionKind mlir::cleave::kindOf(func::FuncOp func) {
  auto kind = func->getAttrOfType<StringAttr>("cleave.kind");
  if (kind && kind.getValue() == "backward")
    return pb::BACKWARD;
  if (kind && kind.getValue() == "optimizer")
    return pb::OPTIMIZER;
  if (kind && kind.getValue() == "refresh")
    return pb::REFRESH;
  return pb::FORWARD;
}
