//===- WatchdogTest.cpp - the deadline on blocking waits -------------------===//

#include "runtime/Watchdog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

using namespace cleave::runtime;

namespace {

/// Records what the watchdog would have ended the job with.
struct Recorder {
  std::mutex mutex;
  std::vector<std::string> messages;
  Watchdog::Expired callback() {
    return [this](const std::string &m) {
      std::lock_guard<std::mutex> lock(mutex);
      messages.push_back(m);
    };
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mutex);
    return messages.size();
  }
};

void sleepSeconds(double s) {
  std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

TEST(Watchdog, AWaitPastTheDeadlineNamesWhatItWaitedFor) {
  Recorder recorder;
  Watchdog watchdog(0.2, 3, recorder.callback());
  std::vector<int> ranks = {1, 3};
  std::string place = "functions[2].body[7].collective ALL_REDUCE of "
                      "function 'backward', tensor '/h.0/mlp/Add'";
  watchdog.setStep(41);
  watchdog.setPlace(&place);
  Watchdog::What what;
  what.call = "MPI_Allreduce";
  what.group = 2;
  what.ranks = &ranks;
  what.bytes = 4096;
  {
    Watchdog::Wait wait(&watchdog, what);
    sleepSeconds(0.6);
  }
  ASSERT_EQ(recorder.count(), 1u) << "one wait expires once";
  EXPECT_EQ(recorder.messages[0],
            "rank 3 waited 0.2 s (--timeout 0.2) for MPI_Allreduce over group 2 "
            "(ranks 1, 3) (4096 bytes), at step 41, " +
                place +
                ": the peer stopped answering or is gone; ending the job");
}

TEST(Watchdog, WaitsWithinTheDeadlineNeverExpire) {
  Recorder recorder;
  Watchdog watchdog(0.3, 0, recorder.callback());
  Watchdog::What what;
  what.call = "MPI_Recv";
  what.peer = 1;
  what.fromPeer = true;
  // Many short waits add up to far more than the deadline: each has its own.
  for (int i = 0; i < 10; ++i) {
    Watchdog::Wait wait(&watchdog, what);
    sleepSeconds(0.1);
  }
  sleepSeconds(0.5); // and no wait at all is never late
  EXPECT_EQ(recorder.count(), 0u);
}

TEST(Watchdog, NestedWaitsKeepTheOuterClockAndNameTheInnerCall) {
  Recorder recorder;
  Watchdog watchdog(0.4, 1, recorder.callback());
  Watchdog::What outer, inner;
  outer.call = "the device at the end of the step";
  inner.call = "MPI_Recv";
  inner.peer = 0;
  inner.fromPeer = true;
  inner.tag = 9;
  {
    Watchdog::Wait a(&watchdog, outer);
    sleepSeconds(0.25);
    Watchdog::Wait b(&watchdog, inner);
    sleepSeconds(0.45); // 0.7 s in all, the inner wait alone 0.45
  }
  ASSERT_EQ(recorder.count(), 1u);
  EXPECT_NE(recorder.messages[0].find(
                "for MPI_Recv from rank 0 (tag 9), before the first step: "),
            std::string::npos)
      << recorder.messages[0];
}

TEST(Watchdog, DescribesAWaitOverTheWorldAndASend) {
  Watchdog watchdog(600, 2, [](const std::string &) {});
  Watchdog::What world;
  world.call = "MPI_Allreduce (all ranks agreeing)";
  world.group = Watchdog::kWorld;
  EXPECT_EQ(watchdog.describe(world, 600.4),
            "rank 2 waited 600 s (--timeout 600) for MPI_Allreduce (all ranks "
            "agreeing) over all ranks, before the first step: the peer "
            "stopped answering or is gone; ending the job");
  Watchdog::What send;
  send.call = "MPI_Send";
  send.peer = 5;
  send.tag = 1;
  watchdog.setStep(0);
  EXPECT_NE(watchdog.describe(send, 601).find(
                "waited 601 s (--timeout 600) for MPI_Send to rank 5 (tag 1), "
                "at step 0: "),
            std::string::npos);
}

} // namespace
