//===- CudaCheck.h - one check for CUDA, cuBLAS and NCCL calls -*- C++ -*-===//
//
// CLEAVE_CUDA_CHECK(call) runs a CUDA runtime, cuBLAS/cuBLASLt or NCCL call
// and, when it fails, returns from the enclosing function a Status naming the
// call, the file and line, the library's own error name and string, the host
// and the current device (nccl-tests' habit, STYLE.md rule 8). One macro for
// all three libraries: an overloaded cudaCallStatus() turns each library's
// status type into a Status. A kernel launch is checked with
// CLEAVE_CUDA_CHECK(cudaGetLastError()) right after it.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_CUDA_CUDACHECK_H
#define CLEAVE_RUNTIME_CUDA_CUDACHECK_H

#include "runtime/Status.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>
#include <unistd.h>

namespace cleave::runtime {

/// " at file:line (host H, device D)": where a failed call was made. Only
/// built on the error path.
inline std::string cudaCallSite(const char *file, int line) {
  char host[256] = "?";
  (void)gethostname(host, sizeof(host) - 1);
  host[sizeof(host) - 1] = '\0';
  int device = -1;
  std::string where = std::string(" at ") + file + ":" + std::to_string(line) +
                      " (host " + host;
  if (cudaGetDevice(&device) == cudaSuccess)
    where += ", device " + std::to_string(device);
  (void)cudaGetLastError(); // the query above must not leave an error behind
  return where + ")";
}

inline Status cudaCallStatus(cudaError_t result, const char *call,
                             const char *file, int line) {
  if (result == cudaSuccess)
    return Status::ok();
  // Without a driver the runtime says its version is "insufficient".
  bool noDevice =
      result == cudaErrorNoDevice || result == cudaErrorInsufficientDriver;
  return Status::error(
      std::string(call) + " failed: CUDA error " + std::to_string(int(result)) +
      " " + cudaGetErrorName(result) + " (" + cudaGetErrorString(result) + ")" +
      cudaCallSite(file, line) +
      (noDevice ? "; is there a GPU and an NVIDIA driver "
                  "on this host?"
                : ""));
}

inline Status cudaCallStatus(cublasStatus_t result, const char *call,
                             const char *file, int line) {
  if (result == CUBLAS_STATUS_SUCCESS)
    return Status::ok();
  return Status::error(
      std::string(call) + " failed: cuBLAS error " +
      std::to_string(int(result)) + " " + cublasLtGetStatusName(result) + " (" +
      cublasLtGetStatusString(result) + ")" + cudaCallSite(file, line));
}

inline Status cudaCallStatus(ncclResult_t result, const char *call,
                             const char *file, int line) {
  if (result == ncclSuccess)
    return Status::ok();
  return Status::error(
      std::string(call) + " failed: NCCL error " + std::to_string(int(result)) +
      " (" + ncclGetErrorString(result) + ")" + cudaCallSite(file, line));
}

} // namespace cleave::runtime

/// Returns an error Status from the enclosing function if `call` (a
/// cudaError_t, cublasStatus_t or ncclResult_t expression) failed.
#define CLEAVE_CUDA_CHECK(...)                                                 \
  do {                                                                         \
    ::cleave::runtime::Status cleave_cuda_status_ =                            \
        ::cleave::runtime::cudaCallStatus((__VA_ARGS__), #__VA_ARGS__,         \
                                          __FILE__, __LINE__);                 \
    if (!cleave_cuda_status_.isOk())                                           \
      return cleave_cuda_status_;                                              \
  } while (0)

#endif // CLEAVE_RUNTIME_CUDA_CUDACHECK_H
