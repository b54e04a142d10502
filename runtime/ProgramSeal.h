//===- ProgramSeal.h - checksum and compile fingerprint of programs -*- C++ -*-===//
//
// The emitter seals each rank-<r>.pb it writes: after the program's bytes
// come two more fields of Program (program.proto), appended by hand so they
// are the file's last bytes whatever fields come before:
//
//   compile_fingerprint (50) = SHA-256 of every rank's unsealed program,
//                              the same in all programs of one compile;
//   sha256 (51)              = SHA-256 of all the file's bytes before it.
//
// The result is an ordinary serialized Program (protobuf takes fields in
// any order). The loader checks the checksum before it validates anything
// (a changed byte is an error naming the file, not a wrong run), and
// cleave-run compares the ranks' fingerprints before the first step (rank
// files of two compiles never run together). No MPI, no MLIR: the compiler
// and the runtime both link it.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_PROGRAMSEAL_H
#define CLEAVE_RUNTIME_PROGRAMSEAL_H

#include "runtime/Sha256.h"
#include "runtime/Status.h"

#include <string>
#include <vector>

namespace cleave::runtime {

/// The SHA-256 of `bytes`, 64 lowercase hex digits.
std::string sha256Hex(const std::string &bytes);

/// The fingerprint of a compile whose ranks' unsealed programs are
/// `programs`, in rank order: the SHA-256 of their SHA-256s.
std::string compileFingerprint(const std::vector<std::string> &programs);

/// `program` (a serialized Program without fields 50 and 51) followed by
/// compile_fingerprint = `fingerprint` and sha256.
std::string sealProgram(const std::string &program,
                        const std::string &fingerprint);

/// What sealProgram appends to a program, from a hasher that has read the
/// program's bytes and nothing else: sealProgram(p, f) is p followed by
/// sealTrailer(hasher of p, f). Lets the emitter write a program as soon as
/// it is made and seal it once the fingerprint of all is known, hashing its
/// bytes once and keeping none of them.
std::string sealTrailer(Sha256 hasher, const std::string &fingerprint);

/// The fingerprint of a compile from its ranks' programs' SHA-256s (hex, in
/// rank order): compileFingerprint(programs) without the programs.
std::string compileFingerprintOfDigests(const std::vector<std::string> &digests);

/// Checks the seal of a program file's bytes (`name` for messages): the
/// file must end with its sha256 field, which must hold the SHA-256 of the
/// bytes before it.
Status checkProgramSeal(const std::string &bytes, const std::string &name);

} // namespace cleave::runtime

#endif // CLEAVE_RUNTIME_PROGRAMSEAL_H
