//===- CommunicationCheck.cpp - plays every rank's step against its peers ===//
//
// Each rank's step is flattened into the actions that can wait on another
// rank (CommunicationCheck.h lists the rules), then all ranks are advanced
// until each has finished its step or none can move. Collectives are
// compared when the second member of their group posts them, receives
// against their sends when they match.
//
//===----------------------------------------------------------------------===//
#include "CommunicationCheck.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <tuple>

namespace cleave::runtime {
namespace {

namespace pb = cleave::program;

std::string str(int64_t v) { return std::to_string(v); }

uint64_t elementBytes(pb::DType dtype) {
  switch (dtype) {
  case pb::F64: case pb::I64: case pb::U64: return 8;
  case pb::F32: case pb::I32: case pb::U32: return 4;
  case pb::F16: case pb::BF16: case pb::I16: case pb::U16: return 2;
  default: return 1;
  }
}

/// One thing a rank does that may wait for another rank.
struct Action {
  enum class Kind : uint8_t {
    Write,      // an instruction overwrites `tensor`
    Send,
    Recv,
    Collective, // instruction (function, body) on `group`
    Wait,       // Event{event, wait}
    WaitAll,    // every started collective completes
    DrainSends, // every send is received
    World,      // a world-wide reduction of the runtime's own (`label`)
  };
  Kind kind;
  bool started = false; // Collective: only started here
  int32_t function = -1, body = -1, microbatch = -1;
  int32_t tag = 0, event = 0, tensor = -1;
  // As the program writes them: its group index and its peer. Ranks that
  // share a program share its actions; Checker::group() and peer() give a
  // rank's own.
  int32_t programGroup = -1, programPeer = -1;
  int32_t peerSlot = -1; // the index of programPeer in Flattened::peers
  const char *label = nullptr;
};

struct SendRecord {
  int rank;
  const Action *action;
  bool matched = false;
};

struct Started {
  int group;
  size_t seq;
  int event;
};

/// A program's actions, played by every rank that runs it.
struct Flattened {
  std::vector<Action> actions;
  std::vector<int> peers; // the distinct programPeer values
};

struct RankState {
  const std::vector<Action> *actions = nullptr;
  std::vector<int> peers; // per peer slot, the rank's own peer
  size_t pc = 0;
  bool postedCurrent = false; // the Collective at pc is posted
  size_t postedSeq = 0;
  std::vector<SendRecord *> sends; // posted, not yet known received
  // Per canonical group it posted on (-1: the world), how many times.
  std::vector<std::pair<int, size_t>> postedOn;
  std::vector<Started> started;
  std::string waiting; // why it cannot go on, once it cannot
};

class Checker {
public:
  Checker(const std::vector<CheckedRank> &programs,
          const CommunicationCheckOptions &options)
      : programs_(programs), options_(options) {}

  Status run() {
    CLEAVE_CHECK(validateMesh());
    ranks_.resize(programs_.size());
    // A program shared by ranks is flattened once and its actions shared
    // (a copy per rank of 1,024 would be gigabytes); each rank keeps only
    // its groups and peers.
    std::map<const pb::Program *, const Flattened *> flattenedBy;
    for (size_t r = 0; r < programs_.size(); ++r) {
      auto [it, fresh] = flattenedBy.emplace(programs_[r].program, nullptr);
      if (fresh) {
        flattened_.emplace_back();
        CLEAVE_CHECK(flatten(int(r), flattened_.back()));
        it->second = &flattened_.back();
      }
      CLEAVE_CHECK(retarget(int(r), *it->second));
    }
    return play();
  }

private:
  const std::vector<CheckedRank> &programs_;
  CommunicationCheckOptions options_;
  std::vector<RankState> ranks_;
  std::deque<Flattened> flattened_;
  // Whether step() says why a rank cannot go on (RankState::waiting).
  bool describe_ = false;
  // Canonical groups: their world ranks; world-wide reductions use -1.
  std::map<std::vector<int>, int> groupIds_;
  std::vector<std::vector<int>> groupRanks_;
  // Per rank, its program's group index -> canonical group.
  std::vector<std::vector<int>> groupOf_;
  // Per canonical group (index + 1; 0 is the world) and sequence number:
  // how many members
  // posted it, and the lowest rank that did with its action (what a later
  // member is compared with) — kept so that a group of 128 ranks is not
  // scanned at every post.
  struct PostedSeq {
    size_t count = 0;
    int lowest = -1;
    const Action *action = nullptr;
  };
  std::vector<std::vector<PostedSeq>> postedSeqs_;
  std::map<std::tuple<int, int, int>, std::deque<SendRecord *>> channels_;
  std::deque<SendRecord> sendStore_;
  std::vector<int> worldRanks_;

