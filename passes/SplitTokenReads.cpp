//===- SplitTokenReads.cpp - tensor ranks read their part of the batch ---===//
//
// SMP's `prescaled_batch: false` (docs/spec-keys.md): the ranks of a
// tensor-parallel group do not all read the group's samples from the token
// file; each reads its own part of every microbatch, and the group
// all-gathers the parts. A token-ids or targets argument `[batch, seq]`
// becomes the rank's `[batch / T, seq]`, marked `cleave.read_parts = T`,
// and a `cleave.all_gather` over the `tensor` axis along dimension 0,
// just before the first op that reads it, makes the whole microbatch
// again. The samples are the same, in the same order, so no number
// changes; what changes is what each rank reads, and one small integer
// all-gather per microbatch. A microbatch the degree does not divide is
// read whole by every rank, with a remark and a plan note.
//
//===----------------------------------------------------------------------===//

#include "ir/AttrNames.h"
#include "ir/CleaveOps.h"
#include "ir/DistributionOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_SPLITTOKENREADS
#include "passes/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

struct SplitTokenReads
    : mlir::cleave::impl::SplitTokenReadsBase<SplitTokenReads> {
  using SplitTokenReadsBase::SplitTokenReadsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto mesh = module->getAttrOfType<MeshAttr>(kMeshAttr);
    int64_t parts = mesh ? mesh.getAxisSize(kTensorAxis).value_or(1) : 1;
    if (parts < 2)
      return;
    OpBuilder b(module.getContext());
    ArrayAttr axes = b.getStrArrayAttr({kTensorAxis});
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      SmallVector<Type> inputs(func.getArgumentTypes());
      bool changed = false;
      for (BlockArgument arg : func.getArguments()) {
        unsigned i = arg.getArgNumber();
        auto role = func.getArgAttrOfType<StringAttr>(i, kRoleAttr);
        if (!role ||
            (role.getValue() != "tokens" && role.getValue() != "targets") ||
            func.getArgAttr(i, kReadPartsAttr))
          continue;
        auto whole = arg.getType().cast<RankedTensorType>();
        int64_t samples = whole.getDimSize(0);
        if (samples % parts != 0) {
          func.emitRemark()
              << "prescaled_batch: false: the microbatch of " << samples
              << " samples does not divide over the " << parts
              << " tensor-parallel ranks, so each of them reads the whole "
                 "microbatch of '"
              << role.getValue() << "' (as with prescaled_batch: true)";
          addNote(module, samples, parts);
          continue;
        }
        SmallVector<int64_t> shape(whole.getShape());
        shape[0] = samples / parts;
        auto part = RankedTensorType::get(shape, whole.getElementType());
        arg.setType(part);
        inputs[i] = part;
        func.setArgAttr(i, kReadPartsAttr, b.getI64IntegerAttr(parts));
        // Just before the first reader, so that a pipeline partition puts
        // the gather in the stage that reads the ids (the targets' in the
        // last), not in the first one with a transfer after it.
        Operation *first = nullptr;
        for (Operation *user : arg.getUsers()) {
          Operation *top = func.getBody().front().findAncestorOpInBlock(*user);
          if (top && (!first || top->isBeforeInBlock(first)))
            first = top;
        }
        if (first)
          b.setInsertionPoint(first);
        else
          b.setInsertionPointToStart(&func.getBody().front());
        // At its reader's ONNX node: the gather is part of that node's
        // work (the cut points and the report group ops by node).
        Value gathered = b.create<AllGatherOp>(
            first ? first->getLoc() : func.getLoc(), whole, arg, axes,
            b.getI64IntegerAttr(0));
        arg.replaceAllUsesExcept(gathered, gathered.getDefiningOp());
        changed = true;
      }
      if (changed)
        func.setType(FunctionType::get(func.getContext(), inputs,
                                       func.getResultTypes()));
    }
  }

  /// plan.json's notes say that the split was not made, instead of the
  /// spec's note on the key (which says it was).
  void addNote(ModuleOp module, int64_t samples, int64_t parts) {
    Builder b(module.getContext());
    auto old = module->getAttrOfType<ArrayAttr>("cleave.spec_notes");
    SmallVector<Attribute> notes;
    for (Attribute a : old ? old.getValue() : ArrayRef<Attribute>()) {
      auto note = a.dyn_cast<DictionaryAttr>();
      auto key = note ? note.getAs<StringAttr>("key") : StringAttr();
      if (key && key.getValue() == "prescaled_batch")
        continue;
      notes.push_back(a);
    }
    std::string why = "the microbatch of " + std::to_string(samples) +
                      " samples does not divide over the " +
                      std::to_string(parts) +
                      " tensor-parallel ranks: every rank of a group reads "
                      "the group's samples, as with true";
    notes.push_back(b.getDictionaryAttr(
        {b.getNamedAttr("key", b.getStringAttr("prescaled_batch")),
         b.getNamedAttr("value", b.getStringAttr("false")),
         b.getNamedAttr("why", b.getStringAttr(why))}));
    module->setAttr("cleave.spec_notes", b.getArrayAttr(notes));
  }
};

} // namespace
