//===- Executor.h - runs a validated per-rank program on a backend -*- C++ -*-===//
//
// A Runtime owns everything a running program needs: its Backend (CPU or
// CUDA, runtime/Backend.h) with its arenas (Arena.h), the prepared
// instructions, the live-tensor accounting and the communicator groups
// (STYLE.md rule 9: no global state, so tests run several in one process).
//
// What the runtime does with a program (the compiler emits to this):
//  - Memory. Each Buffer is one zero-filled arena aligned to at least 64
//    bytes. Constants are copied in at initialize(); optimizer state and
//    anything else not written starts at zero.
//  - Parameters. FileData reads the slice [slice_start, slice_start +
//    slice_size) of the full row-major tensor stored at `offset` of the
//    file, or with pieces the boxes concatenated (parameterRuns,
//    Parameters.h), or with flat_range that range of them. Generators: "zeros", "ones", "normal:STD", where element k of the
//    FULL tensor (row-major index; so any slice equals the slice of a full
//    init) is STD * sqrt(-2 ln u1) * cos(2 pi u2) with
//      key = splitmix64(seed ^ fnv1a64(name)),
//      u_j = ((splitmix64(key ^ splitmix64(2k + j - 1)) >> 11) + 0.5) / 2^53
//    (streamKey and uniform53 of Random.h).
//  - A step runs the schedule in order. Before a Step of microbatch m >= 0,
//    every TOKENS / TARGETS tensor the step's function reads receives
//    microbatch m's ids / targets: samples first_sample + m*microbatch_size
//    + i, i < microbatch_size, of the step's global batch (TokenData).
//  - Random streams (Random.h). A dropout kernel receives three attributes
//    from the runtime besides the program's: `step` (the data step, from
//    0, as TokenData reads it), `first_sample` (the index within the
//    step's global batch of the first sample of the microbatch the running
//    function computes: first_sample + m*microbatch_size) and `samples`
//    (microbatch_size). Its mask is keyed by them (ops/DropoutStream.h), so
//    a forward, its backward and a recomputation draw the same mask, and
//    so does every layout (docs/dropout.md).
//  - At the start of each training step every GRADIENTS tensor is zeroed,
//    so backward functions may accumulate into gradients from the first
//    microbatch on.
//  - Before a training step runs, every STEP input (an i64 scalar) is set
//    to the number of optimizer steps taken so far + 1: the optimizer's
//    1-based step count, which adamw's bias corrections and the
//    learning-rate schedule read. Without loss scaling that is s + 1 for
//    step s (from 0).
//  - Loss scaling (Program.loss_scaling, fp16): every LOSS_SCALE input is
//    set to the current scale before the step. Before the step's first
//    OPTIMIZER function the gradients are checked on all ranks: if any
//    element is not finite the step's OPTIMIZER functions are skipped
//    (StepResult.skipped); else every GRADIENTS tensor is divided by the
//    scale. The scale then follows LossScaler.
//  - After a Step whose function writes a LOSS tensor, the tensor is read:
//    it must hold that microbatch's mean loss (for a LOSS written by a
//    once-per-step function, the mean over the step). The step's loss is the
//    mean of all values read, on all ranks of the world (a sum and a count
//    all-reduced): with equal microbatches that is the mean over the global
//    batch whatever the layout, and tensor-parallel replicas of the loss
//    count equally.
//  - --forward-only runs only the FORWARD functions of the schedule.
//  - Collectives run over mesh.groups[group]; SendRecv is a started send
//    and a blocking receive with a world rank (the schedule must order them
//    so that they cannot deadlock); Copy is the backend's copy; an Event
//    that waits completes the all-reduces started under its id; Free ends a
//    tensor's life for the accounting. On a backend whose memory is not
//    host memory, communication is the backend's own (NCCL) or MPI on host
//    copies that the runtime downloads before and uploads after.
//  - Measured peak ("peak_bytes"): the high-water mark of the bytes of live
//    tensors. Parameters and constants are always live; any other tensor
//    becomes live when an instruction writes it or the runtime fills it,
//    and dead at its Free. Tensors of HOST buffers (offloaded activations,
//    in host memory on every backend; only Copy reads and writes them)
//    count apart, as the host peak. The plan predicts both per rank
//    (MemoryPlan.live_peak_bytes, host_live_peak_bytes) for a step that
//    updates the parameters after an earlier step did, every tensor that is
//    never freed (gradients, optimizer state) written by then: from the
//    second such step on the measured peaks equal them (StepResult's
//    per-rank vectors). A first step, or steps whose update fp16 loss
//    scaling skipped, measure less.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_EXECUTOR_H
#define CLEAVE_RUNTIME_EXECUTOR_H