  const pb::Program &program(int rank) const {
    return *programs_[rank].program;
  }
  const pb::Mesh &meshOf(int rank) const {
    const CheckedRank &r = programs_[rank];
    return r.mesh ? *r.mesh : r.program->mesh();
  }
  /// The canonical group of `rank`'s collective `a`.
  int group(int rank, const Action &a) const {
    return groupOf_[rank][a.programGroup];
  }
  /// The world rank `rank`'s send or receive `a` goes to.
  int peer(int rank, const Action &a) const {
    return ranks_[rank].peers[a.peerSlot];
  }

  /// The rank's peer for a send or receive of its program to `peer`.
  int peerOf(int rank, int peer) const {
    const std::map<int, int> &peers = programs_[rank].peers;
    if (peers.empty())
      return peer;
    auto it = peers.find(peer);
    return it == peers.end() ? -1 : it->second;
  }

  Status validateMesh() {
    int world = int(programs_.size());
    if (world == 0)
      return Status::error("no program to check");
    groupOf_.resize(world);
    for (int r = 0; r < world; ++r)
      worldRanks_.push_back(r);
    for (int r = 0; r < world; ++r) {
      const pb::Mesh &mesh = meshOf(r);
      if (mesh.rank() != r || mesh.world_size() != world)
        return Status::error(
            "rank " + str(r) + "'s program says it is rank " +
            str(mesh.rank()) + " of " + str(mesh.world_size()) + ", not of " +
            str(world) + ": the programs are not from one compile");
      for (const pb::Group &g : mesh.groups()) {
        std::vector<int> members(g.ranks().begin(), g.ranks().end());
        bool self = false;
        for (int m : members) {
          if (m < 0 || m >= world)
            return Status::error("rank " + str(r) + "'s group '" + g.name() +
                                 "' names rank " + str(m) + " of a world of " +
                                 str(world));
          self |= m == r;
        }
        if (!self)
          return Status::error("rank " + str(r) + "'s group '" + g.name() +
                               "' does not contain the rank");
        auto [it, fresh] = groupIds_.emplace(members, int(groupRanks_.size()));
        if (fresh)
          groupRanks_.push_back(members);
        groupOf_[r].push_back(it->second);
      }
    }
    // Every member of a group holds the group.
    for (int r = 0; r < world; ++r)
      for (int g : groupOf_[r])
        for (int m : groupRanks_[g])
          if (std::find(groupOf_[m].begin(), groupOf_[m].end(), g) ==
              groupOf_[m].end())
            return Status::error("rank " + str(r) + " has a group of ranks " +
                                 describeRanks(groupRanks_[g]) +
                                 ", which rank " + str(m) +
                                 "'s program does not have");
    postedSeqs_.resize(groupRanks_.size() + 1);
    return Status::ok();
  }

  static std::string describeRanks(const std::vector<int> &ranks) {
    std::string s = "[";
    for (size_t i = 0; i < ranks.size(); ++i)
      s += (i ? "," : "") + str(ranks[i]);
    return s + "]";
  }

  // --- Flattening -------------------------------------------------------

  template <typename Where>
  Status checkTensor(int rank, int id, const Where &where) const {
    if (id < 0 || id >= program(rank).tensors_size())
      return Status::error("rank " + str(rank) + ", " + where() +
                           ": tensor " + str(id) + " does not exist");
    return Status::ok();
  }

  /// Per tensor of rank's program, whether it shares bytes with a tensor
  /// some send reads: only an overwrite of such a tensor can wait on a
  /// peer. A program without sends (tensor x data parallelism) then plays
  /// its collectives alone, which keeps the check of 1,024 ranks short.
  std::vector<bool> sendOverlaps(int rank) const {
    const pb::Program &p = program(rank);
    std::vector<bool> result(p.tensors_size(), false);
    std::set<int> sent;
    for (const pb::Function &fn : p.functions())
      for (const pb::Instruction &inst : fn.body())
        if (inst.has_send_recv() && inst.send_recv().send() &&
            inst.send_recv().tensor() >= 0 &&
            inst.send_recv().tensor() < p.tensors_size())
          sent.insert(inst.send_recv().tensor());
    if (sent.empty())
      return result;
    for (int t = 0; t < p.tensors_size(); ++t)
      for (int s : sent)
        if (overlaps(rank, s, t)) {
          result[t] = true;
          break;
        }
    return result;
  }

