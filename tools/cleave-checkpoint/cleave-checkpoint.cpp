//===- cleave-checkpoint.cpp - look into and convert cleave-run checkpoints
//===//
//
//   cleave-checkpoint inspect DIR
//   cleave-checkpoint export DIR -o model.safetensors [--optimizer]
//
// DIR is a checkpoint folder DIR/step-S or a --checkpoint-dir (its newest
// complete checkpoint). `inspect` prints the layout, step, training state
// and every tensor, and checks every rank file's size and SHA-256 against
// the manifest, naming each file that fails (exit 1). `export` writes the
// full state dict keyed by ONNX initializer name, assembled from the
// slices of all ranks (docs/checkpoint-format.md). The reading is
// runtime/Checkpoint.h's; this file parses flags and prints.
//
//===----------------------------------------------------------------------===//

#include "runtime/Checkpoint.h"
#include "runtime/Safetensors.h"

#include <cstdio>
#include <string>
#include <vector>

using namespace cleave::runtime;

namespace {

const char *kUsage =
    "usage: cleave-checkpoint inspect DIR\n"
    "       cleave-checkpoint export DIR -o FILE.safetensors [--optimizer]\n"
    "\n"
    "DIR is a checkpoint (DIR/step-S, with its manifest.json) or a folder of\n"
    "them (cleave-run --checkpoint-dir), whose newest complete one is taken.\n"
    "\n"
    "  inspect      the layout that wrote it, the step, the training state\n"
    "               and every tensor (name, kind, dtype, full shape, bytes,\n"
    "               the ranks holding its slices and flat ranges); checks\n"
    "               every rank file's size and SHA-256 and every tensor's\n"
    "               SHA-256, and names each file and tensor that fails\n"
    "               (exit 1)\n"
    "  export       the full parameters as safetensors keyed by ONNX\n"
    "               initializer name (the module's state_dict names for an\n"
    "               export of a PyTorch module), whatever the layout\n"
    "  -o FILE      where export writes\n"
    "  --optimizer  export also the optimizer state, as NAME.exp_avg and\n"
    "               NAME.exp_avg_sq (AdamW) or NAME.momentum_buffer (SGD)\n"
    "  --help       this text\n";

std::string str(int64_t v) { return std::to_string(v); }

/// Where a tensor's pieces are: "0, 2" when each is whole, else each
/// piece's rank and box, "1 [0:128, 0:64]" (several: "1 [32:64, 0:64]
/// [96:128, 0:64] along 0"), and a flat range of the box (ZeRO-1's state)
/// as "elements 96:160".
std::string holders(const CheckpointTensor &t) {
  std::string s;
  for (const CheckpointPiece &p : t.pieces) {
    s += (s.empty() ? "" : ", ") + str(p.rankIndex);
    auto box = [&](const std::vector<int64_t> &start,
                   const std::vector<int64_t> &size) {
      s += " [";
      for (size_t d = 0; d < start.size(); ++d)
        s += (d ? ", " : "") + str(start[d]) + ":" + str(start[d] + size[d]);
      s += "]";
    };
    // Several boxes (a blocked tensor-parallel slice): each, then the
    // axis they are concatenated along.
    for (const Box &b : p.boxes)
      box(b.start, b.size);
    if (!p.boxes.empty())
      s += " along " + str(p.boxesAxis);
    else if (p.sliceSize != t.shape)
      box(p.sliceStart, p.sliceSize);
    if (p.flatSize >= 0)
      s += " elements " + str(p.flatStart) + ":" +
           str(p.flatStart + p.flatSize);
  }
  return s;
}

int inspect(const CheckpointManifest &m) {
  const CheckpointRank &first = m.ranks.front();
  std::printf("checkpoint %s: step %s, format version %s\n", m.folder.c_str(),
              str(m.step).c_str(), str(m.version).c_str());
  std::printf("model: %s\n", m.model.c_str());
  std::printf("layout: %s\n", m.describeLayout().c_str());
  std::string data = m.dataPath.empty() ? "(none)" : m.dataPath;
  if (m.tokens >= 0)
    data += ", " + str(m.tokens) + " tokens";
  if (m.globalBatch >= 0)
    data += ", global batch " + str(m.globalBatch) + " x " + str(m.seqLen) +
            " tokens";
  std::printf("data: %s; the next step reads from sample %s\n", data.c_str(),
              m.globalBatch >= 0
                  ? str(m.step * m.globalBatch).c_str()
                  : ("step " + str(m.step) + "'s first").c_str());
  std::printf("training state: %s optimizer steps, loss scale %g "
              "(hysteresis %s, good steps %s)\n",
              str(first.optimizerSteps).c_str(), first.scaler.scale,
              str(first.scaler.hysteresis).c_str(),
              str(first.scaler.goodSteps).c_str());

  uint64_t parameterBytes = 0, stateBytes = 0;
  int64_t parameters = 0;
  size_t width = 4;
  for (auto &[name, t] : m.tensors)
    width = std::max(width, name.size());
  std::printf("\ntensors (full shapes; held by: rank [slice] elements "
              "FROM:TO of the slice, row-major):\n");
  std::printf("  %-*s  %-15s  %-5s  %-16s  %10s  %s\n", int(width), "name",
              "kind", "dtype", "shape", "bytes", "held by");
  for (auto &[name, t] : m.tensors) {
    std::printf("  %-*s  %-15s  %-5s  %-16s  %10s  %s\n", int(width),
                name.c_str(), t.kind.c_str(), safetensorsDType(t.dtype),
                formatInts(t.shape).c_str(),
                str(int64_t(t.fullBytes())).c_str(), holders(t).c_str());
    if (t.kind == "parameter") {
      ++parameters;
      parameterBytes += t.fullBytes();
    } else {
      stateBytes += t.fullBytes();
    }
  }
  std::printf("  %s parameters (%s bytes), %s optimizer state tensors (%s "
              "bytes)\n",
              str(parameters).c_str(), str(int64_t(parameterBytes)).c_str(),
              str(int64_t(m.tensors.size()) - parameters).c_str(),
              str(int64_t(stateBytes)).c_str());

  std::printf("\nrank files:\n");
  std::vector<std::string> failed;
  for (size_t r = 0; r < m.ranks.size(); ++r) {
    const CheckpointRank &rank = m.ranks[r];
    Status status =
        streamCheckpointFile(m, int(r), [](uint64_t, const char *, size_t) {});
    std::printf("  %s  rank %s (data %s, pipeline %s, tensor %s)  %s bytes  "
                "%s\n",
                rank.file.c_str(), str(rank.rank).c_str(),
                str(rank.dataRank).c_str(), str(rank.pipelineRank).c_str(),
                str(rank.tensorRank).c_str(), str(int64_t(rank.bytes)).c_str(),
                status ? "SHA-256 ok" : "FAILED");
    if (!status) {
      std::printf("    %s\n", status.message().c_str());
      failed.push_back(rank.file);
    }
  }
  std::fflush(stdout);
  if (!failed.empty()) {
    std::string list;
    for (const std::string &f : failed)
      list += (list.empty() ? "" : ", ") + f;
    std::fprintf(stderr,
                 "cleave-checkpoint: %s: %s of %s rank files fail "
                 "verification: %s\n",
                 m.folder.c_str(), str(int64_t(failed.size())).c_str(),
                 str(int64_t(m.ranks.size())).c_str(), list.c_str());
    return 1;
  }
  std::printf("verified: %s rank files, every size and SHA-256 matches the "
              "manifest\n",
              str(int64_t(m.ranks.size())).c_str());
  return 0;
}

Status exportTensors(const CheckpointManifest &m, bool optimizer,
                     const std::string &out) {
  std::vector<NamedTensor> tensors;
  CLEAVE_CHECK(readFullTensors(m, optimizer, tensors));
  size_t count = tensors.size();
  CLEAVE_CHECK(writeSafetensors(out, std::move(tensors)));
  std::printf("%s: %s tensors of %s step %s\n", out.c_str(),
              str(int64_t(count)).c_str(), m.folder.c_str(),
              str(m.step).c_str());
  return Status::ok();
}

int fail(const std::string &message) {
  std::fprintf(stderr, "cleave-checkpoint: %s\n", message.c_str());
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  std::string command, dir, out;
  bool optimizer = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf("%s", kUsage);
      return 0;
    }
    if (arg == "-o" || arg == "--output") {
      if (i + 1 >= argc)
        return fail(arg + " expects a file");
      out = argv[++i];
    } else if (arg.compare(0, 9, "--output=") == 0) {
      out = arg.substr(9);
    } else if (arg == "--optimizer") {
      optimizer = true;
    } else if (arg.size() > 1 && arg[0] == '-') {
      return fail("unknown flag '" + arg + "' (see cleave-checkpoint --help)");
    } else if (command.empty()) {
      command = arg;
    } else if (dir.empty()) {
      dir = arg;
    } else {
      return fail("a second checkpoint folder '" + arg + "' (after '" + dir +
                  "'); cleave-checkpoint takes one");
    }
  }
  if (command != "inspect" && command != "export")
    return fail(command.empty()
                    ? "no command: cleave-checkpoint inspect|export DIR (see "
                      "--help)"
                    : "unknown command '" + command +
                          "': the commands are inspect and export");
  if (dir.empty())
    return fail("no checkpoint folder: cleave-checkpoint " + command + " DIR");
  if (command == "inspect" && (!out.empty() || optimizer))
    return fail("inspect writes nothing: -o and --optimizer belong to "
                "export");
  if (command == "export" && out.empty())
    return fail("export needs -o FILE.safetensors");
  std::string folder;
  Status status = findCheckpoint(dir, folder);
  CheckpointManifest m;
  if (status)
    status = readCheckpointManifest(folder, m);
  if (!status)
    return fail(status.message());
  if (command == "inspect")
    return inspect(m);
  status = exportTensors(m, optimizer, out);
  return status ? 0 : fail(status.message());
}
