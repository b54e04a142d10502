//===- cleave-run.cpp - run the per-rank programs of cleave-compile -------===//
//
//   [mpirun -np N] cleave-run OUT/ --data tokens.bin --steps S
//       [--metrics m.jsonl] [--forward-only] [--threads N] [--save-params F]
//       [--trace trace.json] [--device cpu|cuda|cpu-staged]
//       [--checkpoint-dir DIR [--checkpoint-every N] [--keep K]
//        [--checkpoint-sync]]
//       [--resume DIR] [--timeout SECONDS]
//   cleave-run OUT/ --check
//   cleave-run OUT/ --dump-program R
//
// Each rank runs OUT/rank-<rank>.pb. Without mpirun (no OMPI_COMM_WORLD_SIZE
// in the environment) MPI is never initialized and the world is this one
// process. Failures before the first step are agreed on by all ranks, which
// then exit non-zero together; a failure later calls MPI_Abort, so no rank
// waits forever on one that is gone. Only this file decides to end the job
// (STYLE.md rule 8); everything below it returns a Status. With
// --checkpoint-dir, SIGTERM and SIGINT only set a flag: the ranks agree on
// it at the next step boundary, save a checkpoint and exit. A periodic save
// copies the state at its step boundary and writes it in the background;
// the ranks commit it (the manifest) at a later step boundary, on the main
// thread, once every rank's writer is done. No wait is
// unbounded: a Watchdog (runtime/Watchdog.h) ends the job with MPI_Abort
// when one lasts longer than --timeout, saying what it waited for.
//
//===----------------------------------------------------------------------===//

#include "runtime/Backend.h"
#include "runtime/Checkpoint.h"
#include "runtime/CommunicationCheck.h"
#include "runtime/Communicator.h"
#include "runtime/Executor.h"
#include "runtime/Metrics.h"
#include "runtime/ProgramLoader.h"
#include "runtime/ProgramSplice.h"
#include "runtime/TokenData.h"
#include "runtime/Watchdog.h"

#include <omp.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>

using namespace cleave::runtime;
namespace pb = cleave::program;

namespace {

const char *kUsage =
    "usage: [mpirun -np N] cleave-run OUT/ --data TOKENS --steps S [options]\n"
    "\n"
    "Runs the per-rank programs that cleave-compile wrote to OUT/: rank r\n"
    "runs OUT/rank-<r>.pb. Rank 0 prints one line per step.\n"
    "\n"
    "  --data FILE         token file: flat uint16, or llm.c's format\n"
    "  --steps N           training steps to run\n"
    "  --metrics FILE      one JSON object per step (JSON lines)\n"
    "  --forward-only      run only the forward functions (no backward, no\n"
    "                      optimizer); required for a program without backward\n"
    "  --threads N         OpenMP threads per rank (default: OMP_NUM_THREADS,\n"
    "                      else the host's cores shared by its ranks)\n"
    "  --save-params FILE  after the last step, the full parameters as\n"
    "                      safetensors, keyed by ONNX initializer name\n"
    "  --trace FILE        what every rank ran when (functions per microbatch,\n"
    "                      communication), measured: Chrome trace-event JSON\n"
    "                      for Perfetto or chrome://tracing\n"
    "  --device NAME       the backend to run on instead of the program's own\n"
    "                      (spec key `device`): cpu, cuda (one GPU per rank by\n"
    "                      Open MPI's local rank; ranks may share one), or\n"
    "                      cpu-staged (the CPU kernels on memory reached only\n"
    "                      by copies, as on a GPU: checks that path anywhere)\n"
    "  --checkpoint-dir DIR  save checkpoints to DIR/step-S/ (S: steps\n"
    "                      done): every rank its state, rank 0 a\n"
    "                      manifest.json, last (docs/checkpoint-format.md);\n"
    "                      at the end of the run, every --checkpoint-every\n"
    "                      steps, and on SIGTERM or SIGINT at the next step\n"
    "                      boundary, before exiting\n"
    "  --checkpoint-every N  also save every N steps: the state is copied\n"
    "                      to host memory at the step boundary and written by\n"
    "                      a thread while training goes on; the checkpoint is\n"
    "                      complete (its manifest written) at the first step\n"
    "                      boundary after every rank's writer finished, or\n"
    "                      before the next save, the end, or a signal's stop\n"
    "  --checkpoint-sync   write every checkpoint before training goes on\n"
    "                      (no background writer: on a CPU-only host whose\n"
    "                      steps use every core, about as fast)\n"
    "  --keep K            keep only the K newest complete checkpoints\n"
    "  --resume PATH       continue from the newest complete checkpoint in\n"
    "                      PATH, or from PATH itself when it is a\n"
    "                      DIR/step-S: --steps stays the total, the metrics\n"
    "                      continue its numbering; any layout of the same\n"
    "                      model and batch loads it (each rank reads its\n"
    "                      slices by name); with --steps equal to its step\n"
    "                      and --checkpoint-dir, writes it for this layout\n"
    "  --timeout SECONDS   the longest any rank waits for another (a\n"
    "                      collective, a send or receive, the device): past\n"
    "                      it the rank says what it waited for and the job\n"
    "                      ends non-zero (default 600, as PyTorch's NCCL\n"
    "                      watchdog)\n"
    "  --list-devices      the backends and GPUs this cleave-run can use\n"
    "  --check             read every rank's program in OUT/ and prove that\n"
    "                      their collectives, sends and receives match and\n"
    "                      cannot deadlock (cleave-compile does this on every\n"
    "                      compile); runs nothing, needs no mpirun\n"
    "  --dump-program R    write rank R's program, as it runs (a rank file\n"
    "                      that names its role's shared program joined with\n"
    "                      it), serialized to standard output, for\n"
    "                      protoc --decode and scripts; runs nothing\n"
    "  --help              this text\n";

struct Flags {
  std::string out;
  std::string data;
  int64_t steps = -1;
  std::string metrics;
  bool forwardOnly = false;
  int threads = 0;
  std::string saveParams;
  std::string trace;
  std::string device; // empty: the program's
  std::string checkpointDir;
  int64_t checkpointEvery = 0; // 0: only at the end and on a signal
  int64_t keep = 0;            // 0: keep all
  bool checkpointSync = false; // no background writer
  std::string resume;
  double timeout = 600; // seconds; --timeout
  bool help = false;
  bool listDevices = false;
  bool check = false;
  int64_t dumpRank = -1; // --dump-program
};

Status parseCount(const std::string &flag, const std::string &text,
                  int64_t minimum, int64_t &value) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end || errno || v < minimum)
    return Status::error(flag + " expects an integer of at least " +
                         std::to_string(minimum) + ", got '" + text + "'");
  value = v;
  return Status::ok();
}