  /// Checks that rank's program's groups and peers (in `flat`, flattened
  /// maybe by another rank) exist for it, and gives it `flat`'s actions.
  Status retarget(int rank, const Flattened &flat) {
    RankState &st = ranks_[rank];
    st.actions = &flat.actions;
    for (const Action &a : flat.actions)
      if (a.kind == Action::Kind::Collective &&
          (a.programGroup < 0 || a.programGroup >= int(groupOf_[rank].size())))
        return Status::error("rank " + str(rank) + ", functions[" +
                             str(a.function) + "].body[" + str(a.body) +
                             "]: group " + str(a.programGroup) +
                             " does not exist");
    st.peers.clear();
    for (int programPeer : flat.peers) {
      int peer = peerOf(rank, programPeer);
      if (peer < 0 || peer >= int(programs_.size()) || peer == rank) {
        // The first action naming it, for the message.
        auto a = std::find_if(
            flat.actions.begin(), flat.actions.end(), [&](const Action &a) {
              return (a.kind == Action::Kind::Send ||
                      a.kind == Action::Kind::Recv) &&
                     a.programPeer == programPeer;
            });
        return Status::error(
            "rank " + str(rank) + ", functions[" + str(a->function) +
            "].body[" + str(a->body) + "]: " +
            (a->kind == Action::Kind::Send ? "a send to" : "a receive from") +
            " rank " + str(peer) + " in a world of " + str(programs_.size()));
      }
      st.peers.push_back(peer);
    }
    return Status::ok();
  }

  Status flatten(int rank, Flattened &flat) {
    const pb::Program &p = program(rank);
    std::vector<Action> &out = flat.actions;
    std::map<int, int> peerSlots;
    std::vector<bool> overwritesSent = sendOverlaps(rank);
    bool scaling = p.loss_scaling().enabled(), checked = false;
    auto at = [](int f, int i, int mb) {
      Action a{Action::Kind::Write};
      a.function = f;
      a.body = i;
      a.microbatch = mb;
      return a;
    };
    for (int s = 0; s < p.schedule_size(); ++s) {
      const pb::Step &step = p.schedule(s);
      int f = step.function();
      if (f < 0 || f >= p.functions_size())
        return Status::error("rank " + str(rank) + ": schedule[" + str(s) +
                             "] names function " + str(f) +
                             ", which does not exist");
      const pb::Function &fn = p.functions(f);
      if (options_.forwardOnly && fn.kind() != pb::FORWARD &&
          fn.kind() != pb::REFRESH)
        continue;
      if (fn.kind() == pb::OPTIMIZER && scaling && !checked) {
        out.push_back({Action::Kind::WaitAll});
        Action world{Action::Kind::World};
        world.label = "the loss scaler's overflow check";
        out.push_back(world);
        checked = true;
      }
      for (int i = 0; i < fn.body_size(); ++i) {
        const pb::Instruction &inst = fn.body(i);
        // Made only for a message: the check of 1,024 ranks visits
        // hundreds of millions of instructions.
        auto where = [&] {
          return "functions[" + str(f) + "].body[" + str(i) + "]";
        };
        auto write = [&](int tensor) -> Status {
          CLEAVE_CHECK(checkTensor(rank, tensor, where));
          if (options_.stagedSends || !overwritesSent[tensor])
            return Status::ok();
          Action a = at(f, i, step.microbatch());
          a.tensor = tensor;
          out.push_back(a);
          return Status::ok();
        };
        switch (inst.kind_case()) {
        case pb::Instruction::kKernel:
          for (int id : inst.kernel().outputs())
            CLEAVE_CHECK(write(id));
          break;
        case pb::Instruction::kCopy:
          CLEAVE_CHECK(write(inst.copy().destination()));
          break;
        case pb::Instruction::kCollective: {
          const pb::Collective &c = inst.collective();
          if (c.group() < 0 || c.group() >= int(groupOf_[rank].size()))
            return Status::error("rank " + str(rank) + ", " + where() +
                                 ": group " + str(c.group()) +
                                 " does not exist");
          if (c.inputs_size() != c.outputs_size())
            return Status::error("rank " + str(rank) + ", " + where() +
                                 ": a collective with " +
                                 str(c.inputs_size()) + " inputs and " +
                                 str(c.outputs_size()) + " outputs");
          for (int id : c.inputs())
            CLEAVE_CHECK(checkTensor(rank, id, where));
          for (int id : c.outputs())
            CLEAVE_CHECK(write(id));
          Action a = at(f, i, step.microbatch());
          a.kind = Action::Kind::Collective;
          a.programGroup = c.group();
          a.started = c.event() > 0 &&
                      (((c.kind() == pb::REDUCE_SCATTER ||
                         c.kind() == pb::ALL_GATHER) &&
                        c.inputs_size() > 0) ||
                       (c.kind() == pb::ALL_REDUCE && c.inputs_size() > 0 &&
                        std::equal(c.inputs().begin(), c.inputs().end(),
                                   c.outputs().begin())));
          a.event = c.event();
          out.push_back(a);
          break;
        }
        case pb::Instruction::kSendRecv: {
          const pb::SendRecv &sr = inst.send_recv();
          CLEAVE_CHECK(checkTensor(rank, sr.tensor(), where));

          if (!sr.send())
            CLEAVE_CHECK(write(sr.tensor()));
          Action a = at(f, i, step.microbatch());
          a.kind = sr.send() ? Action::Kind::Send : Action::Kind::Recv;
          a.programPeer = sr.peer();
          auto [slot, fresh] =
              peerSlots.emplace(sr.peer(), int(flat.peers.size()));
          if (fresh)
            flat.peers.push_back(sr.peer());
          a.peerSlot = slot->second;
          a.tag = sr.tag();
          a.tensor = sr.tensor();
          out.push_back(a);
          break;
        }
        case pb::Instruction::kEvent:
          if (inst.event().wait() && inst.event().id() > 0) {
            Action a = at(f, i, step.microbatch());
            a.kind = Action::Kind::Wait;
            a.event = inst.event().id();
            out.push_back(a);
          }
          break;
        default:
          break;
        }
      }
    }
    if (scaling && !checked && !options_.forwardOnly) {
      out.push_back({Action::Kind::WaitAll});
      Action world{Action::Kind::World};
      world.label = "the loss scaler's overflow check";
      out.push_back(world);
    }
    out.push_back({Action::Kind::DrainSends});
    out.push_back({Action::Kind::WaitAll});
    for (const char *label : {"the step's loss sum", "the step's peak memory"}) {
      Action world{Action::Kind::World};
      world.label = label;
      out.push_back(world);
    }
    return Status::ok();
  }

