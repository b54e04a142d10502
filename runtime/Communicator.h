//===- Communicator.h - MPI for the CPU backend ----------------*- C++ -*-===//
//
// The world of one cleave-run job and the communicator groups of the mesh.
// Without mpirun there is no MPI at all: a world of one rank, in which every
// group holds only this rank and every collective is a copy. Under mpirun,
// each program group becomes an MPI communicator (created collectively by
// its members only), and collectives are MPI's. Every MPI call goes through
// MPI_CHECK, which returns an error Status naming rank, host, file, line and
// MPI's own error string (STYLE.md rule 8); MPI_COMM_WORLD is set to
// MPI_ERRORS_RETURN so that failures come back to us instead of aborting.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_COMMUNICATOR_H
#define CLEAVE_RUNTIME_COMMUNICATOR_H

#include "runtime/Status.h"
#include "runtime/Tensor.h"
#include "runtime/Watchdog.h"

#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <string>
#include <vector>

namespace cleave::runtime {

/// "rank 1 (host node7): MPI_Allreduce(...) failed at Communicator.cpp:120:
/// MPI_ERR_COUNT: invalid count argument".
Status mpiError(int code, const char *call, const char *file, int line);

/// Runs an MPI call; on failure returns mpiError from the enclosing function.
#define MPI_CHECK(call)                                                        \
  do {                                                                         \
    int mpi_check_rc_ = (call);                                                \
    if (mpi_check_rc_ != MPI_SUCCESS)                                          \
      return ::cleave::runtime::mpiError(mpi_check_rc_, #call, __FILE__,       \
                                         __LINE__);                            \
  } while (0)

enum class Reduce { Sum, Mean, Max };

class Communicator {
public:
  /// A single process without MPI: rank 0 of a world of 1.
  Communicator();
  Communicator(const Communicator &) = delete;
  Communicator &operator=(const Communicator &) = delete;
  /// Frees the group communicators and reduction ops (before MPI_Finalize).
  ~Communicator();

  /// MPI_COMM_WORLD; MPI must be initialized.
  Status initMpi();

  /// Every blocking call from now on is a Watchdog::Wait of `watchdog`
  /// (null: none), which must outlive the calls.
  void setWatchdog(Watchdog *watchdog) { watchdog_ = watchdog; }
  Watchdog *watchdog() const { return watchdog_; }

