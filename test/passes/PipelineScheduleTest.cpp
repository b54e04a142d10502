//===- PipelineScheduleTest.cpp - pipeline schedules: orders, deadlock, bubble
//-===//
//
// Every schedule build() makes over a sweep of ranks, microbatches, virtual
// stages and active microbatches is replayed by verify(), which would name
// the rank that hangs; orders are checked by hand against GPipe, 1F1B and
// Megatron-LM's interleaved schedule; the simulator's idle time must match
// the bubble the literature states for equal stages.
//
//===----------------------------------------------------------------------===//

#include "passes/PipelineSchedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

namespace cleave::pipeline {
namespace {

Options makeOptions(Kind kind, int p, int m, int v = 1, int a = 0) {
  Options options;
  options.kind = kind;
  options.ranks = p;
  options.microbatches = m;
  options.virtualStages = v;
  options.activeMicrobatches = a;
  return options;
}

std::string describeOptions(const Options &o) {
  return std::string(kindName(o.kind)) + " p=" + std::to_string(o.ranks) +
         " m=" + std::to_string(o.microbatches) +
         " v=" + std::to_string(o.virtualStages) +
         " a=" + std::to_string(o.activeMicrobatches);
}

Schedule buildOrDie(const Options &options) {
  std::string error;
  std::optional<Schedule> schedule = build(options, error);
  EXPECT_TRUE(schedule) << describeOptions(options) << ": " << error;
  return schedule ? *schedule : Schedule();
}

double maxIdle(const Timeline &timeline) {
  return *std::max_element(timeline.idleFraction.begin(),
                           timeline.idleFraction.end());
}

// Peak number of microbatches between forward and backward on each stage,
// counted from the order alone (independently of the slots build assigns).
std::vector<int> peakInFlight(const Schedule &schedule, int stages) {
  std::vector<int> now(stages, 0), peak(stages, 0);
  for (const std::vector<Action> &order : schedule.perRank)
    for (const Action &action : order) {
      now[action.stage] += action.backward ? -1 : 1;
      peak[action.stage] = std::max(peak[action.stage], now[action.stage]);
    }
  return peak;
}

TEST(PipelineScheduleTest, KindNamesRoundTrip) {
  for (Kind kind : {Kind::Simple, Kind::Interleaved, Kind::InterleavedVirtual})
    EXPECT_EQ(parseKind(kindName(kind)), kind);
  EXPECT_STREQ(kindName(Kind::Simple), "simple");
  EXPECT_STREQ(kindName(Kind::Interleaved), "interleaved");
  EXPECT_STREQ(kindName(Kind::InterleavedVirtual), "interleaved_virtual");
  EXPECT_FALSE(parseKind("1f1b"));
  EXPECT_FALSE(parseKind(""));
  EXPECT_FALSE(parseKind("Simple"));
}

// The sweep the brief asks for: every valid combination builds, verifies
// and has the slots its kind promises; every invalid one says what to fix.
TEST(PipelineScheduleTest, EveryScheduleInTheSweepVerifies) {
  int verified = 0, rejected = 0;
  for (Kind kind :
       {Kind::Simple, Kind::Interleaved, Kind::InterleavedVirtual}) {
    const bool isVirtual = kind == Kind::InterleavedVirtual;
    for (int p = 1; p <= 8; ++p) {
      for (int m = 1; m <= 16; ++m) {
        for (int v = isVirtual ? 2 : 1; v <= (isVirtual ? 4 : 1); ++v) {
          for (int a : std::set<int>{0, 1, 2, p}) {
            const Options options = makeOptions(kind, p, m, v, a);
            SCOPED_TRACE(describeOptions(options));
            std::string error;
            std::optional<Schedule> schedule = build(options, error);

            if (isVirtual && m % p != 0) {
              ASSERT_FALSE(schedule);
              EXPECT_NE(error.find("multiple of pipeline_parallel_degree"),
                        std::string::npos)
                  << error;
              EXPECT_NE(error.find("use microbatches " +
                                   std::to_string((m / p + 1) * p)),
                        std::string::npos)
                  << error;
              ++rejected;
              continue;
            }
            if (isVirtual && a > 0) {
              // Megatron's order cannot shrink: a cap is accepted exactly
              // when the natural schedule already meets it.
              const Schedule natural =
                  buildOrDie(makeOptions(kind, p, m, v, 0));
              const int most = *std::max_element(natural.slotsPerStage.begin(),
                                                 natural.slotsPerStage.end());
              if (most > a) {
                ASSERT_FALSE(schedule);
                EXPECT_NE(error.find("active_microbatches"), std::string::npos);
                EXPECT_NE(error.find("at least " + std::to_string(most)),
                          std::string::npos)
                    << error;
                ++rejected;
                continue;
              }
            }
            ASSERT_TRUE(schedule) << error;
            ASSERT_TRUE(verify(*schedule, options, error)) << error;
            ++verified;

            ASSERT_EQ(schedule->perRank.size(), static_cast<size_t>(p));
            for (const std::vector<Action> &order : schedule->perRank)
              EXPECT_EQ(order.size(), static_cast<size_t>(2 * m * v));
            // Lowest-free slots need exactly the peak in flight.
            EXPECT_EQ(schedule->slotsPerStage, peakInFlight(*schedule, p * v));
            for (int s = 0; s < p * v; ++s) {
              const int slots = schedule->slotsPerStage[s];
              if (kind == Kind::Simple) {
                EXPECT_EQ(slots, a > 0 ? std::min(a, m) : m) << "stage " << s;
              }
              if (kind == Kind::Interleaved) {
                EXPECT_EQ(slots, std::min({p - s, m, a > 0 ? a : m}))
                    << "stage " << s;
              }
              if (a > 0) {
                EXPECT_LE(slots, a) << "stage " << s;
              }
            }

            // Equal stages, backward twice forward: every rank idles for
            // exactly the bubble the literature states (for the virtual
            // schedule too, with each chunk costing a whole stage).
            if (a == 0) {
              const Timeline timeline =
                  simulate(*schedule, options, uniformCosts(options, 1, 2, 0));
              EXPECT_NEAR(timeline.makespan, 3.0 * (v * m + p - 1), 1e-9);
              for (int r = 0; r < p; ++r) {
                EXPECT_NEAR(timeline.idleFraction[r],
                            theoreticalBubble(options), 1e-9)
                    << "rank " << r;
              }
            }
          }
        }
      }
    }
  }
  std::printf("pipeline schedules verified: %d, rejected as invalid: %d\n",
              verified, rejected);
  // 928 GPipe and 1F1B cases ((2 + 3 + 6 * 4) values of (p, a) times 16 of
  // m, for each), 126 virtual ones with a = 0 (42 (p, m) with p | m, times
  // 3 of v) and the virtual ones whose natural schedule meets the cap.
  EXPECT_GE(verified, 928 + 126 + 50);
  EXPECT_GE(rejected, 3 * (128 - 42));
}

TEST(PipelineScheduleTest, InvalidOptionsSayWhatToChange) {
  struct Case {
    Options options;
    std::string expected;
  };
  const Case cases[] = {
      {makeOptions(Kind::Interleaved, 0, 4),
       "pipeline_parallel_degree must be at least 1, got 0"},
      {makeOptions(Kind::Simple, 2, 0),
       "microbatches must be at least 1, got 0"},
      {makeOptions(Kind::Interleaved, 2, 4, 1, -1),
       "active_microbatches must be 0 (the schedule's natural number) or "
       "positive, got -1"},
      {makeOptions(Kind::InterleavedVirtual, 2, 4, 0),
       "virtual_pipeline_degree must be at least 1, got 0"},
      {makeOptions(Kind::Interleaved, 2, 4, 2),
       "virtual_pipeline_degree 2 needs pipeline \"interleaved_virtual\", got "
       "pipeline \"interleaved\": set pipeline to \"interleaved_virtual\" or "
       "virtual_pipeline_degree to 1"},
      {makeOptions(Kind::Simple, 2, 4, 3),
       "virtual_pipeline_degree 3 needs pipeline \"interleaved_virtual\", got "
       "pipeline \"simple\""},
      {makeOptions(Kind::InterleavedVirtual, 2, 4, 1),
       "pipeline \"interleaved_virtual\" with virtual_pipeline_degree 1 is "
       "plain 1F1B: set pipeline to \"interleaved\""},
      {makeOptions(Kind::InterleavedVirtual, 4, 6, 2),
       "pipeline \"interleaved_virtual\" needs microbatches to be a multiple "
       "of pipeline_parallel_degree (as Megatron-LM does), got microbatches 6 "
       "with pipeline_parallel_degree 4: use microbatches 8"},
      {makeOptions(Kind::InterleavedVirtual, 2, 4, 2, 1),
       "set active_microbatches to 0 or at least"},
  };
  for (const Case &c : cases) {
    std::string error;
    EXPECT_FALSE(build(c.options, error)) << describeOptions(c.options);
    EXPECT_NE(error.find(c.expected), std::string::npos)
        << describeOptions(c.options) << ": got \"" << error << "\"";
  }
}

TEST(PipelineScheduleTest, SimpleRunsAllForwardsThenAllBackwards) {
  const Schedule schedule = buildOrDie(makeOptions(Kind::Simple, 2, 3));
  EXPECT_EQ(formatOrder(schedule.perRank[0]), "F0.0 F0.1 F0.2 B0.0 B0.1 B0.2");
  EXPECT_EQ(formatOrder(schedule.perRank[1]), "F1.0 F1.1 F1.2 B1.0 B1.1 B1.2");
  EXPECT_EQ(schedule.slotsPerStage, (std::vector<int>{3, 3}));
  // The slots: 0, 1, 2 taken by the forwards, given back by the backwards.
  for (const Action &action : schedule.perRank[0])
    EXPECT_EQ(action.slot, action.microbatch);
}

TEST(PipelineScheduleTest, SimpleWithActiveMicrobatchesRunsInWaves) {
  const Schedule schedule = buildOrDie(makeOptions(Kind::Simple, 2, 5, 1, 2));
  EXPECT_EQ(formatOrder(schedule.perRank[0]),
            "F0.0 F0.1 B0.0 B0.1 F0.2 F0.3 B0.2 B0.3 F0.4 B0.4");
  EXPECT_EQ(schedule.slotsPerStage, (std::vector<int>{2, 2}));
}

// p=4, m=8 by hand: rank 0 warms up with p-1 = 3 forwards, rank 3 (the last)
// alternates from the start.
TEST(PipelineScheduleTest, OneForwardOneBackwardOrderByHand) {
  const Schedule schedule = buildOrDie(makeOptions(Kind::Interleaved, 4, 8));
  EXPECT_EQ(formatOrder(schedule.perRank[0]),
            "F0.0 F0.1 F0.2 "
            "F0.3 B0.0 F0.4 B0.1 F0.5 B0.2 F0.6 B0.3 F0.7 B0.4 "
            "B0.5 B0.6 B0.7");
  EXPECT_EQ(formatOrder(schedule.perRank[3]),
            "F3.0 B3.0 F3.1 B3.1 F3.2 B3.2 F3.3 B3.3 "
            "F3.4 B3.4 F3.5 B3.5 F3.6 B3.6 F3.7 B3.7");
  EXPECT_EQ(schedule.slotsPerStage, (std::vector<int>{4, 3, 2, 1}));
  // Rank 0 reuses slots as backwards free them: microbatch 4 takes slot 0.
  EXPECT_EQ(schedule.perRank[0][5].microbatch, 4);
  EXPECT_EQ(schedule.perRank[0][5].slot, 0);
}

TEST(PipelineScheduleTest, OneForwardOneBackwardWithActiveMicrobatches) {
  const Schedule schedule =
      buildOrDie(makeOptions(Kind::Interleaved, 4, 8, 1, 2));
  EXPECT_EQ(formatOrder(schedule.perRank[0]),
            "F0.0 F0.1 B0.0 F0.2 B0.1 F0.3 B0.2 F0.4 B0.3 F0.5 B0.4 F0.6 B0.5 "
            "F0.7 B0.6 B0.7");
  EXPECT_EQ(schedule.slotsPerStage, (std::vector<int>{2, 2, 2, 1}));
}

// Megatron-LM's interleaved schedule, p=2, v=2, m=4. Rank 0 holds stages 0
// and 2. Warmup = (p-r-1)*2 + (v-1)*p = 4: two microbatches of chunk 0, two
// of chunk 1; steady 1F1B starts its backwards at the last chunk.
TEST(PipelineScheduleTest, InterleavedVirtualMatchesMegatronOrder) {
  const Schedule schedule =
      buildOrDie(makeOptions(Kind::InterleavedVirtual, 2, 4, 2));
  EXPECT_EQ(formatOrder(schedule.perRank[0]),
            "F0.0 F0.1 F2.0 F2.1 "
            "F0.2 B2.0 F0.3 B2.1 F2.2 B0.0 F2.3 B0.1 "
            "B2.2 B2.3 B0.2 B0.3");
  EXPECT_EQ(formatOrder(schedule.perRank[1]),
            "F1.0 F1.1 "
            "F3.0 B3.0 F3.1 B3.1 F1.2 B1.0 F1.3 B1.1 F3.2 B3.2 F3.3 B3.3 "
            "B1.2 B1.3");
}

TEST(PipelineScheduleTest, InterleavedVirtualHasTheSmallerBubble) {
  for (auto [p, m, v] :
       {std::tuple{4, 8, 2}, std::tuple{4, 8, 4}, std::tuple{2, 4, 2},
        std::tuple{8, 16, 2}, std::tuple{4, 4, 2}}) {
    SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m) +
                 " v=" + std::to_string(v));
    const Options plain = makeOptions(Kind::Interleaved, p, m);
    const Options chunked = makeOptions(Kind::InterleavedVirtual, p, m, v);
    // A rank's v chunks together cost what its one stage costs unchunked.
    const Timeline plainTimeline =
        simulate(buildOrDie(plain), plain, uniformCosts(plain, 1, 2, 0));
    const Timeline chunkedTimeline =
        simulate(buildOrDie(chunked), chunked,
                 uniformCosts(chunked, 1.0 / v, 2.0 / v, 0));
    EXPECT_LT(maxIdle(chunkedTimeline), maxIdle(plainTimeline));
    EXPECT_LT(chunkedTimeline.makespan, plainTimeline.makespan);
    EXPECT_LT(theoreticalBubble(chunked), theoreticalBubble(plain));
    // Megatron's (p-1)/(v*m+p-1), on every rank.
    for (double idle : chunkedTimeline.idleFraction)
      EXPECT_NEAR(idle, theoreticalBubble(chunked), 1e-9);
  }
}