  // --- Descriptions -----------------------------------------------------

  static int64_t elements(const pb::Tensor &t) {
    int64_t n = 1;
    for (int64_t d : t.shape())
      n *= d;
    return n;
  }

  std::string tensorText(int rank, int id) const {
    const pb::Tensor &t = program(rank).tensors(id);
    std::string s = str(elements(t)) + " " + pb::DType_Name(t.dtype());
    if (!t.name().empty())
      s += " ('" + t.name() + "')";
    return s;
  }

  std::string where(int rank, const Action &a) const {
    if (a.function < 0)
      return "the end of its step";
    const pb::Function &fn = program(rank).functions(a.function);
    std::string s = "functions[" + str(a.function) + "] '" + fn.name() +
                    "' body[" + str(a.body) + "]";
    if (a.microbatch >= 0)
      s += " (microbatch " + str(a.microbatch) + ")";
    return s;
  }

  std::string what(int rank, const Action &a) const {
    switch (a.kind) {
    case Action::Kind::Write:
      return "overwrite " + tensorText(rank, a.tensor);
    case Action::Kind::Send:
      return "send " + tensorText(rank, a.tensor) + " to rank " +
             str(peer(rank, a)) +
             " (tag " + str(a.tag) + ")";
    case Action::Kind::Recv:
      return "receive " + tensorText(rank, a.tensor) + " from rank " +
             str(peer(rank, a)) + " (tag " + str(a.tag) + ")";
    case Action::Kind::Collective: {
      const pb::Collective &c =
          program(rank).functions(a.function).body(a.body).collective();
      std::string s = pb::CollectiveKind_Name(c.kind());
      if (c.kind() == pb::ALL_REDUCE || c.kind() == pb::REDUCE_SCATTER)
        s += " " + pb::ReduceOp_Name(c.reduce());
      if (c.kind() == pb::BROADCAST)
        s += " from member " + str(c.root());
      s += " of ";
      if (c.inputs_size() <= 3) {
        for (int i = 0; i < c.inputs_size(); ++i)
          s += (i ? ", " : "") + tensorText(rank, c.inputs(i));
      } else {
        int64_t total = 0;
        for (int id : c.inputs())
          total += elements(program(rank).tensors(id));
        s += str(c.inputs_size()) + " tensors (" + str(total) +
             " elements; the first " + tensorText(rank, c.inputs(0)) + ")";
      }
      s += " on group '" +
           meshOf(rank).groups(c.group()).name() + "' " +
           describeRanks(groupRanks_[group(rank, a)]);
      if (a.started)
        s += " (started, event " + str(a.event) + ")";
      return s;
    }
    case Action::Kind::Wait:
      return "wait for the all-reduces started under event " + str(a.event);
    case Action::Kind::WaitAll:
      return "wait for its started all-reduces";
    case Action::Kind::DrainSends:
      return "wait for its sends to be received";
    case Action::Kind::World:
      return a.label;
    }
    return "";
  }

  std::string at(int rank, const Action &a) const {
    return "rank " + str(rank) + " at " + where(rank, a) + ": " + what(rank, a);
  }

  // --- Matching ---------------------------------------------------------

