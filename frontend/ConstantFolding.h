//===- ConstantFolding.h - evaluating ONNX nodes on the host ---*- C++ -*-===//
//
// Evaluates a node whose inputs are all known at import time. This is how
// the shape arithmetic, masks and position tables of traced exports become
// constants instead of ops.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_FRONTEND_CONSTANTFOLDING_H
#define CLEAVE_FRONTEND_CONSTANTFOLDING_H

#include "frontend/HostTensor.h"
#include "frontend/OnnxModel.h"

#include <optional>
#include <vector>

namespace cleave {

/// Whether `foldNode` evaluates ops of this type.
bool isFoldable(llvm::StringRef opType);

/// Evaluates `node` on `inputs` (null for an absent optional input). Returns
/// its outputs, or an error saying what is wrong with the node. `opset` is
/// the model's default-domain opset, which decides where some ops take their
/// axes from.
llvm::Expected<std::vector<HostTensor>>
foldNode(const onnx::NodeProto &node, llvm::ArrayRef<const HostTensor *> inputs,
         int64_t opset, llvm::StringRef modelDir, int64_t limitBytes);

/// Axes of Squeeze/Unsqueeze/Reduce*: an input from `sinceOpset` on (null
/// when absent), an attribute before.
std::vector<int64_t> axesOf(const onnx::NodeProto &node,
                            const HostTensor *axesInput, int64_t opset,
                            int64_t sinceOpset);

/// Decodes a Constant node's value (any of its value_* attributes).
llvm::Expected<HostTensor> constantValue(const onnx::NodeProto &node,
                                         llvm::StringRef modelDir);

} // namespace cleave

#endif // CLEAVE_FRONTEND_CONSTANTFOLDING_H