TEST(PipelineScheduleTest, TheoreticalBubble) {
  EXPECT_DOUBLE_EQ(theoreticalBubble(makeOptions(Kind::Simple, 4, 8)),
                   3.0 / 11);
  EXPECT_DOUBLE_EQ(theoreticalBubble(makeOptions(Kind::Interleaved, 4, 8)),
                   3.0 / 11);
  EXPECT_DOUBLE_EQ(
      theoreticalBubble(makeOptions(Kind::InterleavedVirtual, 4, 8, 2)),
      3.0 / 19);
  EXPECT_DOUBLE_EQ(theoreticalBubble(makeOptions(Kind::Interleaved, 1, 8)), 0);
}

// With a transfer cost every span must start after its inputs have arrived
// and a rank must never run two actions at once.
TEST(PipelineScheduleTest, SimulationRespectsDependenciesAndTransfers) {
  for (Kind kind :
       {Kind::Simple, Kind::Interleaved, Kind::InterleavedVirtual}) {
    const Options options =
        makeOptions(kind, 4, 8, kind == Kind::InterleavedVirtual ? 2 : 1);
    SCOPED_TRACE(describeOptions(options));
    const Schedule schedule = buildOrDie(options);
    Costs costs = uniformCosts(options, 1, 2, 0.25);
    costs.forward[1] = 1.5; // an uneven stage
    const Timeline timeline = simulate(schedule, options, costs);
    const int stages = 4 * options.virtualStages;
    ASSERT_EQ(timeline.spans.size(), static_cast<size_t>(2 * stages * 8));

    auto find = [&](bool backward, int stage, int mb) {
      return *std::find_if(timeline.spans.begin(), timeline.spans.end(),
                           [&](const Span &s) {
                             return s.backward == backward &&
                                    s.stage == stage && s.microbatch == mb;
                           });
    };
    std::vector<double> busy(4, 0);
    for (const Span &span : timeline.spans) {
      EXPECT_EQ(span.rank, span.stage % 4);
      const double cost = span.backward ? costs.backward[span.stage]
                                        : costs.forward[span.stage];
      EXPECT_NEAR(span.end - span.start, cost, 1e-12);
      busy[span.rank] += cost;
      if (!span.backward && span.stage > 0) {
        EXPECT_GE(span.start + 1e-12,
                  find(false, span.stage - 1, span.microbatch).end + 0.25);
      }
      if (span.backward) {
        EXPECT_GE(span.start + 1e-12,
                  find(false, span.stage, span.microbatch).end);
        if (span.stage < stages - 1) {
          EXPECT_GE(span.start + 1e-12,
                    find(true, span.stage + 1, span.microbatch).end + 0.25);
        }
      }
    }
    // Spans of one rank, in its order, do not overlap.
    for (int r = 0; r < 4; ++r) {
      std::vector<Span> spans;
      for (const Span &span : timeline.spans)
        if (span.rank == r)
          spans.push_back(span);
      std::sort(spans.begin(), spans.end(),
                [](const Span &a, const Span &b) { return a.start < b.start; });
      for (size_t i = 1; i < spans.size(); ++i)
        EXPECT_GE(spans[i].start + 1e-12, spans[i - 1].end);
      EXPECT_NEAR(timeline.busy[r], busy[r], 1e-9);
      EXPECT_NEAR(timeline.idleFraction[r], 1 - busy[r] / timeline.makespan,
                  1e-12);
    }
    // Transfers only add time.
    const Timeline free =
        simulate(schedule, options, uniformCosts(options, 1, 2, 0));
    EXPECT_GT(timeline.makespan, free.makespan);
  }
}

