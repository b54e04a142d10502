//===- RankProgram.h - one rank's program under construction ---*- C++ -*-===//
//
// The emitter's translation of IR into one rank's runtime/program.proto
// Program: tensors at their planned offsets (per buffer and activation
// slot), parameters, and each function's instructions (kernels, frees
// after last uses, collectives, sends and receives). It decides nothing:
// offsets come from cleave-memory-plan, peers and groups from the mesh and
// the collective ops, events from cleave-overlap-gradients. EmitProgram.cpp
// assembles the ranks' programs from it; EmitFunction.cpp translates a
// function's body.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PASSES_RANKPROGRAM_H
#define CLEAVE_PASSES_RANKPROGRAM_H

#include "ir/CleaveOps.h"
#include "ir/DistributionOps.h"
#include "ir/TensorGroups.h"
#include "passes/ProgramEncoding.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

#include <array>
#include <map>
#include <optional>
#include <utility>

namespace mlir::cleave {

/// Where a parameter's initial bytes lie in params.bin, and their SHA-256
/// (checked by cleave-run when it loads them).
struct ParamBytes {
  uint64_t offset = 0, size = 0;
  std::string sha256;
};
/// The ParamBytes of each parameter with data, by name.
using ParamFile = llvm::StringMap<ParamBytes>;

class RankProgram {
public:
  /// Translates into `program` (which may live on a protobuf arena).
  RankProgram(pb::Program &program, MeshAttr mesh, int64_t rank,
              const ParamFile &paramFile, int64_t seed)
      : program(program), mesh(mesh), rank(rank), paramFile(paramFile),
        seed(seed) {}

  pb::Program &program;

  /// Later functions' tensors go to `buffer`, whose plan puts the values
  /// of one microbatch in [slotBase, slotBase + slotBytes); slot 0.
  void setBuffer(int buffer, int64_t slotBase, int64_t slotBytes) {
    currentBuffer = buffer;
    this->slotBase = slotBase;
    this->slotBytes = slotBytes;
    hostBuffer = -1;
    hostSlotBytes = 0;
    setSlot(0);
  }
  /// Later functions' host values (activation offload) go to `buffer`
  /// (-1: none), whose plan puts those of one microbatch in
  /// [0, slotBytes).
  void setHostBuffer(int buffer, int64_t slotBytes) {
    hostBuffer = buffer;
    hostSlotBytes = slotBytes;
  }
  /// Later functions are emitted for copy `slot` of the per-microbatch
  /// region. Their values bind afresh: a function emitted again for
  /// another slot has the same IR values.
  void setSlot(int64_t slot) {
    currentSlot = slot;
    tensorOf.clear();
  }

  /// The module's parameters (and gradient buffers) as tensors of the
  /// current buffer, with where their initial values come from.
  LogicalResult addParameters(ModuleOp module);

  /// Appends `func` as a function of the program, named after it.
  LogicalResult emitFunction(func::FuncOp func);

  /// Numbers the events that `copy` (a last-microbatch copy of a backward)
  /// starts, after those already numbered: called in the order the rank's
  /// schedule runs them.
  void numberGradientEvents(func::FuncOp copy);

  /// Emits `copy`, the last-microbatch copy of a function whose emission
  /// added the tensors [tensors.first, tensors.second), as function `name`
  /// at the program's end. It runs in its original's storage: it uses those
  /// tensors, in order, and binds no inputs or outputs of its own.
  FailureOr<int> emitLastMicrobatchCopy(func::FuncOp copy,
                                        std::pair<int, int> tensors,
                                        const std::string &name);

private:
  /// A tensor at `offset` of the current buffer, or (`host`) of the host
  /// buffer.
  FailureOr<int> addTensor(Type type, int64_t offset, pb::Category category,
                           StringRef name, Operation *where, bool host = false);
  FailureOr<int> replayTensor(RankedTensorType type, int buffer,
                              int64_t offset, pb::DType dtype,
                              pb::Category category, StringRef name,
                              Operation *where);
  FailureOr<int> programEvent(Operation *op, int64_t event);
  int peerRank(StringRef axis, int64_t peer) const;
  FailureOr<int> groupIndex(StringRef axis,
                            std::optional<ArrayRef<int64_t>> members,
                            Operation *where, StringRef label = "tied");
  /// The group of a whole axis or of a sub-axis (made on first use).
  FailureOr<int> subAxisGroup(const AxisRef &ref, Operation *where);

