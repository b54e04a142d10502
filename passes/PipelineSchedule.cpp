//===- PipelineSchedule.cpp - pipeline-parallel schedules -----------------===//
//
// Builds each rank's order of forwards and backwards for the three schedule
// kinds, gives every in-flight microbatch an activation slot, and replays a
// schedule against the stage dependencies both to prove it cannot hang
// (verify) and to predict its timeline (simulate). Both use one replay, so
// the simulator never times an order the verifier would reject.
//
//===----------------------------------------------------------------------===//

#include "passes/PipelineSchedule.h"

#include <algorithm>
#include <functional>
#include <string>

namespace cleave::pipeline {

namespace {

std::string quoted(Kind kind) {
  return std::string("\"") + kindName(kind) + "\"";
}

std::string describe(const Action &action) {
  return std::string(action.backward ? "backward" : "forward") + " of stage " +
         std::to_string(action.stage) + " microbatch " +
         std::to_string(action.microbatch);
}

/// A message for the first count out of range, or "": what any schedule,
/// built or hand-written, needs.
std::string checkCounts(const Options &options) {
  const int p = options.ranks, m = options.microbatches,
            v = options.virtualStages, a = options.activeMicrobatches;
  if (p < 1)
    return "pipeline_parallel_degree must be at least 1, got " +
           std::to_string(p);
  if (m < 1)
    return "microbatches must be at least 1, got " + std::to_string(m);
  if (a < 0)
    return "active_microbatches must be 0 (the schedule's natural number) or "
           "positive, got " +
           std::to_string(a);
  if (v < 1)
    return "virtual_pipeline_degree must be at least 1, got " +
           std::to_string(v);
  if (options.forwardOnlyStages < 0 || options.forwardOnlyStages > p * v)
    return "forward-only stages must be in [0, " + std::to_string(p * v) +
           "], got " + std::to_string(options.forwardOnlyStages);
  return "";
}

/// A message for the first option that build cannot make a schedule of, or
/// "".
std::string checkOptions(const Options &options) {
  if (std::string error = checkCounts(options); !error.empty())
    return error;
  const int p = options.ranks, m = options.microbatches,
            v = options.virtualStages;
  if (options.kind != Kind::InterleavedVirtual && v > 1)
    return "virtual_pipeline_degree " + std::to_string(v) +
           " needs pipeline \"interleaved_virtual\", got pipeline " +
           quoted(options.kind) +
           ": set pipeline to \"interleaved_virtual\" or "
           "virtual_pipeline_degree to 1";
  if (options.kind == Kind::InterleavedVirtual && v == 1)
    return "pipeline \"interleaved_virtual\" with virtual_pipeline_degree 1 "
           "is plain 1F1B: set pipeline to \"interleaved\", or "
           "virtual_pipeline_degree to 2 or more";
  if (options.kind == Kind::InterleavedVirtual && m % p != 0)
    return "pipeline \"interleaved_virtual\" needs microbatches to be a "
           "multiple of pipeline_parallel_degree (as Megatron-LM does), got "
           "microbatches " +
           std::to_string(m) + " with pipeline_parallel_degree " +
           std::to_string(p) + ": use microbatches " +
           std::to_string((m + p - 1) / p * p);
  return "";
}

Action forward(int stage, int microbatch) {
  return {false, stage, microbatch, 0};
}
Action backward(int stage, int microbatch) {
  return {true, stage, microbatch, 0};
}

/// GPipe: all forwards, then all backwards; with active microbatches a, in
/// waves of a so that at most a are in flight.
std::vector<Action> simpleOrder(int rank, int m, int active) {
  const int wave = active > 0 ? std::min(active, m) : m;
  std::vector<Action> order;
  for (int first = 0; first < m; first += wave) {
    const int last = std::min(first + wave, m);
    for (int mb = first; mb < last; ++mb)
      order.push_back(forward(rank, mb));
    for (int mb = first; mb < last; ++mb)
      order.push_back(backward(rank, mb));
  }
  return order;
}

/// 1F1B: earlier ranks run ahead by the forwards the later ranks need to
/// fill the pipeline, then alternate, then drain. Capping the warmup at a-1
/// keeps a microbatches in flight at most (the steady forward is the a-th).
std::vector<Action> oneForwardOneBackwardOrder(int rank, int p, int m,
                                               int active) {
  int warmup = std::min(p - rank - 1, m);
  if (active > 0)
    warmup = std::min(warmup, active - 1);
  std::vector<Action> order;
  for (int mb = 0; mb < warmup; ++mb)
    order.push_back(forward(rank, mb));
  for (int mb = warmup; mb < m; ++mb) {
    order.push_back(forward(rank, mb));
    order.push_back(backward(rank, mb - warmup));
  }
  for (int mb = m - warmup; mb < m; ++mb)
    order.push_back(backward(rank, mb));
  return order;
}

/// Megatron-LM's forward_backward_pipelining_with_interleaving: the k-th
/// forward of a rank runs p microbatches of one chunk before moving to the
/// next chunk, backwards visit the chunks in reverse. Megatron also runs all
/// forwards first when m == p, for the sake of its communication code; the
/// dependencies here do not need it (the tests replay m == p too).
std::vector<Action> interleavedVirtualOrder(int rank, int p, int m, int v) {
  const int total = m * v;
  const int warmup = std::min((p - rank - 1) * 2 + (v - 1) * p, total);
  auto microbatchOf = [&](int k) { return (k / (p * v)) * p + k % p; };
  auto forwardAt = [&](int k) {
    const int chunk = (k % (p * v)) / p;
    return forward(chunk * p + rank, microbatchOf(k));
  };
  auto backwardAt = [&](int k) {
    const int chunk = v - 1 - (k % (p * v)) / p;
    return backward(chunk * p + rank, microbatchOf(k));
  };
  std::vector<Action> order;
  for (int k = 0; k < warmup; ++k)
    order.push_back(forwardAt(k));
  for (int k = 0; k < total - warmup; ++k) {
    order.push_back(forwardAt(k + warmup));
    order.push_back(backwardAt(k));
  }
  for (int k = total - warmup; k < total; ++k)
    order.push_back(backwardAt(k));
  return order;
}

/// Gives each forward the lowest slot its stage has free and each backward
/// the slot of its forward (a forward-only stage's forward gives its slot
/// back at once); returns the slots each stage needs.
std::vector<int> assignSlots(std::vector<std::vector<Action>> &perRank,
                             int stages, int microbatches, int forwardOnly) {
  std::vector<int> slotsPerStage(stages, 0);
  std::vector<std::vector<bool>> used(stages);
  std::vector<int> slotOf(static_cast<size_t>(stages) * microbatches, -1);
  for (std::vector<Action> &order : perRank) {
    for (Action &action : order) {
      std::vector<bool> &stageUsed = used[action.stage];
      int &slot = slotOf[static_cast<size_t>(action.stage) * microbatches +
                         action.microbatch];
      if (action.backward) {
        action.slot = slot;
        if (slot >= 0)
          stageUsed[slot] = false;
        continue;
      }
      slot = static_cast<int>(
          std::find(stageUsed.begin(), stageUsed.end(), false) -
          stageUsed.begin());
      if (slot == static_cast<int>(stageUsed.size()))
        stageUsed.push_back(false);
      stageUsed[slot] = action.stage >= forwardOnly;
      action.slot = slot;
      slotsPerStage[action.stage] =
          std::max(slotsPerStage[action.stage], slot + 1);
    }
  }
  return slotsPerStage;
}

/// Where each (direction, stage, microbatch) sits: its rank and index in
/// that rank's order, or rank -1 where absent.
struct Placement {
  int rank = -1;
  size_t index = 0;
};

/// The schedule's dependency state while it is replayed.
class Replay {
public:
  Replay(int stageCount, int microbatchCount)
      : stages(stageCount), microbatches(microbatchCount),
        forwardDone(static_cast<size_t>(stageCount) * microbatchCount, false),
        backwardDone(static_cast<size_t>(stageCount) * microbatchCount, false) {
  }

