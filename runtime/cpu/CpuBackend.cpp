//===- CpuBackend.cpp - host memory and the CPU kernels as a Backend ------===//
//
// Arenas are anonymous mappings: zero-filled, and only the pages touched
// count towards the process's RSS. Every call runs at once on the calling
// thread (the kernels use OpenMP inside), so upload, download and copy are
// memmoves and synchronize has nothing to wait for.
//
// `cpu-staged` is the same backend with memory the runtime may not touch:
// its arenas are mapped PROT_NONE except for the pages of a call's operands
// while that call runs, so any access by the runtime that bypasses
// upload/download faults, and so does a kernel reading past its operands. The
// runtime treats it as a GPU whose ranks share the device (hostMemory() is
// false, no deviceCommunication(): MPI on host copies). It checks the
// runtime's device path, bit for bit against `cpu`, where there is no GPU.
//
//===----------------------------------------------------------------------===//

#include "runtime/Backend.h"
#include "runtime/cpu/Kernels.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <map>
#include <vector>

using namespace cleave::runtime;

namespace {

class CpuBackend : public Backend {
public:
  ~CpuBackend() override {
    for (auto &[base, mapping] : mappings_)
      munmap(mapping.first, mapping.second);
  }
  const char *name() const override { return "cpu"; }
  bool hostMemory() const override { return true; }

  /// MemAvailable from /proc/meminfo.
  uint64_t availableBytes() const override {
    FILE *f = std::fopen("/proc/meminfo", "r");
    if (!f)
      return 0;
    char line[256];
    unsigned long long kib = 0;
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
        break;
    std::fclose(f);
    return uint64_t(kib) * 1024;
  }

  std::string memoryName() const override { return "this machine"; }

  Status allocate(uint64_t bytes, uint64_t alignment, void *&base) override {
    long page = sysconf(_SC_PAGESIZE);
    alignment = std::max<uint64_t>(alignment, 64);
    uint64_t extra = alignment > uint64_t(page) ? alignment : 0;
    size_t length = std::max<uint64_t>(bytes, 64) + extra;
    // Reserved lazily (MAP_NORESERVE): the executor checks the plan against
    // availableBytes() first.
    void *mapping = mmap(nullptr, length, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mapping == MAP_FAILED)
      return Status::error("cannot allocate " + std::to_string(bytes) +
                           " bytes: " + std::strerror(errno));
    uintptr_t p = reinterpret_cast<uintptr_t>(mapping);
    p = (p + alignment - 1) & ~uintptr_t(alignment - 1);
    base = reinterpret_cast<void *>(p);
    mappings_[base] = {mapping, length};
    return Status::ok();
  }

  void release(void *base) override {
    auto it = mappings_.find(base);
    if (it == mappings_.end())
      return;
    munmap(it->second.first, it->second.second);
    mappings_.erase(it);
  }

  Status upload(void *to, const void *from, size_t bytes) override {
    if (to != from)
      std::memmove(to, from, bytes);
    return Status::ok();
  }
  Status download(void *to, const void *from, size_t bytes) override {
    return upload(to, from, bytes);
  }
  Status zero(void *to, size_t bytes) override {
    std::memset(to, 0, bytes);
    return Status::ok();
  }
  Status copy(void *to, const void *from, size_t bytes) override {
    return upload(to, from, bytes);
  }
  Status runKernel(const std::string &op, const Attributes &attributes,
                   const std::vector<TensorRef> &inputs,
                   const std::vector<TensorRef> &outputs) override {
    return runCpuKernel(op, attributes, inputs, outputs);
  }

  Status anyNonFinite(const std::vector<TensorRef> &tensors,
                      bool &found) override {
    uint64_t bad = 0;
    for (const TensorRef &t : tensors) {
      const float *g = t.as<float>();
      int64_t n = t.numElements();
#pragma omp parallel for reduction(| : bad) schedule(static)
      for (int64_t i = 0; i < n; ++i)
        bad |= !std::isfinite(g[i]);
    }
    found = bad != 0;
    return Status::ok();
  }

  Status scale(const std::vector<TensorRef> &tensors, float factor) override {
    for (const TensorRef &t : tensors) {
      float *g = t.as<float>();
      int64_t n = t.numElements();
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i)
        g[i] *= factor;
    }
    return Status::ok();
  }

  Status synchronize() override { return Status::ok(); }

protected:
  // Aligned base -> (mapping, length).
  std::map<void *, std::pair<void *, size_t>> mappings_;
};

class StagedCpuBackend final : public CpuBackend {
public:
  const char *name() const override { return "cpu-staged"; }
  bool hostMemory() const override { return false; }

