//===- OnnxModel.h - reading ONNX files, tensors and attributes -*- C++ -*-===//
//
// Everything that touches the ONNX protobuf: parsing a ModelProto (with a
// size limit high enough for large graphs), decoding tensors inline or from
// external data files (refusing locations outside the model's folder), and
// reading node attributes with their defaults.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_FRONTEND_ONNXMODEL_H
#define CLEAVE_FRONTEND_ONNXMODEL_H

#include "frontend/HostTensor.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include "onnx/onnx_pb.h"

#include <memory>
#include <optional>
#include <vector>

namespace cleave {

/// Parses `path` as an ONNX ModelProto and checks it looks like one.
llvm::Expected<std::unique_ptr<onnx::ModelProto>>
readOnnxModel(llvm::StringRef path);

/// The raw little-endian bytes of a tensor, from its inline fields or its
/// external data file (resolved against `modelDir`). Returns std::nullopt
/// for a tensor that carries no data (a shapes-only export).
llvm::Expected<std::optional<std::vector<char>>>
readTensorBytes(const onnx::TensorProto &tensor, llvm::StringRef modelDir);

/// A tensor as a HostTensor (for constants).
llvm::Expected<HostTensor> decodeTensor(const onnx::TensorProto &tensor,
                                        llvm::StringRef modelDir);

/// Size in bytes of one element of `dtype`.
int64_t dtypeSize(DType dtype);

const onnx::AttributeProto *findAttr(const onnx::NodeProto &node,
                                     llvm::StringRef name);
int64_t intAttr(const onnx::NodeProto &node, llvm::StringRef name,
                int64_t defaultValue);
float floatAttr(const onnx::NodeProto &node, llvm::StringRef name,
                float defaultValue);
std::string stringAttr(const onnx::NodeProto &node, llvm::StringRef name,
                       llvm::StringRef defaultValue);
std::vector<int64_t> intsAttr(const onnx::NodeProto &node,
                              llvm::StringRef name);

} // namespace cleave

#endif // CLEAVE_FRONTEND_ONNXMODEL_H
