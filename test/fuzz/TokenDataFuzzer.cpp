//===- TokenDataFuzzer.cpp - libFuzzer harness for token files ------------===//
//
// Feeds arbitrary bytes to cleave::runtime::TokenData::read as the token
// file of `cleave-run --data`, then takes batches from what it accepts as
// the executor does. The first four bytes choose the batch (sequence
// length 1 to 64, global batch 1 to 8, step 0 to 65535); the rest is the
// file. A clear error is the expected answer to a bad input; a crash, a
// sanitizer report, a hang or runaway memory is a finding.
//
//===----------------------------------------------------------------------===//

#include "runtime/TokenData.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

/// The token file's path, in a folder made once per process.
/// The temporary folder of this process, removed when it exits.
static char folderName[] = "/tmp/cleave-fuzz-XXXXXX";
static void removeFolder() {
  std::string file = std::string(folderName) + "/tokens.bin";
  ::unlink(file.c_str());
  ::rmdir(folderName);
}

static const std::string &tokenPath() {
  static const std::string path = [] {
    char *name = folderName;
    if (!::mkdtemp(name)) {
      std::perror("mkdtemp");
      std::abort();
    }
    std::atexit(removeFolder);
    return std::string(name) + "/tokens.bin";
  }();
  return path;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  namespace rt = cleave::runtime;
  if (size < 4)
    return 0;
  int64_t seqLen = 1 + data[0] % 64;
  int64_t batch = 1 + data[1] % 8;
  int64_t step = data[2] | int64_t(data[3]) << 8;
  data += 4;
  size -= 4;
  int fd = ::open(tokenPath().c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);
  if (fd < 0 || ::write(fd, data, size) != ssize_t(size)) {
    std::perror(tokenPath().c_str());
    std::abort();
  }
  ::close(fd);

  rt::TokenData tokens;
  rt::Status read = rt::TokenData::read(tokenPath(), tokens);
  if (!read)
    return read.message().empty() ? -1 : 0;
  rt::Status window = tokens.checkWindow(seqLen);
  if (!window)
    return window.message().empty() ? -1 : 0;
  // The whole global batch as i32 ids and u16 targets, then its second
  // half alone as i64 ids (a data-parallel rank's share).
  std::vector<int32_t> ids(size_t(batch * seqLen));
  std::vector<uint16_t> targets(size_t(batch * seqLen));
  rt::TensorRef idRef{ids.data(), {batch, seqLen}, rt::DType::I32};
  rt::TensorRef targetRef{targets.data(), {batch, seqLen}, rt::DType::U16};
  rt::Status filled =
      tokens.fill(step, batch, seqLen, 0, batch, idRef, targetRef);
  if (!filled)
    std::abort(); // shapes and types are right: it must succeed
  int64_t half = batch / 2, rest = batch - half;
  std::vector<int64_t> wide(size_t(rest * seqLen));
  rt::TensorRef wideRef{wide.data(), {rest, seqLen}, rt::DType::I64};
  if (!tokens.fill(step, batch, seqLen, half, rest, wideRef, rt::TensorRef()))
    std::abort();
  return 0;
}
