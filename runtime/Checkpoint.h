//===- Checkpoint.h - training checkpoints: save, find, resume -*- C++ -*-===//
//
// A checkpoint of step S (S steps done) is the folder ROOT/step-S/ holding
// rank-<r>.bin for every rank (the bytes of what that rank holds: its
// parameter slices and their optimizer state, in the program's dtypes) and
// manifest.json, written last by rank 0: the layout, each rank's file with
// its size and SHA-256, each tensor's name, dtype, full shape and the slice
// the file holds, and each rank's training state (optimizer steps, loss
// scaler). A folder without manifest.json is not a checkpoint. The format
// is docs/checkpoint-format.md; Runtime::saveCheckpoint and
// Runtime::loadCheckpoint (Executor.h) write and read it.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_CHECKPOINT_H
#define CLEAVE_RUNTIME_CHECKPOINT_H

#include "runtime/Status.h"

#include <cstdint>
#include <string>

namespace cleave::runtime {

constexpr int kCheckpointVersion = 1;

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

} // namespace cleave::runtime

#endif // CLEAVE_RUNTIME_CHECKPOINT_H