TEST(PipelineScheduleTest, FewerActiveMicrobatchesCostBubble) {
  const Options natural = makeOptions(Kind::Interleaved, 4, 8);
  const Options capped = makeOptions(Kind::Interleaved, 4, 8, 1, 1);
  const Timeline naturalTimeline =
      simulate(buildOrDie(natural), natural, uniformCosts(natural, 1, 2, 0));
  const Timeline cappedTimeline =
      simulate(buildOrDie(capped), capped, uniformCosts(capped, 1, 2, 0));
  // One microbatch in flight serializes the pipeline: 8 * 4 * (1 + 2).
  EXPECT_NEAR(cappedTimeline.makespan, 96, 1e-9);
  EXPECT_GT(maxIdle(cappedTimeline), maxIdle(naturalTimeline));
}

//===----------------------------------------------------------------------===//
// Hand-written schedules that verify() must reject.
//===----------------------------------------------------------------------===//

Action f(int stage, int mb, int slot = 0) { return {false, stage, mb, slot}; }
Action b(int stage, int mb, int slot = 0) { return {true, stage, mb, slot}; }

std::string verifyError(const Schedule &schedule, const Options &options) {
  std::string error;
  EXPECT_FALSE(verify(schedule, options, error));
  EXPECT_FALSE(error.empty());
  return error;
}