  /// Whether two members' collectives of one sequence number agree.
  std::string disagreement(int r1, const Action &a1, int r2,
                           const Action &a2) const {
    if (a1.kind == Action::Kind::World || a2.kind == Action::Kind::World)
      return a1.label == a2.label ? "" : "they are different operations";
    const pb::Collective &c1 =
        program(r1).functions(a1.function).body(a1.body).collective();
    const pb::Collective &c2 =
        program(r2).functions(a2.function).body(a2.body).collective();
    if (c1.kind() != c2.kind())
      return "their kinds differ";
    if ((c1.kind() == pb::ALL_REDUCE || c1.kind() == pb::REDUCE_SCATTER) &&
        c1.reduce() != c2.reduce())
      return "their reductions differ";
    if (c1.kind() == pb::BROADCAST && c1.root() != c2.root())
      return "their roots differ";
    if (c1.inputs_size() != c2.inputs_size())
      return "their operand counts differ";
    for (int i = 0; i < c1.inputs_size(); ++i) {
      const pb::Tensor &t1 = program(r1).tensors(c1.inputs(i));
      const pb::Tensor &t2 = program(r2).tensors(c2.inputs(i));
      std::string operand =
          c1.inputs_size() > 1 ? " in operand " + str(i) : std::string();
      if (t1.dtype() != t2.dtype())
        return "their element types differ" + operand + ": " +
               tensorText(r1, c1.inputs(i)) + " against " +
               tensorText(r2, c2.inputs(i));
      if (elements(t1) != elements(t2))
        return "their element counts differ" + operand + ": " +
               tensorText(r1, c1.inputs(i)) + " against " +
               tensorText(r2, c2.inputs(i));
    }
    if (a1.started != a2.started)
      return "one is started (overlapped), the other is not";
    return "";
  }

  bool overlaps(int rank, int a, int b) const {
    const pb::Program &p = program(rank);
    const pb::Tensor &x = p.tensors(a), &y = p.tensors(b);
    if (x.buffer() != y.buffer())
      return false;
    auto bytes = [](const pb::Tensor &t) {
      uint64_t n = elementBytes(t.dtype());
      for (int64_t d : t.shape())
        n *= uint64_t(std::max<int64_t>(d, 0));
      return n;
    };
    uint64_t xe = x.offset() + bytes(x), ye = y.offset() + bytes(y);
    return x.offset() < ye && y.offset() < xe;
  }

  bool complete(int group, size_t seq) const {
    const std::vector<int> &members =
        group < 0 ? worldRanks() : groupRanks_[group];
    const std::vector<PostedSeq> &seqs = postedSeqs_[group + 1];
    return seq < seqs.size() && seqs[seq].count == members.size();
  }

  /// The members of `group` that have not posted collective `seq` on it.
  std::string missing(int group, size_t seq) const {
    const std::vector<int> &members =
        group < 0 ? worldRanks() : groupRanks_[group];
    std::vector<int> late;
    for (int m : members)
      if (postedCount(m, group) <= seq)
        late.push_back(m);
    std::string s = late.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < late.size() && i < 8; ++i)
      s += (i ? ", " : "") + str(late[i]);
    return s + (late.size() > 8 ? ", ..." : "");
  }

  const std::vector<int> &worldRanks() const { return worldRanks_; }

  /// How many collectives `rank` posted on `group`.
  size_t postedCount(int rank, int group) const {
    for (const auto &[g, count] : ranks_[rank].postedOn)
      if (g == group)
        return count;
    return 0;
  }

  /// Posts rank's collective `a` on `group`; an error if a member that
  /// posted the same sequence number disagrees.
  Status post(int rank, const Action &a, int group, size_t &seq) {
    std::vector<std::pair<int, size_t>> &postedOn = ranks_[rank].postedOn;
    auto mine = std::find_if(postedOn.begin(), postedOn.end(),
                             [&](const auto &p) { return p.first == group; });
    if (mine == postedOn.end())
      mine = postedOn.insert(postedOn.end(), {group, 0});
    seq = mine->second++;
    std::vector<PostedSeq> &seqs = postedSeqs_[group + 1];
    if (seqs.size() <= seq)
      seqs.resize(seq + 1);
    PostedSeq &first = seqs[seq];
    ++first.count;
    // Compared with the lowest-ranked member that posted it before.
    if (first.action) {
      std::string why = disagreement(first.lowest, *first.action, rank, a);
      if (!why.empty())
        return Status::error(
            "ranks " + str(first.lowest) + " and " + str(rank) +
            " disagree on collective #" + str(seq + 1) + " of " +
            (group < 0 ? std::string("the world")
                       : "group " + describeRanks(groupRanks_[group])) +
            " (" + why + "): " + at(first.lowest, *first.action) + "; " +
            at(rank, a));
    }
    if (!first.action || rank < first.lowest) {
      first.lowest = rank;
      first.action = &a;
    }
    return Status::ok();
  }