Status parseSeconds(const std::string &flag, const std::string &text,
                    double &value) {
  char *end = nullptr;
  errno = 0;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end || errno || !std::isfinite(v) || v <= 0)
    return Status::error(flag + " expects a number of seconds above 0, got '" +
                         text + "'");
  value = v;
  return Status::ok();
}

Status parseFlags(int argc, char **argv, Flags &flags) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool hasValue = false;
    if (arg.size() > 2 && arg.compare(0, 2, "--") == 0) {
      size_t eq = arg.find('=');
      if (eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
        hasValue = true;
      }
    }
    auto takeValue = [&](std::string &into) -> Status {
      if (!hasValue) {
        if (i + 1 >= argc)
          return Status::error(arg + " expects a value");
        value = argv[++i];
      }
      into = value;
      return Status::ok();
    };
    if (arg == "--help" || arg == "-h") {
      flags.help = true;
    } else if (arg == "--list-devices") {
      flags.listDevices = true;
    } else if (arg == "--check") {
      if (hasValue)
        return Status::error("--check takes no value");
      flags.check = true;
    } else if (arg == "--dump-program") {
      std::string text;
      CLEAVE_CHECK(takeValue(text));
      CLEAVE_CHECK(parseCount(arg, text, 0, flags.dumpRank));
    } else if (arg == "--data") {
      CLEAVE_CHECK(takeValue(flags.data));
    } else if (arg == "--metrics") {
      CLEAVE_CHECK(takeValue(flags.metrics));
    } else if (arg == "--save-params") {
      CLEAVE_CHECK(takeValue(flags.saveParams));
    } else if (arg == "--checkpoint-dir") {
      CLEAVE_CHECK(takeValue(flags.checkpointDir));
    } else if (arg == "--resume") {
      CLEAVE_CHECK(takeValue(flags.resume));
    } else if (arg == "--checkpoint-every" || arg == "--keep") {
      std::string text;
      CLEAVE_CHECK(takeValue(text));
      CLEAVE_CHECK(parseCount(
          arg, text, 1, arg == "--keep" ? flags.keep : flags.checkpointEvery));
    } else if (arg == "--timeout") {
      std::string text;
      CLEAVE_CHECK(takeValue(text));
      CLEAVE_CHECK(parseSeconds(arg, text, flags.timeout));
    } else if (arg == "--trace") {
      CLEAVE_CHECK(takeValue(flags.trace));
    } else if (arg == "--device") {
      CLEAVE_CHECK(takeValue(flags.device));
      const std::vector<std::string> &names = backendNames();
      if (std::find(names.begin(), names.end(), flags.device) == names.end()) {
        std::string known;
        for (const std::string &n : names)
          known += (known.empty() ? "" : ", ") + n;
        return Status::error("--device: unknown device '" + flags.device +
                             "'; the devices are " + known);
      }
    } else if (arg == "--steps") {
      std::string text;
      CLEAVE_CHECK(takeValue(text));
      CLEAVE_CHECK(parseCount(arg, text, 0, flags.steps));
    } else if (arg == "--threads") {
      std::string text;
      int64_t threads = 0;
      CLEAVE_CHECK(takeValue(text));
      CLEAVE_CHECK(parseCount(arg, text, 1, threads));
      flags.threads = int(threads);
    } else if (arg == "--checkpoint-sync") {
      if (hasValue)
        return Status::error("--checkpoint-sync takes no value");
      flags.checkpointSync = true;
    } else if (arg == "--forward-only") {
      if (hasValue)
        return Status::error("--forward-only takes no value");
      flags.forwardOnly = true;
    } else if (arg.size() > 1 && arg[0] == '-') {
      return Status::error("unknown flag '" + arg +
                           "' (see cleave-run --help)");
    } else if (flags.out.empty()) {
      flags.out = arg;
    } else {
      return Status::error("a second program folder '" + arg + "' (after '" +
                           flags.out + "'); cleave-run takes one");
    }
  }
  if (flags.help || flags.listDevices)
    return Status::ok();
  if (flags.out.empty())
    return Status::error("no program folder: cleave-run OUT/ --data TOKENS "
                         "--steps S (see cleave-run --help)");
  if (flags.check || flags.dumpRank >= 0)
    return Status::ok();
  if (flags.steps < 0)
    return Status::error("--steps is required");
  if (flags.checkpointDir.empty() &&
      (flags.checkpointEvery || flags.keep || flags.checkpointSync))
    return Status::error(
        std::string(flags.keep              ? "--keep"
                    : flags.checkpointEvery ? "--checkpoint-every"
                                            : "--checkpoint-sync") +
        " needs --checkpoint-dir DIR");
  if ((!flags.checkpointDir.empty() || !flags.resume.empty()) &&
      flags.forwardOnly)
    return Status::error("--forward-only trains nothing: it takes no "
                         "--checkpoint-dir or --resume");
  return Status::ok();
}