TEST(PipelineScheduleTest, RejectsBackwardBeforeItsForward) {
  // Rank 1 starts with the backward of microbatch 0: its own forward has not
  // run, so it waits forever, and rank 0 waits for its gradient.
  const Options options = makeOptions(Kind::Interleaved, 2, 1);
  Schedule schedule;
  schedule.perRank = {{f(0, 0), b(0, 0)}, {b(1, 0), f(1, 0)}};
  schedule.slotsPerStage = {1, 1};
  const std::string error = verifyError(schedule, options);
  EXPECT_NE(error.find("schedule deadlocks"), std::string::npos) << error;
  EXPECT_NE(error.find("rank 1 waits forever at action 0 (backward of stage 1 "
                       "microbatch 0), which needs the forward of stage 1 "
                       "microbatch 0 (rank 1 action 1, never reached)"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("rank 0 waits forever at action 1"), std::string::npos)
      << error;
}

TEST(PipelineScheduleTest, RejectsRanksWaitingOnEachOther) {
  // Rank 1 wants microbatch 1 first, which rank 0 only sends after the
  // backward of microbatch 0, which needs rank 1's backward of it.
  const Options options = makeOptions(Kind::Simple, 2, 2);
  Schedule schedule;
  schedule.perRank = {{f(0, 0, 0), b(0, 0, 0), f(0, 1, 0), b(0, 1, 0)},
                      {f(1, 1, 0), f(1, 0, 1), b(1, 0, 1), b(1, 1, 0)}};
  schedule.slotsPerStage = {1, 2};
  const std::string error = verifyError(schedule, options);
  EXPECT_NE(error.find("rank 0 waits forever at action 1 (backward of stage 0 "
                       "microbatch 0), which needs the backward of stage 1 "
                       "microbatch 0 (rank 1 action 2, never reached)"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("rank 1 waits forever at action 0 (forward of stage 1 "
                       "microbatch 1), which needs the forward of stage 0 "
                       "microbatch 1 (rank 0 action 2, never reached)"),
            std::string::npos)
      << error;

  // Microbatches in order but GPipe's on rank 1 against 1F1B's on rank 0
  // still hangs: rank 1 wants microbatch 1 before any backward.
  schedule.perRank[1] = {f(1, 0, 0), f(1, 1, 1), b(1, 0, 0), b(1, 1, 1)};
  EXPECT_NE(verifyError(schedule, options)
                .find("rank 1 waits forever at action 1 (forward of stage 1 "
                      "microbatch 1)"),
            std::string::npos);

  // 1F1B on both ranks runs.
  schedule.perRank[1] = {f(1, 0), b(1, 0), f(1, 1), b(1, 1)};
  schedule.slotsPerStage = {1, 1};
  std::string error2;
  EXPECT_TRUE(verify(schedule, options, error2)) << error2;
}

TEST(PipelineScheduleTest, RejectsALaterRankWarmingUpLonger) {
  // 1F1B with p=4, m=8, but the last rank runs 3 forwards before its first
  // backward instead of 0: it needs stage 2's forward of microbatch 2,
  // which rank 2 only runs after its backward of microbatch 0, which waits
  // for rank 3's. A one-rank edit of a correct schedule, caught.
  const Options options = makeOptions(Kind::Interleaved, 4, 8);
  Schedule schedule = buildOrDie(options);
  std::vector<Action> &last = schedule.perRank[3];
  last.clear();
  for (int mb = 0; mb < 3; ++mb)
    last.push_back(f(3, mb));
  for (int mb = 3; mb < 8; ++mb) {
    last.push_back(f(3, mb));
    last.push_back(b(3, mb - 3));
  }
  for (int mb = 5; mb < 8; ++mb)
    last.push_back(b(3, mb));
  const std::string error = verifyError(schedule, options);
  EXPECT_NE(error.find("rank 2 waits forever at action 2 (backward of stage 2 "
                       "microbatch 0), which needs the backward of stage 3 "
                       "microbatch 0 (rank 3 action 4, never reached)"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("rank 3 waits forever at action 2 (forward of stage 3 "
                       "microbatch 2), which needs the forward of stage 2 "
                       "microbatch 2 (rank 2 action 3, never reached)"),
            std::string::npos)
      << error;
}

TEST(PipelineScheduleTest, RejectsMissingRepeatedAndMisplacedActions) {
  const Options options = makeOptions(Kind::Simple, 2, 1);
  Schedule schedule;
  schedule.slotsPerStage = {1, 1};

  schedule.perRank = {{f(0, 0), b(0, 0)}, {f(1, 0)}};
  EXPECT_EQ(verifyError(schedule, options),
            "rank 1 never runs backward of stage 1 microbatch 0");

  schedule.perRank = {{f(0, 0), f(0, 0), b(0, 0)}, {f(1, 0), b(1, 0)}};
  EXPECT_EQ(verifyError(schedule, options),
            "rank 0 action 1 repeats forward of stage 0 microbatch 0 (first at "
            "action 0)");

  schedule.perRank = {{f(0, 0), b(0, 0), f(1, 0)}, {b(1, 0)}};
  EXPECT_EQ(
      verifyError(schedule, options),
      "rank 0 action 2 is forward of stage 1 microbatch 0, which lives on "
      "rank 1");

  schedule.perRank = {{f(0, 0), b(0, 0)}, {f(1, 3), b(1, 0)}};
  EXPECT_NE(verifyError(schedule, options)
                .find("expected stage in [0, 2) and "
                      "microbatch in [0, 1)"),
            std::string::npos);

  schedule.perRank = {{f(0, 0), b(0, 0)}};
  EXPECT_EQ(verifyError(schedule, options),
            "schedule has 1 ranks, expected pipeline_parallel_degree 2");
}

TEST(PipelineScheduleTest, RejectsCollidingSlots) {
  const Options options = makeOptions(Kind::Simple, 1, 2);
  Schedule schedule;
  schedule.slotsPerStage = {2};
  schedule.perRank = {{f(0, 0, 0), f(0, 1, 0), b(0, 0, 0), b(0, 1, 0)}};
  EXPECT_EQ(
      verifyError(schedule, options),
      "rank 0: forward of stage 0 microbatch 1 uses slot 0, still held by "
      "microbatch 0");

  schedule.perRank = {{f(0, 0, 0), f(0, 1, 1), b(0, 0, 1), b(0, 1, 0)}};
  EXPECT_EQ(verifyError(schedule, options),
            "rank 0: backward of stage 0 microbatch 0 uses slot 1, its forward "
            "used slot 0");

  schedule.perRank = {{f(0, 0, 0), f(0, 1, 2), b(0, 0, 0), b(0, 1, 2)}};
  EXPECT_EQ(verifyError(schedule, options),
            "rank 0: forward of stage 0 microbatch 1 uses slot 2, expected a "
            "slot in [0, 2)");

  // A correct order, but more in flight than active_microbatches allows.
  schedule.perRank = {{f(0, 0, 0), f(0, 1, 1), b(0, 0, 0), b(0, 1, 1)}};
  std::string error;
  EXPECT_TRUE(verify(schedule, options, error)) << error;
  EXPECT_EQ(verifyError(schedule, makeOptions(Kind::Simple, 1, 2, 1, 1)),
            "rank 0: forward of stage 0 microbatch 1 makes 2 microbatches in "
            "flight on its stage, more than active_microbatches 1");
}

// Stages that autodiff gave no backward (they only slice the token ids or
// targets) come first and run forwards only: every kind, with any number
// of such stages, drops just their backwards, keeps the others' order,
// verifies, and gives each of them one slot (its forward frees it).
TEST(PipelineScheduleTest, ForwardOnlyStagesRunNoBackward) {
  int verified = 0;
  for (Kind kind :
       {Kind::Simple, Kind::Interleaved, Kind::InterleavedVirtual}) {
    const bool isVirtual = kind == Kind::InterleavedVirtual;
    for (int p = 2; p <= 4; ++p)
      for (int m = p; m <= 8; m += p)
        for (int v = isVirtual ? 2 : 1; v <= (isVirtual ? 3 : 1); ++v)
          for (int a : {0, 1})
            for (int none = 0; none <= p * v; ++none) {
              if (isVirtual && a > 0)
                continue;
              Options options = makeOptions(kind, p, m, v, a);
              const Schedule full = buildOrDie(options);
              options.forwardOnlyStages = none;
              SCOPED_TRACE(describeOptions(options) +
                           " forward-only=" + std::to_string(none));
              std::string error;
              std::optional<Schedule> schedule = build(options, error);
              ASSERT_TRUE(schedule) << error;
              ASSERT_TRUE(verify(*schedule, options, error)) << error;
              ++verified;
              for (int rank = 0; rank < p; ++rank) {
                std::vector<Action> kept;
                for (const Action &action : full.perRank[rank])
                  if (!action.backward || action.stage >= none)
                    kept.push_back(action);
                ASSERT_EQ(kept.size(), schedule->perRank[rank].size());
                for (size_t i = 0; i < kept.size(); ++i) {
                  EXPECT_EQ(kept[i].backward,
                            schedule->perRank[rank][i].backward);
                  EXPECT_EQ(kept[i].stage, schedule->perRank[rank][i].stage);
                  EXPECT_EQ(kept[i].microbatch,
                            schedule->perRank[rank][i].microbatch);
                }
              }
              for (int s = 0; s < p * v; ++s)
                EXPECT_EQ(schedule->slotsPerStage[s],
                          s < none ? 1 : full.slotsPerStage[s]);
              // Putting back one backward of a forward-only stage is refused.
              if (none > 0) {
                Schedule extra = *schedule;
                extra.perRank[0].push_back({true, 0, 0, 0});
                EXPECT_FALSE(verify(extra, options, error));
                EXPECT_NE(error.find("backward of stage 0 microbatch 0, but "
                                     "stage 0 has no backward"),
                          std::string::npos)
                    << error;
              }
            }
  }
  EXPECT_GT(verified, 100);
  Options options = makeOptions(Kind::Interleaved, 2, 2);
  options.forwardOnlyStages = 3;
  std::string error;
  EXPECT_FALSE(build(options, error));
  EXPECT_EQ(error, "forward-only stages must be in [0, 2], got 3");
}

} // namespace
} // namespace cleave::pipeline