  /// Advances `rank` by one action if it can; sets `moved`.
  Status step(int rank, bool &moved) {
    RankState &st = ranks_[rank];
    moved = false;
    if (st.pc >= st.actions->size())
      return Status::ok();
    const Action &a = (*st.actions)[st.pc];
    auto advance = [&] {
      ++st.pc;
      st.postedCurrent = false;
      st.waiting.clear();
      moved = true;
    };
    auto unmatchedSend = [&](auto pred) -> SendRecord * {
      for (SendRecord *s : st.sends)
        if (!s->matched && pred(*s))
          return s;
      return nullptr;
    };
    auto pruneSends = [&] {
      st.sends.erase(std::remove_if(st.sends.begin(), st.sends.end(),
                                    [](SendRecord *s) { return s->matched; }),
                     st.sends.end());
    };
    switch (a.kind) {
    case Action::Kind::Write: {
      SendRecord *s = unmatchedSend([&](const SendRecord &s) {
        return overlaps(rank, s.action->tensor, a.tensor);
      });
      if (s) {
        if (describe_)
          st.waiting = "its " + what(rank, *s->action) + " at " +
                       where(rank, *s->action) +
                       " must be received before it can " + what(rank, a);
        return Status::ok();
      }
      advance();
      return Status::ok();
    }
    case Action::Kind::Send: {
      if (options_.stagedSends) {
        SendRecord *s = unmatchedSend([&](const SendRecord &s) {
          return s.action->function == a.function && s.action->body == a.body;
        });
        if (s) {
          if (describe_)
            st.waiting = "the previous run of this send (" +
                         where(rank, *s->action) + ") must be received first";
          return Status::ok();
        }
      }
      sendStore_.push_back({rank, &a});
      SendRecord *record = &sendStore_.back();
      channels_[{rank, peer(rank, a), a.tag}].push_back(record);
      st.sends.push_back(record);
      advance();
      return Status::ok();
    }
    case Action::Kind::Recv: {
      int from = peer(rank, a);
      std::deque<SendRecord *> &channel = channels_[{from, rank, a.tag}];
      if (channel.empty()) {
        if (describe_)
          st.waiting = "waits for rank " + str(from) + " to send it";
        return Status::ok();
      }
      SendRecord *s = channel.front();
      channel.pop_front();
      s->matched = true;
      const pb::Tensor &sent = program(from).tensors(s->action->tensor);
      const pb::Tensor &into = program(rank).tensors(a.tensor);
      if (sent.dtype() != into.dtype() || elements(sent) != elements(into))
        return Status::error("ranks " + str(from) + " and " + str(rank) +
                             " disagree on a message (tag " + str(a.tag) +
                             "): " + at(from, *s->action) + "; " +
                             at(rank, a));
      advance();
      return Status::ok();
    }
    case Action::Kind::Collective:
    case Action::Kind::World: {
      int group = a.kind == Action::Kind::World ? -1 : this->group(rank, a);
      if (!st.postedCurrent) {
        CLEAVE_CHECK(post(rank, a, group, st.postedSeq));
        st.postedCurrent = true;
        if (a.started) {
          st.started.push_back({group, st.postedSeq, a.event});
          advance();
          return Status::ok();
        }
      }
      if (!complete(group, st.postedSeq)) {
        if (describe_)
          st.waiting =
              "waits for " + missing(group, st.postedSeq) + " to reach it";
        return Status::ok();
      }
      advance();
      return Status::ok();
    }
    case Action::Kind::Wait:
    case Action::Kind::WaitAll: {
      for (const Started &s : st.started)
        if ((a.kind == Action::Kind::WaitAll || s.event == a.event) &&
            !complete(s.group, s.seq)) {
          if (describe_)
            st.waiting = "its started all-reduce #" + str(s.seq + 1) +
                         " of group " + describeRanks(groupRanks_[s.group]) +
                         " waits for " + missing(s.group, s.seq) +
                         " to start it";
          return Status::ok();
        }
      st.started.erase(std::remove_if(st.started.begin(), st.started.end(),
                                      [&](const Started &s) {
                                        return a.kind ==
                                                   Action::Kind::WaitAll ||
                                               s.event == a.event;
                                      }),
                       st.started.end());
      advance();
      return Status::ok();
    }
    case Action::Kind::DrainSends: {
      pruneSends();
      if (!st.sends.empty()) {
        const Action &s = *st.sends.front()->action;
        if (describe_)
          st.waiting = "its " + what(rank, s) + " at " + where(rank, s) +
                       " is not received";
        return Status::ok();
      }
      advance();
      return Status::ok();
    }
    }
    return Status::ok();
  }

  Status play() {
    int world = int(ranks_.size());
    for (bool any = true; any;) {
      any = false;
      for (int r = 0; r < world; ++r)
        for (bool moved = true; moved;) {
          CLEAVE_CHECK(step(r, moved));
          any |= moved;
        }
    }
    // Stuck: once more, saying why each waits (the words are not built
    // while ranks still move: a 1,024-rank job waits millions of times).
    describe_ = true;
    for (int r = 0; r < world; ++r)
      if (ranks_[r].pc < ranks_[r].actions->size()) {
        bool moved = false;
        CLEAVE_CHECK(step(r, moved));
      }
    std::string stuck;
    int shown = 0;
    for (int r = 0; r < world; ++r) {
      const RankState &st = ranks_[r];
      if (st.pc >= st.actions->size())
        continue;
      if (shown++ < 8)
        stuck += "\n  " + at(r, (*st.actions)[st.pc]) + ": " + st.waiting;
    }
    if (stuck.empty())
      return Status::ok();
    std::string finished;
    for (int r = 0; r < world; ++r)
      if (ranks_[r].pc >= ranks_[r].actions->size())
        finished += (finished.empty() ? "" : ", ") + str(r);
    return Status::error(
        "the ranks' communication can deadlock: " + str(shown) +
        " rank(s) wait and none can go on" +
        (finished.empty() ? "" : " (ranks " + finished + " finished their step)") +
        ":" + stuck);
  }
};

} // namespace

