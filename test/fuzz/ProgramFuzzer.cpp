//===- ProgramFuzzer.cpp - libFuzzer harness for the program loader -------===//
//
// Feeds arbitrary bytes to what cleave-run does with a rank-<r>.pb before it
// runs anything: cleave::runtime::parseProgram, then validateProgram. The
// program's folder is a temporary one holding a sparse 1 GiB `params.bin`
// (the name cleave-compile gives the parameter file), so that programs
// whose file data is in range get past the file check into the rest of the
// validation. A clear error is the expected answer to a bad input; a crash,
// a sanitizer report, a hang or runaway memory is a finding.
//
//===----------------------------------------------------------------------===//

#include "runtime/ProgramLoader.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <fcntl.h>
#include <unistd.h>

/// The program's folder, made once per process.
/// The temporary folder of this process, removed when it exits.
static char folderName[] = "/tmp/cleave-fuzz-XXXXXX";
static void removeFolder() {
  std::string file = std::string(folderName) + "/params.bin";
  ::unlink(file.c_str());
  ::rmdir(folderName);
}

static const std::string &programFolder() {
  static const std::string folder = [] {
    char *name = folderName;
    if (!::mkdtemp(name)) {
      std::perror("mkdtemp");
      std::abort();
    }
    std::atexit(removeFolder);
    std::string params = std::string(name) + "/params.bin";
    int fd = ::open(params.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);
    if (fd < 0 || ::ftruncate(fd, off_t(1) << 30) != 0) {
      std::perror(params.c_str());
      std::abort();
    }
    ::close(fd);
    return std::string(name);
  }();
  return folder;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  namespace rt = cleave::runtime;
  std::string bytes(reinterpret_cast<const char *>(data), size);
  cleave::program::Program program;
  rt::Status parsed = rt::parseProgram(bytes, "rank-0.pb", program);
  if (!parsed)
    return parsed.message().empty() ? -1 : 0;
  rt::Status valid =
      rt::validateProgram(program, "rank-0.pb", programFolder());
  if (!valid)
    return valid.message().empty() ? -1 : 0;
  // What the executor reads of a validated program without checking.
  uint64_t total = 0;
  for (const cleave::program::Tensor &tensor : program.tensors())
    total += rt::tensorBytes(tensor) + uint64_t(rt::tensorElements(tensor)) +
             uint64_t(rt::tensorDType(tensor));
  static volatile uint64_t sink;
  sink = total;
  return 0;
}