std::string plural(int64_t n, const char *what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

std::string humanBytes(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
  return buf;
}

std::string humanRate(double perSecond) {
  char buf[32];
  if (perSecond >= 1e6)
    std::snprintf(buf, sizeof buf, "%.1fM", perSecond / 1e6);
  else if (perSecond >= 1e3)
    std::snprintf(buf, sizeof buf, "%.1fk", perSecond / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.0f", perSecond);
  return buf;
}

/// "131 ms", "12.5 ms", "0.42 ms".
std::string milliseconds(double seconds) {
  double ms = seconds * 1000;
  char buf[32];
  std::snprintf(buf, sizeof buf, ms < 10 ? "%.2f ms" : ms < 100 ? "%.1f ms" : "%.0f ms", ms);
  return buf;
}

/// Achieved FLOP/s with the prefix that keeps it readable: "1.2 TFLOP/s".
std::string humanFlops(double perSecond) {
  const char *prefixes[] = {"", "k", "M", "G", "T", "P"};
  int p = 0;
  while (perSecond >= 1000 && p < 5) {
    perSecond /= 1000;
    ++p;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %sFLOP/s", perSecond, prefixes[p]);
  return buf;
}

/// Whether `path` can be created or overwritten, leaving no file behind
/// that was not there.
Status checkWritable(const std::string &path, const char *what) {
  struct stat st;
  bool existed = stat(path.c_str(), &st) == 0;
  std::FILE *f = std::fopen(path.c_str(), "a");
  if (!f)
    return Status::error(path + ": cannot write the " + what + ": " +
                         std::strerror(errno));
  std::fclose(f);
  if (!existed)
    std::remove(path.c_str());
  return Status::ok();
}

/// Everything that can go wrong before the runtime starts, on this rank.
struct Startup {
  Flags flags;
  pb::Program program;
  std::string programPath;
  TokenData data;
  bool hasData = false;
  MetricsWriter metrics;
  std::unique_ptr<Backend> backend;
};

Status start(const Communicator &comm, Startup &s) {
  if (s.flags.help || s.flags.listDevices)
    return Status::ok();
  const Flags &flags = s.flags;
  struct stat st;
  if (stat(flags.out.c_str(), &st) != 0)
    return Status::error(flags.out + ": no such folder (expected the output "
                                     "folder of cleave-compile)");
  if (!S_ISDIR(st.st_mode))
    return Status::error(flags.out + ": not a folder (expected the output "
                                     "folder of cleave-compile)");
  std::string dir = flags.out;
  while (dir.size() > 1 && dir.back() == '/')
    dir.pop_back();
  s.programPath = dir + "/rank-" + std::to_string(comm.rank()) + ".pb";

  std::string launcher =
      comm.usesMpi() ? "mpirun started " + std::to_string(comm.size())
                     : "cleave-run runs as a single process without mpirun";
  auto mismatch = [&](int32_t worldSize) {
    return Status::error(
        "the program was compiled for " + plural(worldSize, "rank") + ", but " +
        launcher + ": run mpirun -np " + std::to_string(worldSize) +
        " cleave-run " + flags.out + " ...");
  };
  if (stat(s.programPath.c_str(), &st) != 0 && comm.rank() > 0) {
    // Say what is wrong, not only which file is missing: most likely the
    // job has more ranks than the program.
    pb::Program first;
    if (loadProgram(dir + "/rank-0.pb", first) &&
        first.mesh().world_size() != comm.size())
      return mismatch(first.mesh().world_size());
  }
  CLEAVE_CHECK(loadProgram(s.programPath, s.program));
  const pb::Mesh &mesh = s.program.mesh();
  if (mesh.world_size() != comm.size())
    return mismatch(mesh.world_size());
  if (mesh.rank() != comm.rank())
    return Status::error(s.programPath + " is the program of rank " +
                         std::to_string(mesh.rank()) + ", not of rank " +
                         std::to_string(comm.rank()));
  CLEAVE_CHECK(verifyParameterData(s.program, s.programPath,
                                   directoryOf(s.programPath)));

  bool hasBackward = false, hasLoss = false, readsTokens = false;
  for (const pb::Step &step : s.program.schedule())
    hasBackward |= s.program.functions(step.function()).kind() == pb::BACKWARD;
  for (const pb::Binding &b : s.program.outputs())
    hasLoss |= b.role() == pb::LOSS;
  for (const pb::Binding &b : s.program.inputs())
    readsTokens |= b.role() == pb::TOKENS || b.role() == pb::TARGETS;
  // In a pipeline a rank whose stages carry no gradient (they only slice
  // the token ids or targets) runs forwards only while the others train.
  if (!hasBackward && !flags.forwardOnly &&
      s.program.mesh().pipeline_degree() <= 1)
    return Status::error(
        s.programPath + " has no backward function: it can only run "
                        "forward; pass --forward-only");
  // In a pipeline only the last stage computes the loss.
  if (!hasLoss && !flags.forwardOnly && s.program.mesh().pipeline_degree() <= 1)
    return Status::error(s.programPath +
                         " has no LOSS output to train on; pass "
                         "--forward-only to run it");

  if (!flags.data.empty()) {
    CLEAVE_CHECK(TokenData::read(flags.data, s.data));
    s.hasData = true;
    if (readsTokens)
      CLEAVE_CHECK(s.data.checkWindow(s.program.batch().seq_len()));
  } else if (readsTokens) {
    return Status::error("the program reads token ids: pass --data TOKENS");
  }
  if (comm.rank() == 0) {
    if (!flags.metrics.empty())
      CLEAVE_CHECK(s.metrics.open(flags.metrics));
    if (!flags.saveParams.empty())
      CLEAVE_CHECK(checkWritable(flags.saveParams, "parameters"));
    if (!flags.trace.empty())
      CLEAVE_CHECK(checkWritable(flags.trace, "trace"));
  }
  const char *localRank = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  const char *localSize = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  std::string device =
      !flags.device.empty() ? flags.device : s.program.device();
  CLEAVE_CHECK(makeBackend(device, localRank ? std::atoi(localRank) : 0,
                           localSize ? std::atoi(localSize) : 1, s.backend));
  if (flags.threads > 0) {
    omp_set_num_threads(flags.threads);
  } else if (!std::getenv("OMP_NUM_THREADS")) {
    // Ranks on one host share its cores; each taking all of them would
    // oversubscribe the machine many times over.
    const char *local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    int ranksHere = local ? std::atoi(local) : 1;
    if (ranksHere > 1)
      omp_set_num_threads(std::max(1, omp_get_num_procs() / ranksHere));
  }
  return Status::ok();
}

/// Whether every rank runs a program of one compile: the ranks gather their
/// programs' compile fingerprints (ProgramSeal.h) before the first step;
/// rank files of two compiles in one folder would deadlock or train
/// garbage. The same answer on every rank.
Status checkOneCompile(Communicator &comm, const Startup &s) {
  std::vector<std::string> all;
  CLEAVE_CHECK(comm.allGatherSmall(s.program.compile_fingerprint(), all));
  // The ranks of each fingerprint, in the order of their first rank.
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (int r = 0; r < int(all.size()); ++r) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto &g) { return g.first == all[r]; });
    if (it == groups.end())
      groups.push_back({all[r], {r}});
    else
      it->second.push_back(r);
  }
  if (groups.size() <= 1)
    return Status::ok();
  std::string dir = directoryOf(s.programPath), kinds;
  // Largest group first: the odd ones out are the files to replace.
  std::stable_sort(groups.begin(), groups.end(), [](auto &a, auto &b) {
    return a.second.size() > b.second.size();
  });
  for (const auto &[fingerprint, ranks] : groups) {
    std::string files;
    for (int r : ranks)
      files += (files.empty() ? "" : ", ") + std::string("rank-") +
               std::to_string(r) + ".pb";
    kinds += "\n  " + files + ": compile " +
             (fingerprint.empty() ? std::string("(none: not sealed)")
                                  : fingerprint.substr(0, 16));
  }
  return Status::error(
      "the programs in " + dir + " come from " +
      std::to_string(groups.size()) +
      " different compiles (compile_fingerprint differs), so they would not "
      "run together:" +
      kinds +
      "\ncopy all rank files and params.bin of one cleave-compile output "
      "together, or compile again");
}

