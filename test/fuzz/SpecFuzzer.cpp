//===- SpecFuzzer.cpp - libFuzzer harness for the spec parser -------------===//
//
// Feeds arbitrary bytes to cleave::parseSpec, as the spec file and as
// `--set KEY=VALUE` overrides (the pieces after the first NUL byte, one per
// NUL), then runs what cleave-compile derives from an accepted spec: the
// microbatch size for a dynamic and a static export, and the program-size
// rule. A clear error is the expected answer to a bad input; a crash, a
// sanitizer report, a hang or runaway memory is a finding.
//
//===----------------------------------------------------------------------===//

#include "frontend/Spec.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef input(reinterpret_cast<const char *>(data), size);
  auto [text, rest] = input.split('\0');
  std::vector<std::string> overrides;
  while (!rest.empty()) {
    auto [item, tail] = rest.split('\0');
    overrides.push_back(item.str());
    rest = tail;
  }
  llvm::Expected<cleave::Spec> spec =
      cleave::parseSpec(text, "fuzz.json", overrides);
  if (!spec) {
    // Formatting the message is part of what is tested.
    std::string message = llvm::toString(spec.takeError());
    return message.empty() ? -1 : 0;
  }
  for (std::optional<int64_t> exported :
       {std::optional<int64_t>(), std::optional<int64_t>(2),
        std::optional<int64_t>(int64_t(1) << 40)}) {
    llvm::Expected<int64_t> batch = cleave::microbatchSize(*spec, exported);
    if (!batch)
      llvm::consumeError(batch.takeError());
  }
  cleave::HostLimits limits;
  limits.freeDiskBytes = uint64_t(1) << 40;
  limits.memoryBytes = uint64_t(1) << 36;
  limits.scheduleEntryBytes = 40;
  llvm::consumeError(cleave::checkProgramsFit(*spec, limits, "out"));
  return 0;
}