Status checkCommunication(const std::vector<CheckedRank> &ranks,
                          const CommunicationCheckOptions &options) {
  return Checker(ranks, options).run();
}

Status checkCommunication(const std::vector<const program::Program *> &programs,
                          const CommunicationCheckOptions &options) {
  std::vector<CheckedRank> ranks;
  for (const program::Program *p : programs)
    ranks.push_back({p, nullptr, {}});
  return checkCommunication(ranks, options);
}

Status checkCommunicationAllModes(const std::vector<CheckedRank> &ranks) {
  for (bool forwardOnly : {false, true})
    for (bool staged : {false, true}) {
      CommunicationCheckOptions options;
      options.forwardOnly = forwardOnly;
      options.stagedSends = staged;
      Status status = checkCommunication(ranks, options);
      if (!status)
        return Status::error(
            status.message() + "\n  (checked as a " +
            (forwardOnly ? "forward-only" : "training") + " step" +
            (staged ? ", sends staged through host copies" : "") + ")");
    }
  return Status::ok();
}

Status checkCommunicationAllModes(
    const std::vector<const program::Program *> &programs) {
  std::vector<CheckedRank> ranks;
  for (const program::Program *p : programs)
    ranks.push_back({p, nullptr, {}});
  return checkCommunicationAllModes(ranks);
}

} // namespace cleave::runtime

//===----------------------------------------------------------------------===//
// A job's program files
//===----------------------------------------------------------------------===//

#include "ProgramSplice.h"
#include "SharedProgram.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>

#include <deque>
#include <fstream>
#include <memory>

