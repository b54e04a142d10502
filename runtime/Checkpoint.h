//===- Checkpoint.h - training checkpoints: save, find, resume -*- C++ -*-===//
//
// A checkpoint of step S (S steps done) is the folder ROOT/step-S/ holding
// rank-<r>.bin for every rank (the bytes of what that rank holds: its
// parameter slices and their optimizer state, in the program's dtypes) and
// manifest.json, written last by rank 0: the layout, each rank's file with
// its size and SHA-256, each tensor's name, dtype, full shape and the slice
// the file holds, and each rank's training state (optimizer steps, loss
// scaler). A folder without manifest.json is not a checkpoint. The format
// is docs/checkpoint-format.md; Runtime::startCheckpoint and
// finishCheckpoint (a copy, a background writer, a collective commit) and
// Runtime::loadCheckpoint (Executor.h) write and read it.
//
// Reading is by name and box, never by layout: CheckpointManifest lists,
// per ONNX name, the pieces (boxes of the full tensor) the rank files hold;
// a reader asks for the box it needs (planSlice) and gets it assembled from
// whichever pieces cover it (readSlices). That is resharding on load, and
// what cleave-checkpoint exports full tensors with; a layout that splits
// tensors differently writes other boxes (tensor parallel) or flat ranges
// of a box (ZeRO-1's optimizer state), and both are read as runs of the
// full tensor's row-major order (flatRuns).
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_CHECKPOINT_H
#define CLEAVE_RUNTIME_CHECKPOINT_H

#include "runtime/LossScaler.h"
#include "runtime/Safetensors.h"
#include "runtime/Status.h"
#include "runtime/Tensor.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace cleave::runtime {

class Backend;
class Sha256;

/// The newest manifest version this code reads. Version 2 added pieces
/// with a flat range (ZeRO-1's optimizer state), version 3 pieces of
/// several boxes (tensor parallelism with a blocked sharding); a manifest
/// is written with the lowest version that has what it holds.
constexpr int kCheckpointVersion = 3;

/// The folder of step `step` under `root`: ROOT/step-S.
std::string checkpointFolder(const std::string &root, int64_t step);

/// `path` itself when it holds a manifest.json (a given ROOT/step-S), else
/// the complete checkpoint of `path` with the highest step. An error when
/// there is none, naming what was looked for.
Status findCheckpoint(const std::string &path, std::string &folder);

/// Removes the complete checkpoints of `root` but the `keep` newest, and
/// unfinished saves older than the newest complete one. A checkpoint's
/// manifest goes first, so a removal cut short never leaves one that looks
/// complete.
Status removeOldCheckpoints(const std::string &root, int64_t keep);

/// Elements [start, start + size) per axis of a tensor.
struct Box {
  std::vector<int64_t> start, size;
  bool operator==(const Box &o) const {
    return start == o.start && size == o.size;
  }
};

/// One box of a tensor that one rank's file holds: the elements
/// [sliceStart, sliceStart + sliceSize) of the full row-major tensor, as
/// row-major bytes at `offset` of the file; with a flat range (flatSize >=
/// 0) only the box's elements [flatStart, flatStart + flatSize) counted
/// row-major within the box (a ZeRO-1 rank's share of optimizer state).
/// With `boxes` (version 3: tensor parallelism with a blocked sharding),
/// the piece is those boxes concatenated along `boxesAxis`, sliceSize the
/// concatenation's shape, sliceStart the first box's start, and a flat
/// range counts over the concatenation.
struct CheckpointPiece {
  int rankIndex = 0; // into CheckpointManifest::ranks
  std::vector<int64_t> sliceStart, sliceSize;
  std::vector<Box> boxes;
  int boxesAxis = 0;
  int64_t flatStart = 0, flatSize = -1; // -1: the whole box
  uint64_t offset = 0, bytes = 0;
  // Its bytes' own check: a CRC-32C (8 hex digits) from writers since
  // 2026-11-28, a SHA-256 from those before; neither in the first ones.
  std::string crc32c, sha256;
  bool hasOwnCheck() const { return !crc32c.empty() || !sha256.empty(); }
  /// The elements it holds.
  int64_t elements() const;
};

/// A run of `count` elements consecutive both in the full tensor (from
/// row-major index `full`) and in what a piece or request holds (from
/// element `local`).
struct FlatRun {
  int64_t full = 0, local = 0, count = 0;
};

/// The runs of a box of the full tensor `shape` (flatSize < 0) or of its
/// flat range [flatStart, flatStart + flatSize), in order.
std::vector<FlatRun> flatRuns(const std::vector<int64_t> &shape,
                              const std::vector<int64_t> &start,
                              const std::vector<int64_t> &size,
                              int64_t flatStart, int64_t flatSize);

/// The runs of `boxes` of the full tensor `shape` concatenated along
/// `axis` (a blocked tensor-parallel slice), in the concatenation's
/// row-major order (`local` its element index), clipped to its elements
/// [flatStart, flatStart + flatSize) when flatSize >= 0 (`local` then
/// counted from flatStart).
std::vector<FlatRun> boxRuns(const std::vector<int64_t> &shape,
                             const std::vector<Box> &boxes, int axis,
                             int64_t flatStart, int64_t flatSize);

