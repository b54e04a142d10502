//===- MemoryPlan.cpp - static offsets from liveness ----------------------===//
//
// Every tensor of a step gets a fixed offset in one arena, so the runtime
// allocates once and the plan's predicted peak is exactly what it uses.
// Parameters, constants and function inputs are live for the whole step;
// activations live from definition to last use and reuse freed space
// first-fit. Results are written as attributes (see Passes.td).
//
//===----------------------------------------------------------------------===//

#include "ir/CleaveOps.h"
#include "passes/Layout.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <map>

namespace mlir::cleave {
#define GEN_PASS_DEF_MEMORYPLAN
#include "passes/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// First-fit allocation with coalescing free blocks over a growing region;
/// `peak` is the high-water mark.
class Allocator {
public:
  explicit Allocator(int64_t alignment) : alignment(alignment) {}

  int64_t allocate(int64_t size) {
    size = alignUp(std::max<int64_t>(size, 1), alignment);
    for (auto it = freeBlocks.begin(); it != freeBlocks.end(); ++it) {
      if (it->second < size)
        continue;
      int64_t offset = it->first, left = it->second - size;
      freeBlocks.erase(it);
      if (left > 0)
        freeBlocks[offset + size] = left;
      return offset;
    }
    // Grow, reusing a free block that ends at the top.
    int64_t offset = top;
    if (!freeBlocks.empty()) {
      auto last = std::prev(freeBlocks.end());
      if (last->first + last->second == top) {
        offset = last->first;
        freeBlocks.erase(last);
      }
    }
    top = offset + size;
    peak = std::max(peak, top);
    return offset;
  }

  void release(int64_t offset, int64_t size) {
    size = alignUp(std::max<int64_t>(size, 1), alignment);
    auto next = freeBlocks.lower_bound(offset);
    if (next != freeBlocks.end() && offset + size == next->first) {
      size += next->second;
      next = freeBlocks.erase(next);
    }
    if (next != freeBlocks.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        prev->second += size;
        return;
      }
    }
    freeBlocks[offset] = size;
  }

  int64_t peak = 0;

private:
  int64_t alignment;
  int64_t top = 0;
  std::map<int64_t, int64_t> freeBlocks; // offset -> size
};

struct MemoryPlan : cleave::impl::MemoryPlanBase<MemoryPlan> {
  using MemoryPlanBase::MemoryPlanBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (alignment <= 0 || (alignment & (alignment - 1))) {
      module.emitError() << "cleave-memory-plan: alignment must be a power "
                            "of two, got "
                         << static_cast<int64_t>(alignment);
      return signalPassFailure();
    }
    Builder b(module.getContext());

    // Parameters first: they are shared by every function of the module.
    int64_t paramBytes = 0;
    for (auto param : module.getOps<ParameterOp>()) {
      param->setAttr("cleave.offset", b.getI64IntegerAttr(paramBytes));
      paramBytes += alignUp(tensorBytes(param.getType()), alignment);
    }
    for (auto func : module.getOps<func::FuncOp>())
      if (failed(planFunction(func, paramBytes)))
        return signalPassFailure();
  }

  LogicalResult planFunction(func::FuncOp func, int64_t paramBytes) {
    Builder b(func.getContext());
    if (!func.getBody().hasOneBlock())
      return func.emitError() << "cleave-memory-plan expects one block";
    Block &body = func.getBody().front();

    // Constants and inputs: live for the whole step, after the parameters.
    int64_t cursor = paramBytes, constantBytes = 0, ioBytes = 0;
    for (BlockArgument arg : body.getArguments()) {
      if (!arg.getType().isa<RankedTensorType>())
        return func.emitError() << "argument " << arg.getArgNumber()
                                << " is not a tensor";
      func.setArgAttr(arg.getArgNumber(), "cleave.offset",
                      b.getI64IntegerAttr(cursor));
      int64_t size = alignUp(tensorBytes(arg.getType()), alignment);
      cursor += size;
      ioBytes += size;
    }
    for (auto constant : body.getOps<ConstantOp>()) {
      constant->setAttr("cleave.offsets",
                        b.getDenseI64ArrayAttr({cursor}));
      int64_t size = alignUp(tensorBytes(constant.getType()), alignment);
      cursor += size;
      constantBytes += size;
    }
    int64_t activationBase = cursor;

    // Liveness: the index of each value's last use in block order.
    llvm::DenseMap<Value, int64_t> lastUse;
    llvm::DenseMap<Operation *, int64_t> index;
    int64_t i = 0;
    for (Operation &op : body) {
      index[&op] = i;
      for (Value operand : op.getOperands())
        lastUse[operand] = i;
      ++i;
    }

    Allocator activations(alignment);
    llvm::DenseMap<Value, int64_t> offsetOf;
    for (Operation &op : body) {
      if (isa<ConstantOp, GetParamOp>(op) || op.getNumResults() == 0)
        continue;
      SmallVector<int64_t> offsets;
      for (Value result : op.getResults()) {
        if (!result.getType().isa<RankedTensorType>())
          return op.emitError() << "result is not a tensor";
        int64_t offset = activations.allocate(tensorBytes(result.getType()));
        offsetOf[result] = offset;
        offsets.push_back(activationBase + offset);
      }
      op.setAttr("cleave.offsets", b.getDenseI64ArrayAttr(offsets));
      // Inputs are read while outputs are written, so an operand's space is
      // released only after the op that uses it last; a result nobody uses
      // is released at once.
      int64_t here = index[&op];
      for (Value result : op.getResults())
        if (!lastUse.count(result))
          activations.release(offsetOf[result], tensorBytes(result.getType()));
      llvm::SmallPtrSet<Value, 4> released;
      for (Value operand : op.getOperands()) {
        auto it = offsetOf.find(operand);
        if (it == offsetOf.end() || lastUse[operand] != here ||
            !released.insert(operand).second)
          continue;
        activations.release(it->second, tensorBytes(operand.getType()));
      }
    }
    // Values read by the terminator are released at the end, which is
    // where the scan ends anyway.

    int64_t activationPeak = alignUp(activations.peak, alignment);
    int64_t arena = activationBase + activationPeak;
    NamedAttrList memory;
    memory.append("arena_bytes", b.getI64IntegerAttr(arena));
    memory.append("peak_bytes", b.getI64IntegerAttr(arena));
    memory.append("parameters", b.getI64IntegerAttr(paramBytes));
    memory.append("constants", b.getI64IntegerAttr(constantBytes));
    memory.append("io", b.getI64IntegerAttr(ioBytes));
    memory.append("activations", b.getI64IntegerAttr(activationPeak));
    memory.append("gradients", b.getI64IntegerAttr(0));
    memory.append("optimizer_state", b.getI64IntegerAttr(0));
    memory.append("workspace", b.getI64IntegerAttr(0));
    memory.append("alignment", b.getI64IntegerAttr(alignment));
    func->setAttr("cleave.memory", memory.getDictionary(func.getContext()));
    return success();
  }
};

} // namespace