/// Rank 0's end-of-run memory line: each rank's measured live peak (device,
/// and host where a rank has a host arena) against the plan's prediction,
/// and a warning for each that differs. The plan predicts a step that
/// updates the parameters after an earlier one did: every tensor the
/// program never frees (gradients, optimizer state, ...) has been written
/// then (Executor.h, "Measured peak"). So the two are compared once two
/// steps of this run have updated (fp16 loss scaling skips the update of a
/// step that overflowed); before, in a forward-only run or for a program
/// without a prediction, the line only shows them. A run stopped by a
/// signal ends with its stop line instead (and its checkpoint's).
void reportLivePeaks(const StepResult &r, int64_t updatedSteps,
                     bool forwardOnly) {
  auto nonZero = [](const std::vector<uint64_t> &v) {
    return std::any_of(v.begin(), v.end(), [](uint64_t x) { return x; });
  };
  if (r.livePeakByRank.empty())
    return;
  bool host = nonZero(r.hostLivePeakByRank) ||
              nonZero(r.predictedHostLivePeakByRank);
  std::string line = "live peak per rank, measured / plan:";
  for (size_t k = 0; k < r.livePeakByRank.size(); ++k) {
    line += (k ? ", " : " ") + std::string("rank ") + std::to_string(k) + " " +
            std::to_string(r.livePeakByRank[k]) + " / " +
            std::to_string(r.predictedLivePeakByRank[k]);
    if (host)
      line += " (host " + std::to_string(r.hostLivePeakByRank[k]) + " / " +
              std::to_string(r.predictedHostLivePeakByRank[k]) + ")";
  }
  if (updatedSteps < 2 && !forwardOnly)
    line += " bytes (not compared: " + std::to_string(updatedSteps) +
            " steps updated the parameters, the plan's peak needs 2)";
  else
    line += " bytes";
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  if (updatedSteps < 2 || forwardOnly || !nonZero(r.predictedLivePeakByRank))
    return;
  for (size_t k = 0; k < r.livePeakByRank.size(); ++k)
    for (int space = 0; space < (host ? 2 : 1); ++space) {
      uint64_t measured =
          space ? r.hostLivePeakByRank[k] : r.livePeakByRank[k];
      uint64_t predicted = space ? r.predictedHostLivePeakByRank[k]
                                 : r.predictedLivePeakByRank[k];
      if (measured != predicted)
        std::fprintf(stderr,
                     "cleave-run: warning: rank %zu: measured live peak %s "
                     "bytes (%s) differs from the plan's predicted %s bytes\n",
                     k, std::to_string(measured).c_str(),
                     space ? "host" : "device",
                     std::to_string(predicted).c_str());
    }
  std::fflush(stderr);
}