namespace cleave::runtime {
namespace {

namespace pb = cleave::program;
using google::protobuf::internal::WireFormatLite;

/// The mesh and batch of a serialized Program, every other field skipped;
/// `hasBatch`: whether it has a batch.
bool parseHeader(const std::string &bytes, pb::Mesh &mesh, pb::Batch &batch,
                 bool &hasBatch, bool &shared) {
  hasBatch = false;
  shared = false;
  google::protobuf::io::CodedInputStream in(
      reinterpret_cast<const uint8_t *>(bytes.data()), int(bytes.size()));
  in.SetTotalBytesLimit(INT32_MAX);
  while (uint32_t tag = in.ReadTag()) {
    int field = WireFormatLite::GetTagFieldNumber(tag);
    shared |= field == pb::Program::kSharedFieldNumber;
    if ((field == pb::Program::kMeshFieldNumber ||
         field == pb::Program::kBatchFieldNumber) &&
        WireFormatLite::GetTagWireType(tag) ==
            WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      google::protobuf::MessageLite &message =
          field == pb::Program::kMeshFieldNumber
              ? static_cast<google::protobuf::MessageLite &>(mesh)
              : batch;
      hasBatch |= field == pb::Program::kBatchFieldNumber;
      uint32_t size;
      if (!in.ReadVarint32(&size))
        return false;
      auto limit = in.PushLimit(int(size));
      if (!message.MergeFromCodedStream(&in) || !in.ConsumedEntireMessage())
        return false;
      in.PopLimit(limit);
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return false;
    }
  }
  return in.ConsumedEntireMessage();
}

/// Drops what the check does not read: many programs kept whole would not
/// fit this memory.
void stripUnread(pb::Program &program) {
  program.clear_parameters();
  for (pb::Function &fn : *program.mutable_functions())
    for (pb::Instruction &inst : *fn.mutable_body())
      if (inst.has_kernel()) {
        pb::Kernel *kernel = inst.mutable_kernel();
        kernel->clear_inputs();
        kernel->clear_attributes();
        kernel->clear_location();
      }
}

/// The first program read of a (pipeline, tensor) coordinate, and its
/// unsealed bytes in pieces, joined into another rank's (its mesh, batch
/// and send/receive peers) to compare with that rank's file.
struct Role {
  const pb::Program *program = nullptr;
  std::unique_ptr<ProgramSplice> splice;
};

} // namespace

Status checkCommunicationOfFiles(const std::vector<std::string> &paths,
                                 size_t *programsRead) {
  std::deque<pb::Program> programs;
  std::deque<pb::Mesh> meshes;
  std::vector<CheckedRank> ranks(paths.size());
  std::map<std::pair<int, int>, Role> roles;
  // The shared programs that rank headers name (SharedProgram.h), by path,
  // and their send/receive peers.
  std::map<std::string, std::pair<const pb::Program *, std::set<int>>> shared;
  std::string bytes, shifted;
  for (size_t r = 0; r < paths.size(); ++r) {
    std::ifstream in(paths[r], std::ios::binary | std::ios::ate);
    bytes.resize(in ? size_t(in.tellg()) : 0);
    in.seekg(0);
    in.read(bytes.data(), std::streamsize(bytes.size()));
    pb::Mesh mesh;
    pb::Batch batch;
    bool hasBatch = false, isHeader = false;
    if (!in || !parseHeader(bytes, mesh, batch, hasBatch, isHeader))
      return Status::error("cannot read back " + paths[r]);
    if (isHeader) {
      // A rank that names its role's shared program: read that once, and
      // play it with this rank's mesh and peers.
      pb::Program header;
      if (!header.ParseFromString(bytes))
        return Status::error("cannot read back " + paths[r]);
      size_t slash = paths[r].rfind('/');
      std::string directory =
          slash == std::string::npos ? "" : paths[r].substr(0, slash);
      std::string path = directory.empty()
                             ? header.shared().path()
                             : directory + "/" + header.shared().path();
      auto [it, fresh] = shared.try_emplace(path);
      pb::Program read;
      // Read even when seen before, unless the checksum is the one read:
      // a rank naming another file's contents is refused the same way.
      if (fresh || it->second.first->sha256() != header.shared().sha256()) {
        CLEAVE_CHECK(readSharedProgram(header, paths[r], directory, read));
        programs.push_back(std::move(read));
        stripUnread(programs.back());
        it->second = {&programs.back(), sendRecvPeers(programs.back())};
      }
      std::map<int, int> peerOf;
      CLEAVE_CHECK(
          sharedPeerMap(header, it->second.second, paths[r], peerOf));
      meshes.push_back(std::move(*header.mutable_mesh()));
      ranks[r] = {it->second.first, &meshes.back(), std::move(peerOf)};
      continue;
    }
    Role &role = roles[{mesh.pipeline_rank(), mesh.tensor_rank()}];
    if (role.program) {
      // Another rank of the role: its file must be the role's program with
      // its own mesh, batch and peers, found by the place of each of the
      // role's group members in this rank's group of that name (of the
      // groups that differ; one world rank taken to two is no such rank).
      std::map<int, int> peerOf;
      const pb::Mesh &first = role.program->mesh();
      bool same = first.groups_size() == mesh.groups_size();
      for (int g = 0; same && g < mesh.groups_size(); ++g) {
        const pb::Group &a = first.groups(g), &b = mesh.groups(g);
        same = a.name() == b.name() && a.ranks_size() == b.ranks_size();
        // A group both ranks hold (the data-parallel group) moves nobody.
        if (same && std::equal(a.ranks().begin(), a.ranks().end(),
                               b.ranks().begin()))
          continue;
        for (int i = 0; same && i < a.ranks_size(); ++i) {
          auto [it, fresh] = peerOf.emplace(a.ranks(i), b.ranks(i));
          same = fresh || it->second == b.ranks(i);
        }
      }
      bool unmapped = false;
      same = same && role.splice->ok() &&
             role.splice->write(
                 mesh, hasBatch ? &batch : nullptr,
                 [&](int peer) {
                   auto it = peerOf.find(peer);
                   unmapped |= it == peerOf.end();
                   return it == peerOf.end() ? -1 : it->second;
                 },
                 shifted) &&
             !unmapped;
      // After the shared bytes, only the seal (a fingerprint, a checksum).
      pb::Program seal;
      same = same && bytes.size() > shifted.size() &&
             bytes.compare(0, shifted.size(), shifted) == 0 &&
             seal.ParseFromArray(bytes.data() + shifted.size(),
                                 int(bytes.size() - shifted.size())) &&
             seal.ByteSizeLong() == bytes.size() - shifted.size() &&
             seal.ByteSizeLong() ==
                 size_t(seal.compile_fingerprint().size() +
                        seal.sha256().size() + 6);
      if (same) {
        meshes.push_back(std::move(mesh));
        ranks[r] = {role.program, &meshes.back(), std::move(peerOf)};
        continue;
      }
    }
    programs.emplace_back();
    pb::Program &program = programs.back();
    if (!program.ParseFromString(bytes))
      return Status::error("cannot read back " + paths[r]);
    ranks[r] = {&program, nullptr, {}};
    if (!role.program) {
      role.program = &program;
      pb::Program unsealed = program;
      unsealed.clear_compile_fingerprint();
      unsealed.clear_sha256();
      role.splice = std::make_unique<ProgramSplice>(unsealed);
    }
    stripUnread(program);
  }
  if (programsRead)
    *programsRead = programs.size();
  return checkCommunicationAllModes(ranks);
}

} // namespace cleave::runtime
