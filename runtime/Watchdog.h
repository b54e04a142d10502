//===- Watchdog.h - a deadline on every blocking wait -----------*- C++ -*-===//
//
// No wait of a cleave-run job is unbounded (DESIGN.md, "The runtime"). The
// code that blocks (the Communicator's MPI calls, the executor's waits on a
// device) opens a Watchdog::Wait for as long as it blocks, saying what it
// waits for; the runtime says where it is (the step, the instruction). A
// thread of the watchdog wakes a few times a second: when one wait has
// lasted longer than the deadline, it calls `expired` with a message that
// names all of it, e.g.
//
//   rank 0 waited 3 s (--timeout 3) for MPI_Recv from rank 1 (tag 7, 4096
//   bytes), at step 2, functions[1].body[5].send_recv ...: the peer stopped
//   answering or is gone; ending the job
//
// The callback belongs to cleave-run, which alone ends the job (STYLE.md
// rule 8); it must not return to a rank that is still blocked (MPI_Abort).
// Tests pass one that records. Like PyTorch's NCCL watchdog (default 600 s),
// it cannot interrupt the wait: it ends the process around it.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_WATCHDOG_H
#define CLEAVE_RUNTIME_WATCHDOG_H

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace cleave::runtime {

class Watchdog {
public:
  using Expired = std::function<void(const std::string &message)>;
  /// What::group of a wait over every rank of the job.
  static constexpr int kWorld = -2;

  /// Starts the thread; `seconds` > 0. `rank` names this rank in messages.
  Watchdog(double seconds, int rank, Expired expired);
  Watchdog(const Watchdog &) = delete;
  Watchdog &operator=(const Watchdog &) = delete;
  /// Stops the thread.
  ~Watchdog();

  double seconds() const { return seconds_; }

  /// What one blocking call waits for; formatted only when it expires.
  struct What {
    const char *call = "";  // "MPI_Recv", "MPI_Allreduce", "finishing sends"
    int peer = -1;          // a world rank, or -1
    bool fromPeer = false;  // receives from `peer`, else sends to it
    int tag = -1;           // point to point, or -1
    int group = -1;         // a program group, kWorld, or -1
    const std::vector<int> *ranks = nullptr; // the group's world ranks
    uint64_t bytes = 0;     // the message's, or 0 when unknown
  };

  /// The step the rank runs (from 0; -1 before the first).
  void setStep(int64_t step);
  /// Where in the program the rank is: an instruction's description
  /// ("functions[1].body[5].collective ALL_REDUCE (/h.0/attn/MatMul)") that
  /// outlives the call, or null between instructions.
  void setPlace(const std::string *place);

  /// A blocking wait, from construction to destruction. Nested waits keep
  /// the outer one's clock and report the inner one's What.
  class Wait {
  public:
    Wait(Watchdog *watchdog, const What &what);
    Wait(const Wait &) = delete;
    Wait &operator=(const Wait &) = delete;
    ~Wait();

  private:
    Watchdog *watchdog_;
    What outer_;
    bool nested_ = false;
  };

  /// The message `expired` gets for `what` after `waited` seconds at the
  /// present step and place (exposed for tests).
  std::string describe(const What &what, double waited) const;

private:
  void watch();
  std::string describeLocked(const What &what, double waited) const;

  const double seconds_;
  const int rank_;
  Expired expired_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool fired_ = false;
  int depth_ = 0;
  What what_;
  std::chrono::steady_clock::time_point since_;
  int64_t step_ = -1;
  const std::string *place_ = nullptr;
  std::thread thread_;
};

} // namespace cleave::runtime

#endif // CLEAVE_RUNTIME_WATCHDOG_H