/// Rank 0's progress line and metrics line of step `step`.
Status reportStep(Startup &s, const Runtime &runtime, int64_t step,
                  const StepResult &r, double tokensPerStep) {
  const Flags &flags = s.flags;
  StepMetrics m;
  m.step = step;
  m.hasLoss = r.hasLoss;
  m.loss = r.loss;
  m.tokensPerSecond = r.seconds > 0 ? tokensPerStep / r.seconds : 0;
  m.tflops = r.seconds > 0 ? r.flops / r.seconds / 1e12 : 0;
  m.peakBytes = r.peakBytes;
  m.predictedPeakBytes = r.predictedPeakBytes;
  m.rssPeakBytes = r.rssPeakBytes;
  m.hostPeakBytes = r.hostPeakBytes;
  m.predictedHostPeakBytes = r.predictedHostPeakBytes;
  m.livePeakByRank = r.livePeakByRank;
  m.predictedLivePeakByRank = r.predictedLivePeakByRank;
  m.hostLivePeakByRank = r.hostLivePeakByRank;
  m.predictedHostLivePeakByRank = r.predictedHostLivePeakByRank;
  m.peakCategoriesByRank = r.peakCategoriesByRank;
  m.categoryPeaksByRank = r.categoryPeaksByRank;
  m.lossScaled = r.lossScaled;
  m.lossScale = r.lossScale;
  m.skipped = r.skipped;
  char loss[32] = "n/a";
  if (r.hasLoss)
    std::snprintf(loss, sizeof loss, "%.4f", r.loss);
  std::string line = "step " + std::to_string(step + 1) + "/" +
                     std::to_string(flags.steps) + " | loss " + loss + " | " +
                     milliseconds(r.seconds);
  if (r.flops > 0 && r.seconds > 0)
    line += " | " + humanFlops(r.flops / r.seconds);
  line += " | " + humanRate(m.tokensPerSecond) + " tok/s | peak " +
          humanBytes(double(r.peakBytes)) + " (plan " +
          humanBytes(double(r.predictedPeakBytes)) + ")";
  if (r.predictedHostPeakBytes)
    line += " | host " + humanBytes(double(r.hostPeakBytes)) + " (plan " +
            humanBytes(double(r.predictedHostPeakBytes)) + ")";
  if (r.skipped) {
    char note[128];
    std::snprintf(note, sizeof note,
                  " | skipped: gradients overflowed at loss scale %g, "
                  "now %g",
                  r.lossScale, runtime.lossScale());
    line += note;
  }
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  if (s.metrics.isOpen())
    CLEAVE_CHECK(s.metrics.write(m));
  return Status::ok();
}