  bool usesMpi() const { return mpi_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string &host() const { return host_; }

  /// Makes group g (g = 0, 1, ...) of each list of world ranks, which must
  /// hold this rank. Collective over the members of each group; every rank
  /// passes its groups in any order (they are created in a global order).
  Status createGroups(const std::vector<std::vector<int>> &groups);
  int groupCount() const { return int(groups_.size()); }
  int groupSize(int group) const { return int(groups_[group].ranks.size()); }
  /// This rank's index within `group`.
  int groupRank(int group) const { return groups_[group].self; }

  // Collectives over a group. Input and output may be the same tensor.
  // Mean is for floating-point types only.
  Status allReduce(int group, Reduce op, const TensorRef &in,
                   const TensorRef &out);
  /// out = the concatenation of every member's `in`, in group order.
  Status allGather(int group, const TensorRef &in, const TensorRef &out);
  /// out = this member's part (group rank r: r-th block) of the reduced `in`.
  Status reduceScatter(int group, Reduce op, const TensorRef &in,
                       const TensorRef &out);
  /// out = `in` of the member with group rank `root`.
  Status broadcast(int group, int root, const TensorRef &in,
                   const TensorRef &out);
  /// Blocking point-to-point with a world rank.
  Status send(int peer, int tag, const TensorRef &t);
  Status recv(int peer, int tag, const TensorRef &t);
  /// Starts sending `t` and returns at once (a pipeline stage sends while
  /// it computes on): its bytes must not change until the send finishes.
  Status startSend(int peer, int tag, const TensorRef &t);
  /// Finishes the started sends whose bytes overlap [data, data + size):
  /// call before writing there.
  Status finishSendsOverlapping(const void *data, size_t size);
  /// Finishes every started send.
  Status finishSends();
  bool sending() const { return !pending_.empty(); }
  /// Starts an in-place all-reduce of `t` over `group` that `event`
  /// names, and returns at once; finishCollective(event) completes it.
  Status startAllReduce(int group, Reduce op, const TensorRef &t, int event);
  /// Starts a reduce-scatter of `in` into `out` (ZeRO-1: out may be this
  /// rank's part of in) that `event` names, as startAllReduce.
  Status startReduceScatter(int group, Reduce op, const TensorRef &in,
                            const TensorRef &out, int event);
  /// Starts an all-gather of `in` into `out` (ZeRO-3's prefetched
  /// parameter) that `event` names, as startAllReduce.
  Status startAllGather(int group, const TensorRef &in, const TensorRef &out,
                        int event);
  /// Completes the started all-reduces of `event` (none: nothing to do).
  Status finishCollective(int event);
  /// Completes every started all-reduce.
  Status finishCollectives();
  /// Lets started all-reduces advance (MPI progresses inside its calls).
  void progress();
  bool collecting() const { return !started_.empty(); }

  // Over the whole world, for the driver.
  Status sumAll(std::vector<double> &values);
  Status maxAll(std::vector<uint64_t> &values);
  /// `all` = whether every rank passed ok = true.
  Status agree(bool ok, bool &all);
  /// Rank 0 gets every rank's bytes (`all`, by rank); others get nothing.
  Status gatherToRoot(const std::string &mine, std::vector<std::string> &all);
  /// Every rank gets every rank's bytes (`all`, by rank); for small
  /// messages (bootstrapping NCCL), below 2 GiB in all.
  Status allGatherSmall(const std::string &mine,
                        std::vector<std::string> &all);

private:
  struct Group {
    std::vector<int> ranks;
    int self = 0;
    MPI_Comm comm = MPI_COMM_NULL;
  };
  Status datatype(DType dtype, MPI_Datatype &type) const;
  Status reduceOp(DType dtype, Reduce op, MPI_Op &mpiOp) const;
  Status scaleMean(const TensorRef &t, int count) const;
  /// What a reduce-scatter passes to MPI, once its operands are checked.
  struct ReduceScatterCall {
    bool local = false; // one rank: already copied, nothing to send
    int count = 0;      // elements per rank
    MPI_Datatype type;
    MPI_Op op;
    const void *send = nullptr;
    std::vector<char> staged; // a copy of `in` when it overlaps `out`
  };
  Status prepareReduceScatter(int group, Reduce op, const TensorRef &in,
                              const TensorRef &out,
                              ReduceScatterCall &call) const;
  /// `peer` is another rank of the world and `t` fits one MPI call.
  Status checkPointToPoint(int peer, const TensorRef &t,
                           const char *what) const;

  /// What a blocking call over `group` waits for.
  Watchdog::What over(const char *call, int group, uint64_t bytes) const;
  /// What a blocking call with world rank `peer` waits for.
  Watchdog::What with(const char *call, int peer, bool from, int tag,
                      uint64_t bytes) const;

  Watchdog *watchdog_ = nullptr;
  bool mpi_ = false;
  int rank_ = 0;
  int size_ = 1;
  std::string host_;
  std::vector<Group> groups_;
  struct PendingSend {
    MPI_Request request;
    const char *data;
    size_t size;
  };
  std::vector<PendingSend> pending_;
  struct StartedReduce {
    int event;
    std::vector<MPI_Request> requests;
    TensorRef tensor;
    Reduce op; // Sum for an all-gather: nothing to scale
    int count; // ranks in the group, for the mean
    int group;
    // A started reduce-scatter's or all-gather's input, copied when the
    // output lies in it.
    std::vector<char> staged;
  };
  std::vector<StartedReduce> started_;
  // 16-bit float sum and max (MPI has no half types).
  MPI_Op halfSum_ = MPI_OP_NULL, halfMax_ = MPI_OP_NULL;
  MPI_Op bf16Sum_ = MPI_OP_NULL, bf16Max_ = MPI_OP_NULL;
};

} // namespace cleave::runtime

#endif // CLEAVE_RUNTIME_COMMUNICATOR_H
