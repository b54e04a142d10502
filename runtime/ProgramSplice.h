//===- ProgramSplice.h - a program's bytes for many ranks at once -*- C++ -*-===//
//
// The data-parallel ranks of a role run one program up to their mesh, their
// batch (first sample) and the peers of their sends and receives. A
// ProgramSplice serializes a role's program once, in pieces cut at those
// fields, and gives any such rank's serialization by joining the pieces
// with its own mesh, batch and re-encoded functions that send or receive:
// byte for byte what serializing that rank's program (deterministically)
// gives, since protobuf writes a message's fields in field-number order.
// The emitter writes 1,024 ranks' files with it, and cleave-compile's
// communication check compares them with it, without serializing 1,024
// programs of megabytes. No MLIR: both link it.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_PROGRAMSPLICE_H
#define CLEAVE_RUNTIME_PROGRAMSPLICE_H

#include "program.pb.h"

#include <functional>
#include <string>
#include <vector>

namespace cleave::runtime {

/// `message` serialized deterministically (maps in key order).
bool serializeDeterministic(const google::protobuf::MessageLite &message,
                            std::string &out);

class ProgramSplice {
public:
  /// Cuts `program` (its mesh, batch and peers are replaced by write()).
  explicit ProgramSplice(const program::Program &program);
  /// Whether the program could be serialized and cut.
  bool ok() const { return ok_; }
  /// The serialization of the program with `mesh`, `batch` (none: null) and
  /// each send/receive peer p as peerOf(p), into `out`.
  bool write(const program::Mesh &mesh, const program::Batch *batch,
             const std::function<int(int)> &peerOf, std::string &out);

private:
  bool ok_ = false;
  // The fields before the mesh, those between the batch and the
  // functions, and those after the functions, serialized.
  std::string before_, between_, after_;
  // Each function as written in the program (tag, length, bytes); empty
  // for one that sends or receives, whose copy is in functions_ by index.
  std::vector<std::string> encoded_;
  program::Program functions_;
  std::vector<std::vector<std::pair<program::SendRecv *, int>>> peers_;
};

} // namespace cleave::runtime

#endif // CLEAVE_RUNTIME_PROGRAMSPLICE_H