/// The signal that asked the run to stop (SIGTERM, SIGINT), 0 while none
/// did. A handler can only reach a static; it is set there and read at step
/// boundaries, where the ranks agree on it (Communicator::maxAll).
volatile std::sig_atomic_t stopSignal = 0;

extern "C" void requestStop(int signal) { stopSignal = signal; }

/// From now on SIGTERM and SIGINT ask for a checkpoint and a clean stop; a
/// second one ends the process as usual (SA_RESETHAND).
void catchStopSignals() {
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_handler = requestStop;
  action.sa_flags = SA_RESETHAND | SA_RESTART;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

/// After a save is committed: --keep's pruning, and rank 0's line. A save
/// written in the background says after which step it was committed and
/// what training waited for (the copy, the writer, the commit); one written
/// in the foreground how long it took in all.
Status savedCheckpoint(const Communicator &comm, const Startup &s,
                       const CheckpointSaveTimes &t, int64_t committedAfter,
                       bool background) {
  if (!t.saved)
    return Status::ok();
  if (s.flags.keep > 0 && comm.rank() == 0)
    CLEAVE_CHECK(removeOldCheckpoints(s.flags.checkpointDir, s.flags.keep));
  if (comm.rank() != 0)
    return Status::ok();
  if (background)
    std::printf("checkpoint %s saved after step %s: training waited %s "
                "(copy %s, writer %s, commit %s); written in the background "
                "in %s\n",
                t.folder.c_str(), std::to_string(committedAfter).c_str(),
                milliseconds(t.copy + t.wait + t.commit).c_str(),
                milliseconds(t.copy).c_str(), milliseconds(t.wait).c_str(),
                milliseconds(t.commit).c_str(), milliseconds(t.write).c_str());
  else
    std::printf("checkpoint %s saved in %s (copy %s, write %s, commit %s)\n",
                t.folder.c_str(),
                milliseconds(t.copy + t.wait + t.commit).c_str(),
                milliseconds(t.copy).c_str(), milliseconds(t.wait).c_str(),
                milliseconds(t.commit).c_str());
  std::fflush(stdout);
  return Status::ok();
}

/// Commits the save in flight, if any (waiting for the writers).
/// `committedAfter`: the steps done now.
Status commitPending(Runtime &runtime, const Communicator &comm,
                     const Startup &s, CheckpointSaveTimes &started,
                     int64_t committedAfter) {
  if (!runtime.checkpointPending())
    return Status::ok();
  CheckpointSaveTimes t = started;
  CLEAVE_CHECK(runtime.finishCheckpoint(t));
  t.copy = started.copy;
  return savedCheckpoint(comm, s, t, committedAfter, /*background=*/true);
}

/// Saves the checkpoint of `steps` steps done, complete when it returns.
Status saveCheckpoint(Runtime &runtime, const Communicator &comm,
                      const Startup &s, int64_t steps) {
  CheckpointSaveTimes t;
  CLEAVE_CHECK(runtime.saveCheckpoint(s.flags.checkpointDir, steps,
                                      s.hasData ? &s.data : nullptr, t));
  return savedCheckpoint(comm, s, t, steps, /*background=*/false);
}

/// A step whose loss is not finite ends the run: what follows would train
/// on nothing. A step that loss scaling skipped (its gradients overflowed)
/// is the scaler's to handle, as before. The loss is the world's mean, so
/// every rank decides the same.
Status checkLossFinite(const StepResult &r, int64_t step) {
  if (!r.hasLoss || r.skipped || std::isfinite(r.loss))
    return Status::ok();
  return Status::error(
      "the loss of step " + std::to_string(step + 1) + " (\"step\": " +
      std::to_string(step) + " in the metrics) is " +
      (std::isnan(r.loss) ? "NaN" : "infinite") +
      ": training diverged; lower optimizer.lr, set optimizer.grad_clip, or "
      "check the data; resume from an earlier checkpoint with --resume");
}

/// The training loop; on rank 0, a progress line and a metrics line per
/// step. `stoppedBy` is the signal that stopped it early, else 0. When it
/// fails, `everywhere` says whether every rank failed alike (nothing left
/// to abort).
Status train(Startup &s, Communicator &comm, int &stoppedBy,
             bool &everywhere) {
  everywhere = false;
  const Flags &flags = s.flags;
  RunOptions options;
  options.forwardOnly = flags.forwardOnly;
  options.trace = !flags.trace.empty();
  // From before the (possibly long) initialization: a signal then stops the
  // run after its first step, with a checkpoint.
  if (!flags.checkpointDir.empty())
    catchStopSignals();
  Runtime runtime(s.program, directoryOf(s.programPath), comm, options,
                  std::move(s.backend));
  CLEAVE_CHECK(runtime.initialize());
  const pb::Batch &batch = s.program.batch();
  double tokensPerStep = double(batch.global_batch()) * double(batch.seq_len());
  int64_t first = 0;
  if (!flags.resume.empty()) {
    std::string folder;
    Status found = findCheckpoint(flags.resume, folder);
    bool allFound = false;
    CLEAVE_CHECK(comm.agree(found.isOk(), allFound));
    CLEAVE_CHECK(found);
    if (!allFound)
      return Status::error(flags.resume + ": another rank found no "
                                          "checkpoint (its message says why)");
    auto began = std::chrono::steady_clock::now();
    CLEAVE_CHECK(
        runtime.loadCheckpoint(folder, s.hasData ? &s.data : nullptr, first));
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began)
            .count();
    if (first > flags.steps)
      return Status::error(folder + " is at step " + std::to_string(first) +
                           ", beyond --steps " + std::to_string(flags.steps) +
                           " (the total, not the steps still to run)");
    if (comm.rank() == 0) {
      std::printf("resumed from %s at step %s (loaded in %s)\n",
                  folder.c_str(), std::to_string(first).c_str(),
                  milliseconds(seconds).c_str());
      std::fflush(stdout);
    }
  }
  bool checkpointing = !flags.checkpointDir.empty();
  // The saves' host memory now, not at the first save (1.5 GB for GPT-2
  // 124M with AdamW: its first touch took seconds there).
  if (checkpointing)
    CLEAVE_CHECK(runtime.reserveCheckpointMemory());
  CheckpointSaveTimes started; // of the save in flight
  stoppedBy = 0;
  StepResult lastResult;
  int64_t stepsRun = 0, updatedSteps = 0;
  for (int64_t step = first; step < flags.steps; ++step) {
    StepResult &r = lastResult;
    CLEAVE_CHECK(runtime.runStep(step, s.hasData ? &s.data : nullptr, r));
    ++stepsRun;
    updatedSteps += !r.skipped;
    if (comm.rank() == 0)
      CLEAVE_CHECK(reportStep(s, runtime, step, r, tokensPerStep));
    if (Status finite = checkLossFinite(r, step); !finite) {
      everywhere = true;
      CLEAVE_CHECK(s.metrics.close());
      return finite;
    }
    if (!checkpointing)
      continue;
    // A signal reaches the ranks at different moments; they stop together,
    // after the same step. With it, whether some rank's writer is still
    // busy: a save in flight is committed once every rank's is done.
    std::vector<uint64_t> stop = {
        uint64_t(stopSignal),
        runtime.checkpointPending() && !runtime.checkpointWritten() ? 1u : 0u};
    CLEAVE_CHECK(comm.maxAll(stop));
    int64_t done = step + 1;
    bool last = stop[0] || done == flags.steps;
    bool save =
        last || (flags.checkpointEvery && done % flags.checkpointEvery == 0);
    // Commit the save in flight when all writers are done, and before the
    // next save, the end or a stop (waiting for them then).
    if (!stop[1] || save)
      CLEAVE_CHECK(commitPending(runtime, comm, s, started, done));
    if (last || (save && flags.checkpointSync)) {
      CLEAVE_CHECK(saveCheckpoint(runtime, comm, s, done));
    } else if (save) {
      CLEAVE_CHECK(runtime.startCheckpoint(flags.checkpointDir, done,
                                           s.hasData ? &s.data : nullptr,
                                           started));
    }
    if (stop[0]) {
      stoppedBy = int(stop[0]);
      if (comm.rank() == 0)
        std::printf("stopped by signal %d after step %s\n", stoppedBy,
                    std::to_string(done).c_str());
      break;
    }
  }
  // Resumed at the last step: the checkpoint of the end is the one loaded,
  // written again for this layout (how a checkpoint is resharded offline).
  if (checkpointing && first == flags.steps)
    CLEAVE_CHECK(saveCheckpoint(runtime, comm, s, first));
  CLEAVE_CHECK(s.metrics.close());
  if (comm.rank() == 0 && stepsRun > 0 && !stoppedBy)
    reportLivePeaks(lastResult, updatedSteps, flags.forwardOnly);
  if (stoppedBy)
    return Status::ok();
  if (!flags.saveParams.empty())
    CLEAVE_CHECK(runtime.saveParameters(flags.saveParams));
  if (!flags.trace.empty())
    CLEAVE_CHECK(runtime.writeTrace(flags.trace));
  return Status::ok();
}


