//===- OnnxFuzzer.cpp - libFuzzer harness for the ONNX import -------------===//
//
// Feeds arbitrary bytes to cleave::importOnnxFile as the model file, as
// cleave-compile does (batch axis bound to 2), in a fresh MLIRContext per
// input, and prints an imported module as `--emit=mlir` would. The bytes
// are written to `model.onnx` in a temporary folder made once per process;
// external data the input names resolves in that folder (it holds only the
// model itself). A clear error (an MLIR diagnostic) is the expected answer
// to a bad input; a crash, a sanitizer report, a hang or runaway memory is
// a finding.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxImporter.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <fcntl.h>
#include <unistd.h>

/// The model's path, in a folder made once per process.
/// The temporary folder of this process, removed when it exits.
static char folderName[] = "/tmp/cleave-fuzz-XXXXXX";
static void removeFolder() {
  std::string file = std::string(folderName) + "/model.onnx";
  ::unlink(file.c_str());
  ::rmdir(folderName);
}

static const std::string &modelPath() {
  static const std::string path = [] {
    char *name = folderName;
    if (!::mkdtemp(name)) {
      std::perror("mkdtemp");
      std::abort();
    }
    std::atexit(removeFolder);
    return std::string(name) + "/model.onnx";
  }();
  return path;
}

static void writeModel(const uint8_t *data, size_t size) {
  int fd = ::open(modelPath().c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);
  if (fd < 0) {
    std::perror(modelPath().c_str());
    std::abort();
  }
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n <= 0) {
      std::perror(modelPath().c_str());
      std::abort();
    }
    data += n;
    size -= size_t(n);
  }
  ::close(fd);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  writeModel(data, size);
  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  size_t errors = 0;
  std::string messages;
  mlir::ScopedDiagnosticHandler handler(
      &context, [&](mlir::Diagnostic &diagnostic) {
        // Formatting the message is part of what is tested.
        messages = diagnostic.str();
        if (diagnostic.getSeverity() == mlir::DiagnosticSeverity::Error)
          ++errors;
        return mlir::success();
      });
  cleave::ImportOptions options;
  options.batchSize = 2;
  // Below libFuzzer's -rss_limit_mb / -malloc_limit_mb (2048 in ctest): a
  // constant the import refuses as too large is an answer, not a finding.
  options.foldLimitBytes = int64_t(256) << 20;
  auto module = cleave::importOnnxFile(modelPath(), context, options);
  if (mlir::failed(module)) {
    // A refused model says why.
    if (errors == 0 || messages.empty()) {
      std::fprintf(stderr, "the import failed without an error message\n");
      std::abort();
    }
    return 0;
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  (*module)->print(os);
  return 0;
}