  Status allocate(uint64_t bytes, uint64_t alignment, void *&base) override {
    CLEAVE_CHECK(CpuBackend::allocate(bytes, alignment, base));
    return protect(mappings_[base], PROT_NONE);
  }

  Status upload(void *to, const void *from, size_t bytes) override {
    Open open(*this, {{to, bytes}});
    CLEAVE_CHECK(open.status);
    return CpuBackend::upload(to, from, bytes);
  }
  Status download(void *to, const void *from, size_t bytes) override {
    Open open(*this, {{from, bytes}});
    CLEAVE_CHECK(open.status);
    return CpuBackend::download(to, from, bytes);
  }
  Status zero(void *to, size_t bytes) override {
    Open open(*this, {{to, bytes}});
    CLEAVE_CHECK(open.status);
    return CpuBackend::zero(to, bytes);
  }
  Status copy(void *to, const void *from, size_t bytes) override {
    Open open(*this, {{to, bytes}, {from, bytes}});
    CLEAVE_CHECK(open.status);
    return CpuBackend::copy(to, from, bytes);
  }
  Status runKernel(const std::string &op, const Attributes &attributes,
                   const std::vector<TensorRef> &inputs,
                   const std::vector<TensorRef> &outputs) override {
    Open open(*this, ranges({&inputs, &outputs}));
    CLEAVE_CHECK(open.status);
    return CpuBackend::runKernel(op, attributes, inputs, outputs);
  }
  Status anyNonFinite(const std::vector<TensorRef> &tensors,
                      bool &found) override {
    Open open(*this, ranges({&tensors}));
    CLEAVE_CHECK(open.status);
    return CpuBackend::anyNonFinite(tensors, found);
  }
  Status scale(const std::vector<TensorRef> &tensors, float factor) override {
    Open open(*this, ranges({&tensors}));
    CLEAVE_CHECK(open.status);
    return CpuBackend::scale(tensors, factor);
  }

private:
  using Range = std::pair<const void *, size_t>;

  static std::vector<Range>
  ranges(std::initializer_list<const std::vector<TensorRef> *> lists) {
    std::vector<Range> out;
    for (const std::vector<TensorRef> *list : lists)
      for (const TensorRef &t : *list)
        if (t.data)
          out.push_back({t.data, t.sizeBytes()});
    return out;
  }

  /// Opens the pages of a call's operands that lie in this backend's
  /// arenas, for the duration of the call. Opening only the operands (not
  /// every arena) keeps a call's cost proportional to the bytes it touches,
  /// so a 20 GiB arena costs what a 2 GiB one does; and a kernel that reads
  /// outside its operands faults here as the runtime would. Pointers
  /// outside the arenas (upload's host side) are left alone.
  struct Open {
    std::vector<std::pair<void *, size_t>> opened;
    Status status = Status::ok();
    Open(const StagedCpuBackend &backend, const std::vector<Range> &operands) {
      static const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
      for (const auto &[pointer, bytes] : operands) {
        if (!status || bytes == 0)
          continue;
        uintptr_t first = reinterpret_cast<uintptr_t>(pointer);
        if (!backend.inArena(first, bytes))
          continue;
        uintptr_t begin = first & ~(page - 1);
        uintptr_t end = (first + bytes + page - 1) & ~(page - 1);
        std::pair<void *, size_t> span{reinterpret_cast<void *>(begin),
                                       size_t(end - begin)};
        status = protect(span, PROT_READ | PROT_WRITE);
        if (status)
          opened.push_back(span);
      }
    }
    ~Open() {
      for (const auto &span : opened)
        (void)protect(span, PROT_NONE);
    }
  };

  bool inArena(uintptr_t first, size_t bytes) const {
    for (const auto &[base, mapping] : mappings_) {
      uintptr_t begin = reinterpret_cast<uintptr_t>(mapping.first);
      if (first >= begin && first + bytes <= begin + mapping.second)
        return true;
    }
    return false;
  }

  static Status protect(const std::pair<void *, size_t> &mapping, int prot) {
    if (mprotect(mapping.first, mapping.second, prot) != 0)
      return Status::error(std::string("cpu-staged: mprotect failed: ") +
                           std::strerror(errno));
    return Status::ok();
  }
};

} // namespace

std::unique_ptr<Backend> cleave::runtime::makeCpuBackend() {
  return std::make_unique<CpuBackend>();
}

std::unique_ptr<Backend> cleave::runtime::makeStagedCpuBackend() {
  return std::make_unique<StagedCpuBackend>();
}