void report(const Communicator &comm, const Status &status) {
  std::string prefix = "cleave-run: ";
  if (comm.usesMpi())
    prefix += "rank " + std::to_string(comm.rank()) + ": ";
  std::fprintf(stderr, "%s%s\n", prefix.c_str(), status.message().c_str());
  std::fflush(stderr);
}

Status initMpi(int *argc, char ***argv) {
  MPI_CHECK(MPI_Init(argc, argv));
  return Status::ok();
}

/// cleave-run OUT --check: every rank's program, played together.
Status checkPrograms(const std::string &out, int &ranks) {
  std::string dir = out;
  while (dir.size() > 1 && dir.back() == '/')
    dir.pop_back();
  pb::Program first;
  CLEAVE_CHECK(loadProgram(dir + "/rank-0.pb", first));
  ranks = first.mesh().world_size();
  std::vector<pb::Program> programs(std::max(ranks, 1));
  programs[0] = std::move(first);
  for (int r = 1; r < ranks; ++r)
    CLEAVE_CHECK(
        loadProgram(dir + "/rank-" + std::to_string(r) + ".pb", programs[r]));
  std::vector<const pb::Program *> pointers;
  for (const pb::Program &p : programs)
    pointers.push_back(&p);
  return checkCommunicationAllModes(pointers);
}

