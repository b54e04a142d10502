//===- Backend.cpp - the backends this build has, by name -----------------===//

#include "runtime/Backend.h"

#ifdef CLEAVE_HAVE_CUDA
#include "runtime/cuda/CudaBackend.h"
#endif

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

using namespace cleave::runtime;

Status Backend::allocateHost(uint64_t bytes, uint64_t alignment, void *&base) {
  alignment = std::max<uint64_t>(alignment, 64);
  size_t size = std::max<uint64_t>(bytes, 64);
  base = nullptr;
  if (int error = posix_memalign(&base, alignment, size))
    return Status::error("cannot allocate " + std::to_string(bytes) +
                         " bytes of host memory: " + std::strerror(error));
  // Huge pages where the kernel gives them on request (transparent huge
  // pages in "madvise" mode): a large buffer's first touch faults once per
  // 2 MiB, not once per 4 KiB. Advice only: its failure changes nothing.
  const uint64_t huge = uint64_t(2) << 20;
  if (alignment % huge == 0 && size >= huge)
    madvise(base, size & ~(huge - 1), MADV_HUGEPAGE);
  std::memset(base, 0, size);
  return Status::ok();
}

void Backend::releaseHost(void *base) { std::free(base); }

const std::vector<std::string> &cleave::runtime::backendNames() {
  static const std::vector<std::string> names = {"cpu", "cpu-staged", "cuda"};
  return names;
}

std::vector<std::string> cleave::runtime::describeBackends() {
  std::vector<std::string> lines = {"cpu", "cpu-staged"};
#ifdef CLEAVE_HAVE_CUDA
  std::vector<std::string> gpus;
  Status status = cudaDeviceNames(gpus);
  std::string line = "cuda";
  if (!status)
    line += " (no device: " + status.message() + ")";
  else if (gpus.empty())
    line += " (no device)";
  for (size_t i = 0; i < gpus.size(); ++i)
    line +=
        (i ? ", GPU " : ": GPU ") + std::to_string(i) + " (" + gpus[i] + ")";
  lines.push_back(line);
#else
  lines.push_back("cuda (not built: nvcc was not found at configure time)");
#endif
  return lines;
}

Status cleave::runtime::makeBackend(const std::string &name, int localRank,
                                    int ranksOnNode,
                                    std::unique_ptr<Backend> &backend) {
  if (name == "cpu" || name.empty()) {
    backend = makeCpuBackend();
    return Status::ok();
  }
  if (name == "cpu-staged") {
    backend = makeStagedCpuBackend();
    return Status::ok();
  }
  if (name == "cuda") {
#ifdef CLEAVE_HAVE_CUDA
    return makeCudaBackend(localRank, ranksOnNode, backend);
#else
    return Status::error("device 'cuda': this cleave-run was built without "
                         "the CUDA backend (nvcc was not found when it was "
                         "configured); rebuild with the CUDA toolkit, or run "
                         "with --device cpu");
#endif
  }
  std::string known;
  for (const std::string &n : backendNames())
    known += (known.empty() ? "" : ", ") + n;
  return Status::error("unknown device '" + name + "'; the devices are " +
                       known);
}
