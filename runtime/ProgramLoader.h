//===- ProgramLoader.h - read and validate a per-rank program --*- C++ -*-===//
//
// cleave-run never runs a program it has not checked completely: every id,
// offset, size, shape and file range of a rank-<r>.pb is validated here, and
// an error names the file and the field ("rank-0.pb: functions[0].body[12]
// .kernel 'matmul': input 3 is tensor 999, but the program has 310
// tensors"). After loadProgram succeeds the executor may index without
// checking.
//
// Besides what the schema's comments say, the loader requires:
//  - `memory` present. It is the last field a serialized Program holds, so
//    its absence means a file cut at a field boundary;
//  - mesh degrees of at least 1 whose product is the world size, and groups
//    that hold this rank;
//  - buffer alignments that are powers of two;
//  - only CONSTANTS tensors carry data, each all of its bytes; no
//    instruction writes or frees a constant, none frees a parameter
//    (instructions may update parameters in place: the optimizer);
//  - every PARAMETERS tensor initialized by exactly one Parameter;
//  - TOKENS and TARGETS only among the inputs, LOSS only among the outputs.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_PROGRAMLOADER_H
#define CLEAVE_RUNTIME_PROGRAMLOADER_H

#include "runtime/Status.h"
#include "runtime/Tensor.h"

#include "program.pb.h"

#include <cstdint>
#include <string>

namespace cleave::runtime {

/// Reads, parses and validates `path`; FileData paths are resolved against
/// the folder of `path`. Every error starts with `path`. The file must carry
/// the checksum cleave-compile seals it with (ProgramSeal.h).
Status loadProgram(const std::string &path, program::Program &program);

/// Checks the bytes of every FileData that carries a SHA-256 (the initial
/// values in params.bin) against it: a mismatch names the file, the byte
/// range and the parameter. Reads each range once; `name` is the program's
/// path, `directory` its folder.
Status verifyParameterData(const program::Program &program,
                           const std::string &name,
                           const std::string &directory);

/// Parses the bytes of a program file (`name` is for messages): refuses
/// empty input, malformed or truncated protobuf (with the byte offset of
/// the bad field), a magic other than "cleave-program" and a version other
/// than VERSION_CURRENT, VERSION_PIECES or VERSION_SHARED (a header, which
/// loadProgram joins with its shared file). Does not validate the contents.
Status parseProgram(const std::string &bytes, const std::string &name,
                    program::Program &program);

/// Validates a parsed program; FileData paths are resolved against
/// `directory`, and the files must hold the ranges the program reads.
Status validateProgram(const program::Program &program,
                       const std::string &name, const std::string &directory);

/// A FileData path as the runtime opens it: relative paths are relative to
/// the program's folder.
std::string resolveProgramPath(const std::string &directory,
                               const std::string &path);

/// The folder of a file path ("." for a bare name).
std::string directoryOf(const std::string &path);

/// The samples of each microbatch this rank reads from the token file: the
/// microbatch, or its part (prescaled_batch false: batch.read_parts).
int64_t samplesRead(const program::Batch &batch);

/// Tensor geometry of a validated program.
DType tensorDType(const program::Tensor &tensor);
int64_t tensorElements(const program::Tensor &tensor);
uint64_t tensorBytes(const program::Tensor &tensor);

} // namespace cleave::runtime

#endif // CLEAVE_RUNTIME_PROGRAMLOADER_H
