//===- SharedProgram.h - rank files that hold a shared program by reference ===//
//
// The data-parallel ranks of one pipeline and tensor coordinate (a role)
// run one program up to their mesh, first sample and send/receive peers,
// and the tensor ranks of a pipeline stage one program up to those and
// their parameters' slices and coordinate constants. Where there are more
// than two data ranks, cleave-compile writes a stage's program once, as
// role-<k>.pb (data rank 0's, tensor rank 0's, sealed), and each
// rank-<r>.pb that shares it is a small header of version VERSION_SHARED:
// magic, model, the rank's mesh and batch, and Program.shared (the role
// file's name, its checksum, each peer of the shared program mapped to
// this rank's, its own parameters and constants' bytes where they
// differ), then the usual seal. Joining the header with the role file
// gives, field for field, the program the emitter translated for that rank
// (cleave-compile checks so on data rank 1 of every role).
//
// The loader, the communication check and cleave-run --dump-program all
// join through here, so a missing, corrupt or foreign role file is the
// same error everywhere. No MLIR, no MPI.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_SHAREDPROGRAM_H
#define CLEAVE_RUNTIME_SHAREDPROGRAM_H

#include "runtime/Status.h"

#include "program.pb.h"

#include <map>
#include <set>
#include <string>

namespace cleave::runtime {

/// The file name of role `role`'s shared program: "role-<role>.pb".
std::string sharedProgramFileName(int role);

/// Whether a parsed rank file is a header that names a shared program.
inline bool isSharedHeader(const program::Program &program) {
  return program.version() == program::VERSION_SHARED || program.has_shared();
}

/// Reads the shared program that `header` (the parsed rank file `name`, in
/// folder `directory`) names into `shared`: the file must exist, carry its
/// seal, parse as a Program that is not itself a header, and have the
/// checksum the header was compiled with. Every error names both files and
/// says what to copy or redo.
Status readSharedProgram(const program::Program &header,
                         const std::string &name, const std::string &directory,
                         program::Program &shared);

/// Every send/receive peer `program` names.
std::set<int> sendRecvPeers(const program::Program &program);

/// The header's peer map (shared program's peer -> this rank's), which must
/// name each of `peers` (sendRecvPeers of the shared program) exactly once.
Status sharedPeerMap(const program::Program &header,
                     const std::set<int> &peers, const std::string &name,
                     std::map<int, int> &peerOf);

/// The rank's program: `shared` (moved in) with the header's mesh, batch,
/// peers, parameters (own_parameters), constants' data, compile
/// fingerprint and checksum. `name` is the header's path.
Status joinSharedProgram(const program::Program &header,
                         program::Program &&shared, const std::string &name,
                         program::Program &joined);

} // namespace cleave::runtime

#endif // CLEAVE_RUNTIME_SHAREDPROGRAM_H
