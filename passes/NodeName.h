//===- NodeName.h - the ONNX node an op came from ---------------*- C++ -*-===//
//
// The importer locates every op by its ONNX node's name (a NameLoc, maybe
// inside a FusedLoc); passes read it back to name nodes to the user.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_PASSES_NODENAME_H
#define CLEAVE_PASSES_NODENAME_H

#include "mlir/IR/Location.h"
#include "mlir/IR/Operation.h"

#include <string>

namespace mlir::cleave {

/// The ONNX node name of `loc`, or "" when it has none.
inline std::string onnxNodeName(Location loc) {
  if (auto name = loc.dyn_cast<NameLoc>())
    return name.getName().str();
  if (auto fused = loc.dyn_cast<FusedLoc>())
    for (Location inner : fused.getLocations())
      if (auto name = inner.dyn_cast<NameLoc>())
        return name.getName().str();
  return "";
}

/// `op` as a diagnostic names it: "cleave.matmul (ONNX node 'name')", or
/// the op's name alone when it has no node.
inline std::string describeOp(Operation *op) {
  std::string out = op->getName().getStringRef().str();
  std::string name = onnxNodeName(op->getLoc());
  if (!name.empty())
    out += " (ONNX node '" + name + "')";
  return out;
}

} // namespace mlir::cleave

#endif // CLEAVE_PASSES_NODENAME_H
