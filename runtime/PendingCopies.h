//===- PendingCopies.h - host copies in flight and the bytes they touch -*- C++ -*-===//
//
// An activation offload (device to host) and its fetch (host to device) run
// on a copy stream while the kernels go on. An offload still reads its
// device bytes until it is done, a fetch still writes its device bytes; a
// kernel needs to wait for such a copy only where it touches those bytes:
// it must not write bytes an offload reads, nor read or write bytes a fetch
// writes. This keeps the copies in flight by the device bytes they touch
// and names the ones an op must wait for. Plain C++17, no CUDA: the CUDA
// backend keeps one event per copy under the copy's token.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_PENDINGCOPIES_H
#define CLEAVE_RUNTIME_PENDINGCOPIES_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cleave::runtime {

/// Bytes [data, data + size) of device memory.
struct ByteSpan {
  const void *data = nullptr;
  size_t size = 0;
};

class PendingCopies {
public:
  /// What a copy in flight does to its device bytes.
  enum class Access { Reads, Writes };

  void add(ByteSpan device, Access access, int token) {
    if (device.data && device.size)
      copies_.push_back({begin(device), end(device), access, token});
  }

  /// Removes and returns the tokens of the copies that an op reading
  /// `reads` and writing `writes` must wait for: those writing bytes it
  /// reads or writes, and those reading bytes it writes.
  std::vector<int> due(const std::vector<ByteSpan> &reads,
                       const std::vector<ByteSpan> &writes) {
    std::vector<int> tokens;
    std::vector<Copy> kept;
    for (const Copy &c : copies_) {
      bool wait = touches(c, writes) ||
                  (c.access == Access::Writes && touches(c, reads));
      if (wait)
        tokens.push_back(c.token);
      else
        kept.push_back(c);
    }
    copies_.swap(kept);
    return tokens;
  }

  /// Removes and returns every token (before work that may touch any
  /// bytes, or once the copies are known to be done).
  std::vector<int> all() {
    std::vector<int> tokens;
    for (const Copy &c : copies_)
      tokens.push_back(c.token);
    copies_.clear();
    return tokens;
  }

  bool empty() const { return copies_.empty(); }

private:
  struct Copy {
    uintptr_t begin, end;
    Access access;
    int token;
  };
  static uintptr_t begin(ByteSpan s) {
    return reinterpret_cast<uintptr_t>(s.data);
  }
  static uintptr_t end(ByteSpan s) { return begin(s) + s.size; }
  static bool touches(const Copy &c, const std::vector<ByteSpan> &spans) {
    for (const ByteSpan &s : spans)
      if (s.data && s.size && begin(s) < c.end && c.begin < end(s))
        return true;
    return false;
  }

  std::vector<Copy> copies_;
};

} // namespace cleave::runtime

#endif // CLEAVE_RUNTIME_PENDINGCOPIES_H