/// The runs of what one holder of a tensor has, sorted by their place in
/// the full tensor (as forEachSharedRun wants): the box start/size when
/// `boxes` is empty, else the boxes concatenated along `axis`; of its flat
/// range when flatSize >= 0.
std::vector<FlatRun> sliceRuns(const std::vector<int64_t> &shape,
                               const std::vector<int64_t> &start,
                               const std::vector<int64_t> &size,
                               const std::vector<Box> &boxes, int axis,
                               int64_t flatStart, int64_t flatSize);

/// Calls f(aLocal, bLocal, count) for each run the two run lists (of one
/// tensor) share; returns the elements they share.
int64_t
forEachSharedRun(const std::vector<FlatRun> &a, const std::vector<FlatRun> &b,
                 const std::function<void(int64_t, int64_t, int64_t)> &f);

/// A tensor by its name: a parameter's ONNX initializer name, or
/// `NAME.<state>` for its optimizer state.
struct CheckpointTensor {
  std::string name;
  std::string kind; // "parameter" or "optimizer_state"
  DType dtype = DType::F32;
  std::vector<int64_t> shape;          // the full tensor's
  std::vector<CheckpointPiece> pieces; // in rank order
  uint64_t fullBytes() const;
};

/// One rank of the layout that wrote the checkpoint.
struct CheckpointRank {
  int64_t rank = 0, dataRank = 0, pipelineRank = 0, tensorRank = 0;
  std::string file, sha256;
  uint64_t bytes = 0;
  bool trains = true; // runs an optimizer (its step count and scaler move)
  int64_t optimizerSteps = 0;
  LossScaler::State scaler;
};

/// A parsed and checked manifest.json.
struct CheckpointManifest {
  std::string folder; // the step-S folder
  int64_t version = 0, step = 0;
  std::string model;
  int64_t worldSize = 0, dataDegree = 0, pipelineDegree = 0, tensorDegree = 0;
  std::string dataPath;
  // -1 where the manifest does not say (the first version-1 writers did not
  // record the batch).
  int64_t tokens = -1, globalBatch = -1, seqLen = -1;
  std::vector<CheckpointRank> ranks;
  std::map<std::string, CheckpointTensor> tensors; // by name

  std::string manifestPath() const { return folder + "/manifest.json"; }
  std::string filePath(int rankIndex) const {
    return folder + "/" + ranks[rankIndex].file;
  }
  /// "4 ranks (data 2, pipeline 2, tensor 1)".
  std::string describeLayout() const;
};

/// "[256, 64]": a shape or box as the manifest and its errors write it.
std::string formatInts(const std::vector<int64_t> &values);

/// "4 ranks (data 2, pipeline 2, tensor 1)".
std::string describeLayout(int64_t world, int64_t data, int64_t pipeline,
                           int64_t tensor);

/// Reads FOLDER/manifest.json and checks what any reader relies on: the
/// format and a version this code reads; every member present and typed;
/// one file per rank, named inside the folder; a name's dtype and full
/// shape the same in every rank that holds it; every piece inside its
/// tensor, its bytes its elements' and inside its file. Errors name the
/// manifest (and rank and tensor).
Status readCheckpointManifest(const std::string &folder,
                              CheckpointManifest &manifest);

/// Reads rank file `rankIndex` in chunks, handing each to
/// `consume(offset, data, size)`, and checks its size (before reading) and
/// SHA-256 (after) against the manifest, and each tensor's SHA-256 where
/// the manifest has one; errors name the file (and tensor and its bytes). What
/// `consume` saw is only to be used when this returns ok.
Status streamCheckpointFile(
    const CheckpointManifest &manifest, int rankIndex,
    const std::function<void(uint64_t, const char *, size_t)> &consume);

/// One rank's part of a save: its state copied to host memory at a step
/// boundary (Runtime::startCheckpoint), then written to rank-<r>.bin,
/// hashed and fsynced by a thread of its own while training goes on, as
/// PyTorch DCP's async_save. The commit (the ranks agree, rank 0 writes the
/// manifest) is collective and stays on the main thread
/// (Runtime::finishCheckpoint). Its memory is kept between saves: the next
/// copy reuses it.
class CheckpointWriter {
public:
  using Clock = std::chrono::steady_clock;
  struct Tensor {
    std::string head;  // its manifest entry up to "offset"
    size_t offset = 0; // where its bytes start in the file and in bytes()
    size_t bytes = 0;  // how many the file holds of it
  };

  CheckpointWriter() = default;
  CheckpointWriter(const CheckpointWriter &) = delete;
  CheckpointWriter &operator=(const CheckpointWriter &) = delete;
  /// Waits for the thread: a run that ends without committing leaves the
  /// file without its manifest, which is no checkpoint.
  ~CheckpointWriter();

