//===- CudaBackend.h - the CUDA backend of the executor --------*- C++ -*-===//
//
// Device memory, the kernels of CudaKernels.h on a compute stream, host
// copies on a copy stream (ordered with the compute stream by events), and
// NCCL communication when each rank of the node has a GPU of its own
// (NcclCommunication.h); ranks sharing a GPU communicate through MPI on host
// copies (the executor's staged path).
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_CUDA_CUDABACKEND_H
#define CLEAVE_RUNTIME_CUDA_CUDABACKEND_H

#include "runtime/Backend.h"

namespace cleave::runtime {

/// The names of the GPUs the driver shows; an error without a driver.
Status cudaDeviceNames(std::vector<std::string> &names);

/// See makeBackend in runtime/Backend.h.
Status makeCudaBackend(int localRank, int ranksOnNode,
                       std::unique_ptr<Backend> &backend);

} // namespace cleave::runtime

#endif // CLEAVE_RUNTIME_CUDA_CUDABACKEND_H
