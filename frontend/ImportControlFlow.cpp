//===- ImportControlFlow.cpp - ONNX If to cleave IR ----------------------===//
//
// Cleave compiles one static graph, so control flow is resolved at compile
// time. An If whose condition folds (typically shape arithmetic of a
// dynamic-batch export, which folds once the batch is bound) is replaced by
// the nodes of the branch it takes. One whose condition is computed at run
// time imports both branches, which must then give the same types, and
// selects between their results (both are computed: ONNX branches have no
// side effects).
//
//===----------------------------------------------------------------------===//

#include "frontend/ImportNode.h"
#include "frontend/OnnxShapes.h"
#include "ir/CleaveOps.h"

using namespace mlir;
using namespace mlir::cleave;
using ::cleave::findAttr;
using ::cleave::HostTensor;
using ::cleave::ImportedValue;
using ::cleave::NodeImport;

namespace {

struct ControlFlow : NodeImport {
  ControlFlow(const NodeImport &n) : NodeImport(n) {}

  const onnx::GraphProto *branch(const char *name) {
    const onnx::AttributeProto *attr = findAttr(node, name);
    if (!attr || !attr->has_g()) {
      error(loc) << "If has no " << name << " graph attribute";
      return nullptr;
    }
    if (attr->g().output_size() != node.output_size()) {
      error(loc) << "If's " << name << " has " << attr->g().output_size()
                 << " outputs, but the node has " << node.output_size();
      return nullptr;
    }
    return &attr->g();
  }

  /// Imports `graph` and returns its outputs.
  FailureOr<SmallVector<ImportedValue>>
  importBranch(const onnx::GraphProto &g) {
    if (failed(importSubgraph(g)))
      return failure();
    SmallVector<ImportedValue> results;
    for (const auto &output : g.output()) {
      const ImportedValue *v = lookup(output.name());
      if (!v) {
        error(loc) << "If's branch '" << g.name() << "' has output '"
                   << output.name() << "', which none of its nodes produces";
        return failure();
      }
      results.push_back(*v);
    }
    return results;
  }

  LogicalResult ifOp() {
    const onnx::GraphProto *thenBranch = branch("then_branch");
    const onnx::GraphProto *elseBranch =
        thenBranch ? branch("else_branch") : nullptr;
    if (!elseBranch)
      return failure();
    if (type(0).getNumElements() != 1 || !type(0).getElementType().isInteger(1))
      return error(loc) << "If's condition must be one bool, got " << type(0);
    if (const HostTensor *c = constant(0)) {
      auto taken = importBranch(c->getInt(0) ? *thenBranch : *elseBranch);
      if (failed(taken))
        return failure();
      for (auto [i, v] : llvm::enumerate(*taken))
        outValue(v, i);
      return success();
    }
    auto cond = value(0);
    auto thenValues = importBranch(*thenBranch);
    auto elseValues = importBranch(*elseBranch);
    if (failed(cond) || failed(thenValues) || failed(elseValues))
      return failure();
    Value flag = reshape(*cond, {});
    for (int i = 0; i < node.output_size(); ++i) {
      ImportedValue &a = (*thenValues)[i], &b = (*elseValues)[i];
      if (a.type != b.type)
        return error(loc)
               << "If's condition '" << node.input(0)
               << "' is computed at run time and its branches give output " << i
               << " different types (" << a.type << " and " << b.type
               << "); Cleave compiles static shapes, so the condition must "
                  "be known at compile time (bind the batch with --batch N "
                  "if it comes from shapes)";
      auto va = valueOf(a), vb = valueOf(b);
      if (failed(va) || failed(vb))
        return failure();
      auto r = inferred<SelectOp>(loc, {flag, *va, *vb});
      if (failed(r))
        return failure();
      out(*r, i);
    }
    return success();
  }
};

} // namespace

void ::cleave::registerControlFlowOps(::cleave::OnnxOpTable &table) {
  table["If"] = [](NodeImport &n) { return ControlFlow(n).ifOp(); };
}
