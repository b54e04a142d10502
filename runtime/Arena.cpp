//===- Arena.cpp - the arenas of a program's buffers, one per space -------===//

#include "runtime/Arena.h"

#include <algorithm>
#include <cstdio>
#include <string>

using namespace cleave::runtime;
namespace pb = cleave::program;

Arena::~Arena() {
  for (void *base : blocks_)
    if (space_ == pb::HOST)
      backend_.releaseHost(base);
    else
      backend_.release(base);
}

Status Arena::allocate(uint64_t bytes, uint64_t alignment, void *&base) {
  base = nullptr;
  CLEAVE_CHECK(space_ == pb::HOST
                   ? backend_.allocateHost(bytes, alignment, base)
                   : backend_.allocate(bytes, alignment, base));
  blocks_.push_back(base);
  allocatedBytes_ += bytes;
  return Status::ok();
}

Arena &ProgramArenas::arena(pb::MemorySpace space) {
  size_t index = size_t(space);
  if (arenas_.size() <= index)
    arenas_.resize(index + 1);
  if (!arenas_[index])
    arenas_[index] = std::make_unique<Arena>(backend_, space);
  return *arenas_[index];
}

Status ProgramArenas::allocate(const pb::Program &program) {
  // A plan larger than the backend's memory would otherwise fail much
  // later (on the CPU, killed by the OOM killer while initializing
  // parameters). Refuse it up front, saying what it needs.
  // HOST buffers are the backend's memory only when it is host memory.
  uint64_t planned = 0;
  for (const pb::Buffer &buffer : program.buffers())
    if (buffer.space() == pb::DEVICE ||
        (buffer.space() == pb::HOST && backend_.hostMemory()))
      planned += buffer.size_bytes();
  uint64_t available = backend_.availableBytes();
  if (available && planned > available) {
    char text[320];
    std::snprintf(text, sizeof text,
                  "the program needs %.2f GiB of memory (its plan), but %s "
                  "has %.2f GiB available; compile for more ranks "
                  "(pipeline or tensor parallelism) or a smaller batch",
                  planned / 1073741824.0, backend_.memoryName().c_str(),
                  available / 1073741824.0);
    return Status::error(text);
  }
  for (int b = 0; b < program.buffers_size(); ++b) {
    const pb::Buffer &buffer = program.buffers(b);
    void *base = nullptr;
    Status status = arena(buffer.space())
                        .allocate(buffer.size_bytes(),
                                  std::max<uint64_t>(64, buffer.alignment()),
                                  base);
    if (!status)
      return Status::error("buffers[" + std::to_string(b) +
                           "]: " + status.message());
    bases_.push_back(base);
  }
  return Status::ok();
}