#include "runtime/Arena.h"
#include "runtime/Backend.h"
#include "runtime/Checkpoint.h"
#include "runtime/Communicator.h"
#include "runtime/Json.h"
#include "runtime/LossScaler.h"
#include "runtime/Parameters.h"
#include "runtime/Trace.h"
#include "runtime/Safetensors.h"
#include "runtime/Status.h"
#include "runtime/Tensor.h"
#include "runtime/TokenData.h"
#include "runtime/ops/OpTable.h"

#include "program.pb.h"

#include <cstdint>
#include <string>
#include <vector>

namespace cleave::runtime {

struct RunOptions {
  bool forwardOnly = false; // run only the FORWARD functions
  bool trace = false;       // record a TraceRecorder span per function run
};

/// The parts of the measured device live peak (StepResult::
/// peakCategoriesByRank): parameters, gradients, optimizer state, gathered
/// parameters (the ACTIVATIONS tensors a forward or backward ALL_GATHER
/// writes: ZeRO-3's gathers), the other activations, and the rest
/// (constants, step inputs and outputs, workspace).
constexpr int kPeakCategories = 6;
const char *peakCategoryName(int category);

/// What one step measured, already combined over the world.
struct StepResult {
  bool hasLoss = false;
  double loss = 0;    // mean over the global batch
  double seconds = 0; // this rank's wall time of the step
  double flops = 0;   // kernelFlops of the step, summed over all ranks
  uint64_t peakBytes = 0;          // measured, max over ranks, since start
  uint64_t predictedPeakBytes = 0; // the memory plan's, max over ranks
  uint64_t rssPeakBytes = 0;       // process peak RSS, max over ranks
  uint64_t hostPeakBytes = 0;          // measured, HOST buffers, max over ranks
  uint64_t predictedHostPeakBytes = 0; // the plan's host arenas, max over ranks
  // Per rank (index = world rank): the measured live peak since start
  // (peakBytes, hostPeakBytes of that rank alone) and the plan's
  // prediction of it (MemoryPlan.live_peak_bytes, .host_live_peak_bytes).
  std::vector<uint64_t> livePeakByRank, predictedLivePeakByRank;
  std::vector<uint64_t> hostLivePeakByRank, predictedHostLivePeakByRank;
  // Per rank, what the measured device live peak (livePeakByRank) was made
  // of at the moment it was reached: kPeakCategories entries per rank
  // (index = rank * kPeakCategories + category, peakCategoryName's order).
  std::vector<uint64_t> peakCategoriesByRank;
  // Per rank, each category's own high-water mark since start (the same
  // layout): the most gathered parameters live at once, which plan.json's
  // gathered_parameters predicts, need not be live at the peak.
  std::vector<uint64_t> categoryPeaksByRank;
  bool lossScaled = false; // the program scales its loss (fp16)
  double lossScale = 0;    // the scale this step used
  bool skipped = false;    // gradients overflowed: no optimizer step
};

/// The FLOPs of one kernel that the progress line counts (Flops.cpp):
/// 2*M*N*K of a matmul (either operand possibly transposed),
/// 4*B*H*Tq*Tk*D of an attention (two products), 10*B*H*Tq*Tk*D of an
/// attention_grad (five: it recomputes the scores); 0 for the rest, which
/// are memory-bound and small by comparison. A causal attention counts in
/// full.
double kernelFlops(const std::string &op, const Attributes &attributes,
                   const std::vector<TensorRef> &inputs,
                   const std::vector<TensorRef> &outputs);

/// Process peak resident set size in bytes.
uint64_t processPeakRss();

class Runtime {
public:
  /// `program` must have passed validateProgram and outlive the Runtime;
  /// FileData paths are resolved against `directory`; `comm` is the world
  /// (its groups are created by initialize()); `backend` runs it (null: the
  /// CPU's).
  Runtime(const program::Program &program, std::string directory,
          Communicator &comm, RunOptions options = {},
          std::unique_ptr<Backend> backend = nullptr);
  Runtime(const Runtime &) = delete;
  Runtime &operator=(const Runtime &) = delete;
  ~Runtime();