/// cleave-run OUT --dump-program R: rank R's program as the loader gives
/// it (joined with its shared program), validated, on standard output.
int dumpProgram(const std::string &out, int64_t rank, Communicator &comm) {
  std::string dir = out;
  while (dir.size() > 1 && dir.back() == '/')
    dir.pop_back();
  pb::Program program;
  std::string bytes;
  Status status =
      loadProgram(dir + "/rank-" + std::to_string(rank) + ".pb", program);
  if (status && !serializeDeterministic(program, bytes))
    status = Status::error("cannot serialize the program of rank " +
                           std::to_string(rank));
  if (!status) {
    report(comm, status);
    return 1;
  }
  std::fwrite(bytes.data(), 1, bytes.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

/// What the watchdog does when a wait outlives --timeout: it says so and
/// ends the whole job (the rank is still blocked in the wait it names).
void endOnTimeout(const Communicator &comm, const std::string &message) {
  report(comm, Status::error("watchdog: " + message));
  if (comm.usesMpi())
    MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

int run(int argc, char **argv, Communicator &comm) {
  Startup s;
  Status status = parseFlags(argc, argv, s.flags);
  // From before the first wait on another rank (the agreement below). A
  // bad --timeout leaves the default, for as long as the ranks take to
  // agree to stop.
  Watchdog watchdog(s.flags.timeout, comm.rank(),
                    [&comm](const std::string &message) {
                      endOnTimeout(comm, message);
                    });
  comm.setWatchdog(&watchdog);
  if (status && s.flags.dumpRank >= 0 && !s.flags.help)
    return dumpProgram(s.flags.out, s.flags.dumpRank, comm);
  if (status && s.flags.check && !s.flags.help) {
    int ranks = 0;
    status = checkPrograms(s.flags.out, ranks);
    if (comm.rank() == 0) {
      if (status)
        std::printf("%s: the communication of %s matches and cannot "
                    "deadlock\n",
                    s.flags.out.c_str(), plural(ranks, "rank").c_str());
      else
        report(comm, status);
    }
    return status ? 0 : 1;
  }
  if (!status) {
    // The same on every rank: say it once.
    if (comm.rank() == 0)
      report(comm, status);
  } else {
    status = start(comm, s);
    if (!status)
      report(comm, status);
  }
  // Before the first collective of the runtime, every rank learns whether
  // all started, so that a bad flag or file ends the job cleanly everywhere.
  bool allStarted = false;
  Status agreed = comm.agree(status.isOk(), allStarted);
  if (!agreed) {
    report(comm, agreed);
    return 1;
  }
  if (!allStarted)
    return 1;
  if (s.flags.help) {
    if (comm.rank() == 0)
      std::printf("%s", kUsage);
    return 0;
  }
  if (s.flags.listDevices) {
    if (comm.rank() == 0)
      for (const std::string &line : describeBackends())
        std::printf("%s\n", line.c_str());
    return 0;
  }
  status = checkOneCompile(comm, s);
  if (!status) {
    if (comm.rank() == 0)
      report(comm, status);
    return 1;
  }
  int stoppedBy = 0;
  bool everywhere = false;
  status = train(s, comm, stoppedBy, everywhere);
  if (!status && everywhere) {
    // The same on every rank: say it once, end together.
    if (comm.rank() == 0)
      report(comm, status);
    return 1;
  }
  if (!status) {
    report(comm, status);
    if (comm.usesMpi() && comm.size() > 1)
      MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
  // As a shell reports a process its signal ended: the run did not finish.
  return stoppedBy ? 128 + stoppedBy : 0;
}

} // namespace

// The AddressSanitizer build (make asan) reads this at start-up. Open MPI
// keeps what MPI_Init allocates (op tables, its plugins' state, formatted
// strings) until the process exits, from plugins it has unloaded by then,
// so LeakSanitizer reports them without names that a suppression could
// match. Memory errors are still reported; leak checking stays on for the
// compiler.
extern "C" const char *__asan_default_options() { return "detect_leaks=0"; }

int main(int argc, char **argv) {
  bool underMpi = std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
  int rc = 0;
  if (underMpi) {
    Status status = initMpi(&argc, &argv);
    if (!status) {
      std::fprintf(stderr, "cleave-run: %s\n", status.message().c_str());
      return 1;
    }
  }
  {
    Communicator comm;
    Status status = underMpi ? comm.initMpi() : Status::ok();
    if (!status) {
      report(comm, status);
      MPI_Abort(MPI_COMM_WORLD, 1);
      return 1;
    }
    rc = run(argc, argv, comm);
  }
  if (underMpi)
    MPI_Finalize();
  return rc;
}
