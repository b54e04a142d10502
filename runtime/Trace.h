//===- Trace.h - what a rank did when, as a Chrome trace -------*- C++ -*-===//
//
// `cleave-run --trace FILE` records, on every rank, one span per schedule
// entry (the function and its microbatch) and one per communication
// instruction (collectives, sends, receives), measured with a steady clock
// from a start that all ranks agree on (a barrier). Rank 0 gathers the
// spans and writes Chrome's trace-event JSON, which Perfetto
// (ui.perfetto.dev) and chrome://tracing open: one process per rank, a
// "compute" and a "communication" thread each.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_TRACE_H
#define CLEAVE_RUNTIME_TRACE_H

#include "runtime/Status.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace cleave::runtime {

class Communicator;

struct TraceSpan {
  std::string name;
  int thread = 0; // 0: compute, 1: communication, 2: checkpoint writer
  double startUs = 0, durationUs = 0;
};

class TraceRecorder {
public:
  using Clock = std::chrono::steady_clock;

  /// Starts the common clock; collective (every rank calls it).
  Status start(Communicator &comm);
  bool active() const { return active_; }
  double nowUs() const {
    return std::chrono::duration<double, std::micro>(Clock::now() - origin_)
        .count();
  }
  void add(std::string name, int thread, double startUs) {
    if (active_)
      spans_.push_back({std::move(name), thread, startUs, nowUs() - startUs});
  }
  /// A span measured elsewhere (another thread's: the checkpoint writer's).
  void addSpan(std::string name, int thread, double startUs,
               double durationUs) {
    if (active_)
      spans_.push_back({std::move(name), thread, startUs, durationUs});
  }
  /// Gathers every rank's spans; rank 0 writes them to `path`. Collective.
  Status write(Communicator &comm, const std::string &path) const;

private:
  bool active_ = false;
  Clock::time_point origin_;
  std::vector<TraceSpan> spans_;
};

/// The trace-event JSON of spans per rank (`perRank[r]` holds rank r's).
std::string traceJson(const std::vector<std::vector<TraceSpan>> &perRank);

} // namespace cleave::runtime

#endif // CLEAVE_RUNTIME_TRACE_H