  /// Creates the communicator groups, allocates and fills the arenas, loads
  /// or generates the parameters and prepares every instruction.
  Status initialize();

  /// Runs training step `step` (from 0): the schedule once. `data` may be
  /// null for a program without TOKENS / TARGETS.
  Status runStep(int64_t step, const TokenData *data, StepResult &result);

  // Parameters.cpp: parameters in (initializeParameter) and out.

  /// Every parameter, full tensors assembled from the slices of all ranks
  /// (collective over the world; only rank 0 gets them).
  Status gatherParameters(std::vector<NamedTensor> &full);
  /// This rank's part of gatherParameters: its parameters' slices (boxes,
  /// flat ranges) and bytes, for assembleParameters (Parameters.h).
  Status parameterSlices(std::string &slices);
  /// gatherParameters, then rank 0 writes them to `path` as safetensors.
  Status saveParameters(const std::string &path);

  // Checkpoint.cpp: saving, resuming and resharding on load.

  /// Starts the checkpoint of `steps` training steps done to
  /// checkpointFolder(root, steps) (Checkpoint.h): every rank copies its
  /// state to host memory now and writes its file on a thread of its own
  /// (CheckpointWriter) while training goes on; finishCheckpoint commits
  /// it. A save still pending is finished first (one at a time). `data`
  /// (may be null) is the token file the run reads. Collective; a
  /// checkpoint already complete there is kept.
  Status startCheckpoint(const std::string &root, int64_t steps,
                         const TokenData *data, CheckpointSaveTimes &times);
  /// Lays out this rank's checkpoint file and allocates the host memory
  /// its saves copy the state to (page-locked on CUDA), so that the first
  /// save does not wait for it; a save does it by itself otherwise.
  /// Collective (the ranks agree which of them writes a shared piece).
  Status reserveCheckpointMemory();
  /// Whether a started save is not committed yet (the same on every rank).
  bool checkpointPending() const { return checkpoint_.pending(); }
  /// Whether this rank's writer has finished (ranks differ).
  bool checkpointWritten() const { return checkpoint_.finished(); }
  /// Waits for this rank's writer, then commits the pending save: the
  /// ranks agree that all files are durable, rank 0 writes the manifest
  /// last. Collective; nothing to do when none is pending.
  Status finishCheckpoint(CheckpointSaveTimes &times);
  /// startCheckpoint and finishCheckpoint: a save whose checkpoint is
  /// complete when it returns.
  Status saveCheckpoint(const std::string &root, int64_t steps,
                        const TokenData *data, CheckpointSaveTimes &times);
  /// Restores the state saved in checkpoint folder `folder` (a step-S) and
  /// sets `steps` to its step, whatever layout wrote it: each rank reads
  /// the slices it holds by name from the files that hold them (on the same
  /// layout, its own file). Every rank checks every file it reads (size,
  /// SHA-256) and every tensor (name, dtype, full shape, all of its slice
  /// held), and the ranks together that every tensor of the checkpoint is
  /// one the program holds, before any rank changes anything: a checkpoint
  /// that does not fit is an error, never a partial load. Collective.
  Status loadCheckpoint(const std::string &folder, const TokenData *data,
                        int64_t &steps);

  /// A view of tensor `id` (valid after initialize()): backend memory,
  /// host memory only on a backend with hostMemory().
  TensorRef tensor(int id) const;
  /// Tensor `id`'s bytes, copied from backend memory.
  Status readTensor(int id, std::vector<char> &bytes);
  const Backend &backend() const { return *backend_; }
  uint64_t liveBytes() const { return liveBytes_; }
  uint64_t peakBytes() const { return peakBytes_; }
  uint64_t hostPeakBytes() const { return hostPeakBytes_; }
  bool hasBackward() const;
  /// Gathers the spans of all ranks (RunOptions::trace); rank 0 writes
  /// them to `path` as Chrome trace-event JSON. Collective.
  Status writeTrace(const std::string &path) const {
    return trace_.write(comm_, path);
  }
  /// The loss scale the next step uses (fp16 loss scaling).
  double lossScale() const { return scaler_.scale(); }
  bool hasLoss() const;

private:
  struct Op;
  struct Function;
  struct StagedReduce;
  struct StateTensor;