  /// The action `action` waits for, or nullopt when it can run now.
  std::optional<Action> missingInput(const Action &action) const {
    if (!action.backward) {
      if (action.stage > 0 && !done(false, action.stage - 1, action.microbatch))
        return forward(action.stage - 1, action.microbatch);
      return std::nullopt;
    }
    if (!done(false, action.stage, action.microbatch))
      return forward(action.stage, action.microbatch);
    if (action.stage < stages - 1 &&
        !done(true, action.stage + 1, action.microbatch))
      return backward(action.stage + 1, action.microbatch);
    return std::nullopt;
  }

  /// Runs every rank's actions in order, each once its inputs are done,
  /// calling `onRun` for each, until no rank can go on. Returns how far
  /// each rank got.
  std::vector<size_t>
  run(const Schedule &schedule,
      const std::function<void(int rank, const Action &)> &onRun) {
    const int ranks = static_cast<int>(schedule.perRank.size());
    std::vector<size_t> next(ranks, 0);
    for (bool progress = true; progress;) {
      progress = false;
      for (int rank = 0; rank < ranks; ++rank) {
        const std::vector<Action> &order = schedule.perRank[rank];
        while (next[rank] < order.size() && !missingInput(order[next[rank]])) {
          const Action &action = order[next[rank]++];
          onRun(rank, action);
          markDone(action);
          progress = true;
        }
      }
    }
    return next;
  }

private:
  void markDone(const Action &action) {
    std::vector<bool> &table = action.backward ? backwardDone : forwardDone;
    table[key(action.stage, action.microbatch)] = true;
  }
  size_t key(int stage, int microbatch) const {
    return static_cast<size_t>(stage) * microbatches + microbatch;
  }
  bool done(bool isBackward, int stage, int microbatch) const {
    return (isBackward ? backwardDone : forwardDone)[key(stage, microbatch)];
  }

