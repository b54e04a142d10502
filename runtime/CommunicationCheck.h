//===- CommunicationCheck.h - proves a job's ranks communicate consistently ===//
//
// cleave-compile runs this over every rank's program before it keeps them:
// each rank's step is played against its peers' with the runtime's own
// blocking rules (Executor.cpp, Communicator.cpp), and the check fails if
// any two ranks disagree on a collective (group, kind, reduction, element
// count, type, order), if a receive has no matching send (peer, tag, bytes)
// or a send no receive, or if the ranks can reach a state where none can
// move on (a deadlock). Plain C++ on the protobuf programs: no MLIR, so the
// runtime's tests and any tool can call it.
//
// The rules played, per rank, one step at a time in schedule order:
//  - a collective blocks until every member of its group has reached its
//    collective of the same sequence number on that group; an in-place
//    ALL_REDUCE with `event > 0` is only started (posted, not waited for)
//    and completes at the rank's Event{id, wait} or at the step's end;
//  - a send is posted and does not block; a receive blocks until its peer
//    has posted a send to it with that tag (matched in posting order, as
//    MPI's non-overtaking rule); a send must be received before anything
//    overwrites the bytes it reads (host memory) or, on a device staged
//    through host copies, before the same send instruction runs again;
//  - before its first optimizer function (or at the end of its step if it
//    has none) a loss-scaling program takes a world-wide maximum (the
//    overflow check); every step ends with all
//    sends received, all started collectives complete and two world-wide
//    sums (loss and peak memory).
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_COMMUNICATIONCHECK_H
#define CLEAVE_RUNTIME_COMMUNICATIONCHECK_H

#include "Status.h"
#include "program.pb.h"

#include <map>
#include <string>
#include <vector>

namespace cleave::runtime {

struct CommunicationCheckOptions {
  /// Play only the FORWARD functions (cleave-run --forward-only).
  bool forwardOnly = false;
  /// Sends read host copies (cpu-staged, CUDA without NCCL): a pending send
  /// blocks only the next run of the same instruction, not later writes.
  bool stagedSends = false;
};

/// One rank as the check plays it: the functions, tensors and schedule of
/// `program`, which several ranks may share (the data-parallel ranks of a
/// 1,024-rank job run one program up to their rank), with this rank's own
/// `mesh` (null: the program's) and, where the program is another rank's,
/// `peers`: each send/receive peer of the program -> this rank's (empty: as
/// written).
struct CheckedRank {
  const program::Program *program = nullptr;
  const program::Mesh *mesh = nullptr;
  std::map<int, int> peers;
};

/// Checks that the programs of one job (programs[r] is rank r's) cannot
/// disagree or deadlock; the error names both ranks and the operation.
Status checkCommunication(const std::vector<CheckedRank> &ranks,
                          const CommunicationCheckOptions &options = {});
Status checkCommunicationAllModes(const std::vector<CheckedRank> &ranks);

Status checkCommunication(const std::vector<const program::Program *> &programs,
                          const CommunicationCheckOptions &options = {});

/// Both ways a program can run: training and forward-only, sends from
/// device memory and from host copies.
Status checkCommunicationAllModes(
    const std::vector<const program::Program *> &programs);

/// checkCommunicationAllModes of the program files of a job (paths[r] is
/// rank r's). A rank file that names its role's shared program
/// (SharedProgram.h) is played as that program, read and checked once,
/// with the header's mesh and peers: a 1,024-rank job of 8 roles holds 8
/// programs, not 1,024. A full file equal to the first of its pipeline and
/// tensor coordinates' up to mesh, batch and send/receive peers is
/// compared byte for byte with that rewrite of it and shares its program
/// too. `programsRead`: how many programs were read.
Status checkCommunicationOfFiles(const std::vector<std::string> &paths,
                                 size_t *programsRead = nullptr);

} // namespace cleave::runtime

#endif // CLEAVE_RUNTIME_COMMUNICATIONCHECK_H
