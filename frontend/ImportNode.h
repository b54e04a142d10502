//===- ImportNode.h - what an ONNX op's import handler sees -----*- C++ -*-===//
//
// The importer maps each ONNX node through a table from op type to handler
// (`onnxOpTable()`); the handlers live in one file per op family
// (ImportElementwise.cpp, ImportMovement.cpp, ImportNN.cpp, ...). A handler
// gets a `NodeImport`: the node, its location, typed access to its inputs
// (run-time values, host constants or parameters not read yet) and the
// builders every handler needs. Adding an op is a handler and one line in
// its family's `register...Ops` function.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_FRONTEND_IMPORTNODE_H
#define CLEAVE_FRONTEND_IMPORTNODE_H

#include "frontend/HostTensor.h"
#include "frontend/OnnxModel.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringMap.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace cleave {

class GraphImporter;

/// A value of the ONNX graph as the importer holds it: exactly one of an SSA
/// value, a host constant, or a parameter that is read on first use.
struct ImportedValue {
  mlir::Value value;
  std::shared_ptr<HostTensor> constant;
  std::string param;
  mlir::RankedTensorType type;
};

/// One node being imported. Handlers read inputs by position and define
/// outputs by position; every op they build is located at the node.
class NodeImport {
public:
  NodeImport(GraphImporter &graph, const onnx::NodeProto &node,
             mlir::Location loc);
  NodeImport(const NodeImport &) = default;

  GraphImporter &graph;
  const onnx::NodeProto &node;
  mlir::Location loc;
  llvm::StringRef op;
  mlir::OpBuilder &builder;
  mlir::MLIRContext &context;
  int64_t opset;
  /// The model file's folder (external data of Constant nodes).
  std::string modelDir;
  /// ImportOptions::foldLimitBytes: what a value computed while importing
  /// may take (0: the machine's memory).
  int64_t foldLimit;

  /// Whether optional input `i` is given.
  bool has(int i) const {
    return i < node.input_size() && !node.input(i).empty();
  }
  const ImportedValue &tensor(int i) const;
  /// Input `i` as an SSA value (a constant is materialized, a parameter read).
  mlir::FailureOr<mlir::Value> value(int i);
  /// Any imported value as an SSA value.
  mlir::FailureOr<mlir::Value> valueOf(const ImportedValue &t);
  mlir::RankedTensorType type(int i) const { return tensor(i).type; }
  llvm::ArrayRef<int64_t> shape(int i) const { return type(i).getShape(); }
  /// Input `i` if it is known at compile time, else null.
  const HostTensor *constant(int i) const {
    return has(i) ? tensor(i).constant.get() : nullptr;
  }
  /// An operand that must be known at compile time (shapes, axes, bounds);
  /// reports an error naming it and returns null when it is not.
  const HostTensor *requireConstant(int i, llvm::StringRef what);
  /// The padding row of parameter `param` (an embedding table) from the
  /// model's `cleave.padding_idx` metadata, if it has one; marks it used.
  std::optional<int64_t> paddingRow(llvm::StringRef param);
  /// Whether output `i` is named and read by a node or returned (scans the
  /// graph: for optional outputs that are costly to build, Dropout's mask).
  bool outputRead(int i) const;
  /// Defines output `i` (if the node names it).
  void out(mlir::Value v, int i = 0);
  /// Defines output `i` as a host constant.
  mlir::LogicalResult outConstant(HostTensor t, int i = 0);
  /// Defines output `i` as `t`, whatever it holds.
  void outValue(const ImportedValue &t, int i);
  /// The value named `name` so far, or null.
  const ImportedValue *lookup(llvm::StringRef name) const;
  /// Imports the nodes of a subgraph (an If branch) in place; its outputs
  /// are then found by lookup().
  mlir::LogicalResult importSubgraph(const onnx::GraphProto &subgraph);

  mlir::InFlightDiagnostic error(mlir::Location at) {
    return mlir::emitError(at);
  }
  mlir::LogicalResult report(llvm::Error e) {
    return error(loc) << op << ": " << llvm::toString(std::move(e));
  }
  /// Reports a host value that cannot be built (too large for 64-bit counts
  /// or this machine), naming the graph inputs its shape follows from.
  mlir::LogicalResult foldError(llvm::Error e);

  mlir::IntegerAttr i64(int64_t v) { return builder.getI64IntegerAttr(v); }
  mlir::DenseI64ArrayAttr arrayAttr(llvm::ArrayRef<int64_t> v) {
    return builder.getDenseI64ArrayAttr(v);
  }
  mlir::Value materialize(const HostTensor &t, mlir::Location at);
  mlir::FailureOr<mlir::Type> elementType(DType dtype, mlir::Location at,
                                          llvm::StringRef what);
  mlir::Value reshape(mlir::Value v, llvm::ArrayRef<int64_t> to);
  mlir::Value cast(mlir::Value v, mlir::Type element);
  /// Binary operands: a constant takes the other side's element type (ONNX
  /// exporters write `x * 0.5` with a scalar of either type).
  mlir::FailureOr<std::pair<mlir::Value, mlir::Value>> binaryOperands(int a,
                                                                      int b);

  /// Builds `OpTy` with its inferred result type (failing with the op's own
  /// shape diagnostics).
  template <typename OpTy>
  mlir::FailureOr<mlir::Value>
  inferred(mlir::Location at, llvm::ArrayRef<mlir::Value> operands,
           const llvm::SmallVector<mlir::NamedAttribute> &attrs = {}) {
    llvm::SmallVector<mlir::Type> types;
    auto dict = mlir::DictionaryAttr::get(&context, attrs);
    if (mlir::failed(OpTy::inferReturnTypes(
            &context, at, mlir::ValueRange(operands), dict, {}, types)))
      return mlir::failure();
    return builder.create<OpTy>(at, types, operands, attrs)->getResult(0);
  }
};

using OnnxOpHandler = mlir::LogicalResult (*)(NodeImport &);
using OnnxOpTable = llvm::StringMap<OnnxOpHandler>;

/// Every op the importer maps into the dialect (or only evaluates at compile
/// time), by ONNX op type.
const OnnxOpTable &onnxOpTable();

// One per family file; each adds its ops to the table.
void registerConstantOps(OnnxOpTable &table);
void registerElementwiseOps(OnnxOpTable &table);
void registerMovementOps(OnnxOpTable &table);
void registerNNOps(OnnxOpTable &table);
void registerReductionOps(OnnxOpTable &table);
void registerLossOps(OnnxOpTable &table);
void registerControlFlowOps(OnnxOpTable &table);

} // namespace cleave

#endif // CLEAVE_FRONTEND_IMPORTNODE_H
