//===- ProgramEncoding.h - IR values in the runtime's words ----*- C++ -*-===//
//
// How the emitter spells MLIR in runtime/program.proto: element types,
// the bytes of constants and parameters, op attributes and function kinds,
// and the deterministic write of a program file. Included only by the
// emitter's files (it pulls in the generated protobuf header).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PASSES_PROGRAMENCODING_H
#define CLEAVE_PASSES_PROGRAMENCODING_H

#include "program.pb.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <string>

namespace mlir::cleave {

namespace pb = ::cleave::program;

/// `program`'s bytes with deterministic serialization: protobuf writes a
/// map (an instruction's attributes) in hash order otherwise, so two
/// identical compiles gave different bytes.
bool serializeProgram(const pb::Program &program, std::string &bytes);

/// The runtime's element type of `element`; an error at `where` if it has
/// none.
FailureOr<pb::DType> dtypeOf(Type element, Operation *where);

/// The bytes of a constant or parameter value as the runtime stores them:
/// row-major, little-endian, i1 as one byte per element.
FailureOr<std::string> bytesOf(ElementsAttr value, Operation *where);

/// An op attribute as the runtime's Attribute; failure for a kind the
/// runtime cannot read.
LogicalResult convertAttribute(Attribute attr, pb::Attribute &out);

/// The integer `key` of `dict`, 0 when absent.
int64_t intFrom(DictionaryAttr dict, StringRef key);

/// A function's role from its `cleave.kind` (forward when it has none).
pb::FunctionKind kindOf(func::FuncOp func);

} // namespace mlir::cleave

#endif // CLEAVE_PASSES_PROGRAMENCODING_H
