//===- PipelineSchedule.h - pipeline-parallel schedules ---------*- C++ -*-===//
//
// The order in which each pipeline rank runs the forwards and backwards of
// its stages' microbatches: GPipe ("simple"), 1F1B ("interleaved", in SMP's
// meaning of the word) and Megatron-LM's interleaved 1F1B with virtual
// stages ("interleaved_virtual"). A schedule is built from the spec's
// numbers, proven free of deadlock by replaying it against the dependencies
// between stages, and costed by an event-driven simulation, so a pass can
// pick and emit one without running it.
//
// Plain C++17 with no MLIR in it: the plan is data that a pass turns into
// IR, and the tests run without a context.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_PASSES_PIPELINESCHEDULE_H
#define CLEAVE_PASSES_PIPELINESCHEDULE_H

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cleave::pipeline {

enum class Kind { Simple, Interleaved, InterleavedVirtual };

/// "simple" (GPipe), "interleaved" (1F1B, SMP's meaning of the word),
/// "interleaved_virtual" (Megatron-LM's interleaved 1F1B with virtual
/// stages); nullopt for any other name.
std::optional<Kind> parseKind(std::string_view name);
const char *kindName(Kind kind);

struct Options {
  Kind kind = Kind::Interleaved;
  int ranks = 1;         // p: pipeline degree
  int microbatches = 1;  // m: microbatches per step on each pipeline
  int virtualStages = 1; // v: model chunks per rank (only InterleavedVirtual
                         // may have v > 1)
  int activeMicrobatches = 0; // SMP's active_microbatches: at most this many
                              // microbatches in flight (forward done,
                              // backward not yet) per stage; 0 = the
                              // schedule's natural number
  int forwardOnlyStages = 0; // the first this-many stages have no backward:
                             // nothing differentiable flows through them
                             // (e.g. a stage that only slices the token ids
                             // or targets), so they receive no gradient and
                             // send none; their forwards free their slot
                             // at once. A prefix, because a stage with a
                             // backward needs its successor's gradient.
};

/// Stages are numbered 0..p*v-1 in model order; stage s lives on rank s % p
/// as chunk s / p (Megatron's layout).
struct Action {
  bool backward = false;
  int stage = 0;
  int microbatch = 0;
  int slot = 0; // which of the stage's activation slots this microbatch uses
                // (assigned by build: lowest free slot at the forward, freed
                // by its backward)
};

struct Schedule {
  std::vector<std::vector<Action>> perRank; // the order each rank runs its
                                            // actions in
  std::vector<int> slotsPerStage; // max microbatches in flight per stage
                                  // (= slots needed)
};

/// Leaves out the backwards of the first forwardOnlyStages stages.
/// nullopt and a message saying what to change (naming the spec key:
/// pipeline_parallel_degree, microbatches, pipeline, virtual_pipeline_degree,
/// active_microbatches) when the options are invalid.
std::optional<Schedule> build(const Options &options, std::string &error);

/// Proves the schedule cannot hang when run with non-blocking sends and
/// blocking receives: simulates all ranks; forward(s, mb) needs
/// forward(s-1, mb) done (s > 0); backward(s, mb) needs forward(s, mb) done
/// on this rank and backward(s+1, mb) done (s < S-1). Also checks every
/// (stage, microbatch) forward and backward appears exactly once, on the
/// right rank (no backward for the forward-only stages), and that slots
/// never collide. false + a message naming the
/// rank(s) that would wait forever otherwise.
bool verify(const Schedule &schedule, const Options &options,
            std::string &error);

struct Costs {
  std::vector<double> forward;  // seconds per microbatch, per stage (size p*v)
  std::vector<double> backward; // likewise
  double transfer = 0; // seconds for one boundary transfer (added between
                       // dependent actions on different ranks)
};

/// The same forward and backward cost for every one of the p*v stages.
Costs uniformCosts(const Options &options, double forward, double backward,
                   double transfer);

struct Span {
  int rank;
  bool backward;
  int stage;
  int microbatch;
  double start;
  double end;
};

struct Timeline {
  std::vector<Span> spans;  // every action, with predicted start and end
  double makespan = 0;      // time from the first start to the last end
  std::vector<double> busy; // per rank: seconds computing
  std::vector<double> idleFraction; // per rank: 1 - busy/makespan
};

/// Event-driven simulation: each rank runs its actions in order, an action
/// starts when the rank is free and its inputs have arrived. Expects a
/// schedule verify() accepts (one that would hang gets the spans of the
/// actions that run before it does) and one cost per stage in `costs`
/// (std::out_of_range otherwise).
Timeline simulate(const Schedule &schedule, const Options &options,
                  const Costs &costs);

/// The schedule's bubble with equal stages and backward = 2x forward, as the
/// literature states it: (p-1)/(m+p-1) for Simple and Interleaved;
/// (p-1)/(v*m+p-1) for InterleavedVirtual.
double theoreticalBubble(const Options &options);

/// One rank's order as text, e.g. "F0.0 F0.1 B0.0 B0.1" (F or B, then
/// stage.microbatch), for messages and tests.
std::string formatOrder(const std::vector<Action> &actions);

} // namespace cleave::pipeline

#endif // CLEAVE_PASSES_PIPELINESCHEDULE_H