  /// What a checkpoint holds of this rank, in file order.
  std::vector<StateTensor> stateTensors() const;
  /// Copies this rank's state and its manifest entry into checkpoint_.
  Status snapshotCheckpoint(const std::string &folder, int64_t steps,
                            const TokenData *data);
  /// A piece's manifest entry up to its offset: name, kind, dtype, full
  /// shape and the box (and flat range) of it held. Two ranks whose pieces
  /// have the same head hold the same bytes (replicas).
  static std::string pieceHead(const StateTensor &s);
  /// Decides, once, which stateTensors() entries this rank writes
  /// (checkpointWrites_): a piece several ranks hold alike is written by
  /// the lowest of them. Collective.
  Status decideCheckpointWrites();
  /// Each piece's place in this rank's file, and the memory for it.
  Status layoutCheckpointFile(const std::vector<StateTensor> &state);
  /// The slices this rank reads from checkpoint `m`, one per
  /// stateTensors() entry, in its order; `used` marks the checkpoint's
  /// tensors (by name order) this rank reads.
  /// Whether checkpoint `m` was written by this program's layout.
  bool sameLayout(const CheckpointManifest &m) const;
  Status planCheckpointLoad(const CheckpointManifest &m,
                            const TokenData *data,
                            std::vector<SliceRequest> &requests,
                            std::vector<uint64_t> &used);

  Status allocateArenas();
  Status initializeParameter(const program::Parameter &param);
  Status prepare();
  Status runFunction(const Function &fn, int64_t step, int64_t microbatch,
                     const TokenData *data);
  Status runOp(const Op &op);
  Status communicate(const Op &op);
  /// Communication on host copies of backend memory (MPI, ranks sharing
  /// a GPU).
  Status communicateStaged(const Op &op);
  /// Completes started all-reduces (`event`, or all with 0) and uploads
  /// what was staged for them.
  Status finishCollectives(int event);
  /// Writes `bytes` host bytes to tensor `id` (an upload when its memory
  /// is not host memory).
  Status writeTensor(int id, const void *bytes);
  /// Loss scaling: checks the gradients on all ranks and, when all are
  /// finite, divides them by the scale.
  Status unscaleGradients(bool &overflow);
  void markLive(int id);
  void markDead(int id);

  const program::Program &program_;
  std::string directory_;
  Communicator &comm_;
  RunOptions options_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<ProgramArenas> arenas_; // one Arena per memory space
  std::vector<StagedReduce> stagedReduces_;
  std::vector<TensorRef> tensors_;
  std::vector<uint64_t> tensorBytes_;
  std::vector<Function> functions_;
  std::vector<char> live_;
  std::vector<char> onHost_; // by tensor: in a HOST buffer
  uint64_t liveBytes_ = 0, peakBytes_ = 0;
  // By tensor: its peakCategoryName index; the device live bytes of each,
  // now and when peakBytes_ was reached.
  std::vector<char> peakCategory_;
  uint64_t liveByCategory_[kPeakCategories] = {};
  uint64_t atPeakByCategory_[kPeakCategories] = {};
  uint64_t categoryPeak_[kPeakCategories] = {};
  uint64_t hostLiveBytes_ = 0, hostPeakBytes_ = 0;
  std::vector<int> lossTensors_, gradientTensors_, stepTensors_,
      lossScaleTensors_;
  LossScaler scaler_;
  TraceRecorder trace_;
  int64_t optimizerSteps_ = 0; // steps the optimizer took (not skipped)
  // The data step and microbatch the function running now computes: the
  // runtime's part of a dropout kernel's key (ops/DropoutStream.h).
  struct {
    int64_t step = 0, firstSample = 0, samples = 1;
  } randomAt_;
  bool initialized_ = false;
  CheckpointWriter checkpoint_; // the save in flight, and its memory
  // Per stateTensors() entry: whether this rank's checkpoint file holds it
  // (decided at the first save: a rank may hold none).
  std::vector<char> checkpointWrites_;
  bool checkpointWritesDecided_ = false;
};

} // namespace cleave::runtime

#endif // CLEAVE_RUNTIME_EXECUTOR_H