  int stages, microbatches;
  std::vector<bool> forwardDone, backwardDone;
};

/// Every action in range, on its stage's rank, and each forward and each
/// backward of a stage that has one present exactly once; fills `where`
/// for each.
bool checkStructure(const Schedule &schedule, const Options &options,
                    std::vector<Placement> &where, std::string &error) {
  const int p = options.ranks, m = options.microbatches,
            stages = options.ranks * options.virtualStages;
  if (static_cast<int>(schedule.perRank.size()) != p) {
    error = "schedule has " + std::to_string(schedule.perRank.size()) +
            " ranks, expected pipeline_parallel_degree " + std::to_string(p);
    return false;
  }
  if (static_cast<int>(schedule.slotsPerStage.size()) != stages) {
    error = "schedule has slots for " +
            std::to_string(schedule.slotsPerStage.size()) +
            " stages, expected " + std::to_string(stages);
    return false;
  }
  where.assign(2 * static_cast<size_t>(stages) * m, Placement());
  for (int rank = 0; rank < p; ++rank) {
    const std::vector<Action> &order = schedule.perRank[rank];
    for (size_t index = 0; index < order.size(); ++index) {
      const Action &action = order[index];
      auto at = [&] {
        return "rank " + std::to_string(rank) + " action " +
               std::to_string(index) + " ";
      };
      if (action.stage < 0 || action.stage >= stages || action.microbatch < 0 ||
          action.microbatch >= m) {
        error = at() + "is " + describe(action) + ", expected stage in [0, " +
                std::to_string(stages) + ") and microbatch in [0, " +
                std::to_string(m) + ")";
        return false;
      }
      if (action.stage % p != rank) {
        error = at() + "is " + describe(action) + ", which lives on rank " +
                std::to_string(action.stage % p);
        return false;
      }
      if (action.backward && action.stage < options.forwardOnlyStages) {
        error = at() + "is " + describe(action) + ", but stage " +
                std::to_string(action.stage) + " has no backward";
        return false;
      }
      Placement &place =
          where[(static_cast<size_t>(action.backward) * stages + action.stage) *
                    m +
                action.microbatch];
      if (place.rank >= 0) {
        error = at() + "repeats " + describe(action) + " (first at action " +
                std::to_string(place.index) + ")";
        return false;
      }
      place = {rank, index};
    }
  }
  for (int isBackward = 0; isBackward < 2; ++isBackward)
    for (int stage = isBackward ? options.forwardOnlyStages : 0;
         stage < stages; ++stage)
      for (int mb = 0; mb < m; ++mb)
        if (where[(static_cast<size_t>(isBackward) * stages + stage) * m + mb]
                .rank < 0) {
          error = "rank " + std::to_string(stage % p) + " never runs " +
                  describe({isBackward == 1, stage, mb, 0});
          return false;
        }
  return true;
}

/// A forward takes a free slot below the stage's count; its backward gives
/// the same slot back; no stage has more than active_microbatches in
/// flight. Run after the replay, which puts every backward after its
/// forward on the rank.
bool checkSlots(const Schedule &schedule, const Options &options,
                std::string &error) {
  const int m = options.microbatches,
            stages = options.ranks * options.virtualStages;
  std::vector<std::vector<int>> holder(stages); // microbatch per slot, -1 free
  std::vector<int> slotOf(static_cast<size_t>(stages) * m, -1);
  std::vector<int> inFlight(stages, 0);
  const int active = options.activeMicrobatches;
  for (size_t rank = 0; rank < schedule.perRank.size(); ++rank) {
    for (const Action &action : schedule.perRank[rank]) {
      auto at = [&] {
        return "rank " + std::to_string(rank) + ": " + describe(action) +
               " uses slot " + std::to_string(action.slot);
      };
      std::vector<int> &slots = holder[action.stage];
      slots.resize(std::max(schedule.slotsPerStage[action.stage], 0), -1);
      int &forwardSlot =
          slotOf[static_cast<size_t>(action.stage) * m + action.microbatch];
      if (action.backward) {
        if (action.slot != forwardSlot) {
          error =
              at() + ", its forward used slot " + std::to_string(forwardSlot);
          return false;
        }
        slots[action.slot] = -1;
        --inFlight[action.stage];
        continue;
      }
      if (action.slot < 0 || action.slot >= static_cast<int>(slots.size())) {
        error = at() + ", expected a slot in [0, " +
                std::to_string(slots.size()) + ")";
        return false;
      }
      if (slots[action.slot] >= 0) {
        error = at() + ", still held by microbatch " +
                std::to_string(slots[action.slot]);
        return false;
      }
      forwardSlot = action.slot;
      if (action.stage < options.forwardOnlyStages)
        continue; // no backward will need what it saved
      slots[action.slot] = action.microbatch;
      if (active > 0 && ++inFlight[action.stage] > active) {
        error = "rank " + std::to_string(rank) + ": " + describe(action) +
                " makes " + std::to_string(inFlight[action.stage]) +
                " microbatches in flight on its stage, more than "
                "active_microbatches " +
                std::to_string(active);
        return false;
      }
    }
  }
  return true;
}

} // namespace

std::optional<Kind> parseKind(std::string_view name) {
  for (Kind kind : {Kind::Simple, Kind::Interleaved, Kind::InterleavedVirtual})
    if (name == kindName(kind))
      return kind;
  return std::nullopt;
}

const char *kindName(Kind kind) {
  switch (kind) {
  case Kind::Simple:
    return "simple";
  case Kind::Interleaved:
    return "interleaved";
  case Kind::InterleavedVirtual:
    return "interleaved_virtual";
  }
  return "unknown";
}

std::optional<Schedule> build(const Options &options, std::string &error) {
  error = checkOptions(options);
  if (!error.empty())
    return std::nullopt;
  const int p = options.ranks, m = options.microbatches,
            v = options.virtualStages, a = options.activeMicrobatches;
  Schedule schedule;
  for (int rank = 0; rank < p; ++rank) {
    switch (options.kind) {
    case Kind::Simple:
      schedule.perRank.push_back(simpleOrder(rank, m, a));
      break;
    case Kind::Interleaved:
      schedule.perRank.push_back(oneForwardOneBackwardOrder(rank, p, m, a));
      break;
    case Kind::InterleavedVirtual:
      schedule.perRank.push_back(interleavedVirtualOrder(rank, p, m, v));
      break;
    }
  }
  // A forward-only stage's backwards are left out; the orders of the others
  // are kept (a rank's forward-only stage runs its forwards as they come).
  for (std::vector<Action> &order : schedule.perRank)
    order.erase(std::remove_if(order.begin(), order.end(),
                               [&](const Action &action) {
                                 return action.backward &&
                                        action.stage < options.forwardOnlyStages;
                               }),
                order.end());
  schedule.slotsPerStage =
      assignSlots(schedule.perRank, p * v, m, options.forwardOnlyStages);

  // Megatron's warmup is what makes its order work, so it cannot shrink to
  // honour a cap; a cap the schedule already meets is fine.
  if (options.kind == Kind::InterleavedVirtual && a > 0) {
    auto most = std::max_element(schedule.slotsPerStage.begin(),
                                 schedule.slotsPerStage.end());
    if (*most > a) {
      error = "pipeline \"interleaved_virtual\" keeps up to " +
              std::to_string(*most) + " microbatches in flight on stage " +
              std::to_string(most - schedule.slotsPerStage.begin()) +
              " (Megatron-LM's warmup is fixed), got active_microbatches " +
              std::to_string(a) +
              ": set active_microbatches to 0 or at least " +
              std::to_string(*most) + ", or use pipeline \"interleaved\"";
      return std::nullopt;
    }
  }
  return schedule;
}

bool verify(const Schedule &schedule, const Options &options,
            std::string &error) {
  error = checkCounts(options);
  if (!error.empty())
    return false;
  std::vector<Placement> where;
  if (!checkStructure(schedule, options, where, error))
    return false;

  const int stages = options.ranks * options.virtualStages,
            m = options.microbatches;
  Replay replay(stages, m);
  std::vector<size_t> reached =
      replay.run(schedule, [](int, const Action &) {});
  std::string stuck;
  for (size_t rank = 0; rank < reached.size(); ++rank) {
    const std::vector<Action> &order = schedule.perRank[rank];
    if (reached[rank] == order.size())
      continue;
    const Action &blocked = order[reached[rank]];
    const Action needed = *replay.missingInput(blocked);
    const Placement &source =
        where[(static_cast<size_t>(needed.backward) * stages + needed.stage) *
                  m +
              needed.microbatch];
    stuck += std::string(stuck.empty() ? "" : "; ") + "rank " +
             std::to_string(rank) + " waits forever at action " +
             std::to_string(reached[rank]) + " (" + describe(blocked) +
             "), which needs the " + describe(needed) + " (rank " +
             std::to_string(source.rank) + " action " +
             std::to_string(source.index) + ", never reached)";
  }
  if (!stuck.empty()) {
    error = "schedule deadlocks: " + stuck;
    return false;
  }
  return checkSlots(schedule, options, error);
}

Costs uniformCosts(const Options &options, double forward, double backward,
                   double transfer) {
  const size_t stages =
      static_cast<size_t>(std::max(options.ranks * options.virtualStages, 0));
  return {std::vector<double>(stages, forward),
          std::vector<double>(stages, backward), transfer};
}

Timeline simulate(const Schedule &schedule, const Options &options,
                  const Costs &costs) {
  const int p = static_cast<int>(schedule.perRank.size());
  const int stages = p * options.virtualStages, m = options.microbatches;
  Timeline timeline;
  timeline.busy.assign(p, 0);
  timeline.idleFraction.assign(p, 0);
  if (p == 0 || m < 1 || stages < 1)
    return timeline;

  // End time of each action once it has run; the replay runs an action
  // only after its inputs, so their ends are known by then.
  std::vector<double> forwardEnd(static_cast<size_t>(stages) * m, 0),
      backwardEnd(static_cast<size_t>(stages) * m, 0);
  std::vector<double> rankFree(p, 0);
  auto key = [&](int stage, int mb) {
    return static_cast<size_t>(stage) * m + mb;
  };
  // An input from another rank arrives one transfer after it is computed.
  auto arrival = [&](int rank, int stage, double end) {
    return stage % p == rank ? end : end + costs.transfer;
  };
  Replay replay(stages, m);
  replay.run(schedule, [&](int rank, const Action &action) {
    const int s = action.stage, mb = action.microbatch;
    double ready = rankFree[rank];
    double cost;
    if (!action.backward) {
      if (s > 0)
        ready =
            std::max(ready, arrival(rank, s - 1, forwardEnd[key(s - 1, mb)]));
      cost = costs.forward.at(s);
    } else {
      ready = std::max(ready, forwardEnd[key(s, mb)]);
      if (s < stages - 1)
        ready =
            std::max(ready, arrival(rank, s + 1, backwardEnd[key(s + 1, mb)]));
      cost = costs.backward.at(s);
    }
    const double end = ready + cost;
    (action.backward ? backwardEnd : forwardEnd)[key(s, mb)] = end;
    rankFree[rank] = end;
    timeline.busy[rank] += cost;
    timeline.spans.push_back({rank, action.backward, s, mb, ready, end});
  });

  if (timeline.spans.empty())
    return timeline;
  double first = timeline.spans.front().start,
         last = timeline.spans.front().end;
  for (const Span &span : timeline.spans) {
    first = std::min(first, span.start);
    last = std::max(last, span.end);
  }
  timeline.makespan = last - first;
  if (timeline.makespan > 0)
    for (int rank = 0; rank < p; ++rank)
      timeline.idleFraction[rank] = 1 - timeline.busy[rank] / timeline.makespan;
  return timeline;
}

double theoreticalBubble(const Options &options) {
  const double p = options.ranks, m = options.microbatches,
               v = options.kind == Kind::InterleavedVirtual
                       ? options.virtualStages
                       : 1;
  return (p - 1) / (v * m + p - 1);
}

std::string formatOrder(const std::vector<Action> &actions) {
  std::string text;
  for (const Action &action : actions) {
    if (!text.empty())
      text += ' ';
    text += action.backward ? 'B' : 'F';
    text +=
        std::to_string(action.stage) + "." + std::to_string(action.microbatch);
  }
  return text;
}

} // namespace cleave::pipeline