  /// Memory for the file's bytes (the tensors back to back, as the file
  /// holds them), from `backend`'s host memory (page-locked on CUDA) and
  /// page-aligned so that the file is written without the page cache.
  /// Kept while the size is the same: every save of a program reuses it.
  Status reserve(Backend &backend, size_t fileBytes);
  char *bytes() { return bytes_; }

  /// Copies the state into bytes() by `copy(tensor)` (which fills
  /// tensors[tensor]'s bytes), in file order. `hashNow`: the file's
  /// SHA-256 and the tensors' CRC-32Cs are computed here too, the SHA on a
  /// second thread that follows the copy tensor by tensor, so that the
  /// writer has only the disk left (for a step whose kernels use every
  /// core, as the CPU backend's: beside it a hashing thread slowed the
  /// step after the save by more than the hashing takes here). Otherwise
  /// the writer hashes (a GPU step leaves the cores idle).
  Status copyIn(const std::function<Status(size_t)> &copy, bool hashNow);

  // Filled at the step boundary, before start().
  std::string folder, file; // the step-S folder; rank-<r>.bin
  int64_t step = -1;
  std::string rankHead, rankTail; // the rank's entry around file and hash
  std::string dataPath;
  int64_t dataTokens = 0;
  std::vector<Tensor> tensors;

  /// Writes the file on a new thread (SIGTERM and SIGINT blocked there, so
  /// they reach the main thread's handler).
  void start();
  /// Started and not yet committed.
  bool pending() const { return pending_; }
  /// The thread has finished (then join() does not wait).
  bool finished() const { return done_.load(std::memory_order_acquire); }
  /// Waits for the thread; its status. `entry` is then the rank's
  /// manifest entry.
  Status join();
  void committed() { pending_ = false; }

  std::string entry;
  Clock::time_point writeBegan, writeEnded;

private:
  void write();
  void release();
  /// The tensors' CRC-32Cs, and with `file` the file's SHA-256 fed in the
  /// same pass (the tensors are the file).
  void checkTensors(Sha256 *file);

  std::string fileDigest_;
  std::vector<std::string> tensorDigests_;
  bool hashed_ = false; // the digests are those of the bytes now

  Backend *backend_ = nullptr; // whose host memory bytes_ is
  char *bytes_ = nullptr;
  size_t fileBytes_ = 0, capacity_ = 0;
  std::thread thread_;
  std::atomic<bool> done_{false};
  bool pending_ = false;
  Status status_ = Status::ok();
};

/// What one save cost, for cleave-run's line (seconds).
struct CheckpointSaveTimes {
  std::string folder;
  int64_t step = -1;
  double copy = 0;    // the state copied to host memory: training waited
  double write = 0;   // the rank file written, hashed, fsynced (background)
  double wait = 0;    // training waited for the writer at the commit
  double commit = 0;  // the agreement and the manifest
  bool saved = false; // false: nothing was pending, or already complete
};

/// A box of one tensor a reader wants (with flatSize >= 0, only the box's
/// row-major elements [flatStart, flatStart + flatSize)), and what fills it.
struct SliceRequest {
  const CheckpointTensor *tensor = nullptr;
  std::vector<int64_t> start, size;
  std::vector<Box> boxes; // as CheckpointPiece's: several boxes
  int boxesAxis = 0;
  int64_t flatStart = 0, flatSize = -1;
  std::vector<const CheckpointPiece *> pieces; // planSlice's choice
  std::string bytes;                           // readSlices' result
};

/// Chooses the pieces that fill `request`'s box: one piece holding the
/// whole box, in `preferredRank`'s file if it has one (a same-layout load
/// reads its own file where it can), else the first; else pieces that
/// together cover it. An error naming the tensor and the manifest when the box
/// lies outside the tensor or the checkpoint does not hold all of it.
Status planSlice(const CheckpointManifest &manifest, int preferredRank,
                 SliceRequest &request);

/// Fills every request's bytes from the files its pieces lie in, one file
/// at a time, its size checked. Where every piece needed from a file has
/// its own SHA-256 in the manifest, only those pieces' bytes are read and
/// their hashes checked; else (manifests before tensor hashes) the whole
/// file is streamed and its SHA-256 checked. With `everyFile`, every rank
/// file of the checkpoint is streamed whole and every hash checked (an
/// export). Memory: the requests' bytes, a chunk, and the pieces that only
/// partly overlap their box (none for whole tensors).
Status readSlices(const CheckpointManifest &manifest,
                  std::vector<SliceRequest> &requests, bool everyFile = false);

/// Every parameter of the checkpoint whole, keyed by its ONNX name, and
/// with `optimizerState` every optimizer state tensor (`NAME.exp_avg`...)
/// too, in name order: what cleave-checkpoint export writes.
/// Every rank file is read whole and every hash checked, replicas not
/// taken included.
Status readFullTensors(const CheckpointManifest &manifest, bool optimizerState,
                       std::vector<NamedTensor> &tensors);

} // namespace cleave::runtime

#endif // CLEAVE_RUNTIME_CHECKPOINT_H