  // EmitFunction.cpp: the instructions of a function body.
  LogicalResult bindInput(func::FuncOp func, BlockArgument arg);
  LogicalResult addAttributes(Operation &op, pb::Kernel *kernel);
  LogicalResult addDropoutAttributes(DropoutOp dropout, pb::Kernel *kernel);
  LogicalResult emitRecv(RecvOp recv, pb::Function *fn);
  LogicalResult emitUpdate(Operation &op, pb::Function *fn);
  LogicalResult emitSplitBucket(pb::Collective *c, ArrayAttr params,
                                StringRef groupName, bool gather,
                                Operation *op);
  LogicalResult emitGatherParam(GatherParamOp gather, pb::Function *fn);
  LogicalResult addSlice(ParameterOp param, pb::Parameter *p);
  LogicalResult addSplitViews(ParameterOp param, int64_t offset,
                              pb::Parameter *p);
  LogicalResult emitBucket(pb::Collective *c, ArrayAttr params,
                           StringRef groupName,
                           std::optional<ArrayRef<int64_t>> members,
                           StringRef reduce, Operation *op);
  void addFrees(Operation &op, pb::Function *fn,
                const llvm::DenseSet<Value> &freeable,
                llvm::DenseMap<Value, Operation *> &lastUser);

  MeshAttr mesh;
  int64_t rank;
  const ParamFile &paramFile;
  int64_t seed;

  llvm::DenseMap<Value, int> tensorOf;
  llvm::StringMap<int> paramTensor, gradTensor;
  // ZeRO-1 (a parameter with cleave.state_axis): its parameter and
  // gradient buffers seen flat and padded, and this rank's chunk of each.
  // With a working copy (cleave.working_type) the parameter's views are
  // of the copy, and `master` is the fp32 master chunk.
  struct SplitViews {
    int paramFlat, paramChunk, gradFlat = -1, gradChunk = -1, master = -1;
  };
  llvm::StringMap<SplitViews> splitViews;
  llvm::DenseSet<int> activationTensors;
  int currentBuffer = 0;
  int64_t slotBase = 0, slotBytes = 0, currentSlot = 0;
  int hostBuffer = -1;
  int64_t hostSlotBytes = 0;
  // While a last-microbatch copy is emitted: the next of its original's
  // tensors, which it uses instead of adding its own, and the end of them.
  int replayNext = -1, replayEnd = -1;
  // Program-wide ids of the started gradient all-reduces, by the IR's
  // event (unique on a rank), in the order the rank's schedule starts them.
  std::map<int64_t, int> gradientEvents;
  /// The started gathers' (cleave.gather_param with an event) program
  /// events, numbered after and between the gradients' so that no two
  /// collide: each starts and is waited for within one function.
  std::map<int64_t, int> gatherEvents;
  /// The started gradient buckets' (cleave.reduce_scatter with a
  /// cleave.event) program events, likewise.
  std::map<int64_t, int> scatterEvents;
  /// The first hops of started hierarchical gathers that a
  /// cleave.gather_next_hop completes, by the gather's IR event, likewise;
  /// and the second hop each then starts: {group, input, output}.
  std::map<int64_t, int> firstHopEvents;
  std::map<int64_t, std::array<int, 3>> secondHops;
  /// The program event of IR event `event` in `events`, numbered after
  /// every event numbered so far.
  int startedEvent(std::map<int64_t, int> &events, int64_t event) {
    return events
        .try_emplace(event, int(gradientEvents.size() + gatherEvents.size() +
                                scatterEvents.size() +
                                firstHopEvents.size()) +
                                1)
        .first->second;
  }
  /// A view whose value's space is another tensor's (a gathered
  /// parameter's whole shape, of its padded space): freed as that one.
  llvm::DenseMap<int, int> freedAs;
  int storageOf(int tensor) const {
    auto it = freedAs.find(tensor);
    return it == freedAs.end() ? tensor : it->second;
  }
};

} // namespace mlir::cleave

#endif // CLEAVE_PASSES_RANKPROGRAM_H
