//===- Arena.h - the arenas of a program, one per memory space -*- C++ -*-===//
//
// Every Buffer of a program (program.proto) is one zero-filled block of its
// memory space, aligned to at least 64 bytes (Executor.h). An Arena is the
// allocator of one memory space: it takes the blocks of that space's
// buffers from the backend and gives them back when it ends. ProgramArenas
// holds one Arena per MemorySpace and the base of every buffer.
//
// DEVICE buffers are the backend's memory; HOST buffers (offloaded
// activations) are host memory on every backend (Backend::allocateHost).
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_ARENA_H
#define CLEAVE_RUNTIME_ARENA_H

#include "runtime/Backend.h"
#include "runtime/Status.h"

#include "program.pb.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace cleave::runtime {

/// The allocator of one memory space: blocks from `backend`, released
/// (in the order they were taken) when the Arena ends.
class Arena {
public:
  Arena(Backend &backend, program::MemorySpace space)
      : backend_(backend), space_(space) {}
  Arena(const Arena &) = delete;
  Arena &operator=(const Arena &) = delete;
  ~Arena();

  /// A zero-filled block of `bytes` aligned to `alignment`.
  Status allocate(uint64_t bytes, uint64_t alignment, void *&base);
  program::MemorySpace space() const { return space_; }
  /// The bytes of all blocks taken.
  uint64_t allocatedBytes() const { return allocatedBytes_; }

private:
  Backend &backend_;
  program::MemorySpace space_;
  std::vector<void *> blocks_;
  uint64_t allocatedBytes_ = 0;
};

/// The arenas of one program: one per memory space, and every buffer's
/// block.
class ProgramArenas {
public:
  explicit ProgramArenas(Backend &backend) : backend_(backend) {}

  /// Allocates every buffer of `program`, in buffer order, in its space's
  /// arena. A plan larger than the backend's memory is refused up front,
  /// saying what it needs.
  Status allocate(const program::Program &program);
  /// The base of buffer `index` (after allocate()).
  void *base(int index) const { return bases_[index]; }

private:
  Arena &arena(program::MemorySpace space);

  Backend &backend_;
  std::vector<std::unique_ptr<Arena>> arenas_; // by MemorySpace
  std::vector<void *> bases_;                  // by buffer
};

} // namespace cleave::runtime

#endif // CLEAVE_RUNTIME_ARENA_H
