//===- Device.cpp - CUDA devices and the dispatch of the CUDA kernels -----===//
//
// Device discovery and selection, and the table from op name to CUDA
// kernel. As in runtime/cpu/Kernels.cpp, the checks common to every op
// (operand and result counts, required operands present, element types
// defined) happen here, so each kernel only checks what is particular to its
// op; the messages are the CPU backend's.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelSupport.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/CudaKernels.h"

#include <algorithm>

using namespace cleave::runtime;

namespace {

struct KernelEntry {
  const char *name;
  cuda::KernelFn fn;
  int minInputs, maxInputs;
  int outputs = 1;
};

// Sorted by name (cudaKernelOps lists them in this order). The operand
// counts are those of runtime/cpu/Kernels.cpp.
const KernelEntry kKernels[] = {
    {"adamw", cuda::adamwKernel, 2, 3, 3},
    {"add", cuda::addKernel, 2, 2},
    {"attention", cuda::attentionKernel, 3, 4},
    {"cast", cuda::castKernel, 1, 1},
    {"div", cuda::divKernel, 2, 2},
    {"embedding", cuda::embeddingKernel, 2, 2},
    {"gelu", cuda::geluKernel, 1, 1},
    {"layer_norm", cuda::layerNormKernel, 1, 3},
    {"log_softmax", cuda::logSoftmaxKernel, 1, 1},
    {"matmul", cuda::matmulKernel, 2, 2},
    {"mul", cuda::mulKernel, 2, 2},
    {"rms_norm", cuda::rmsNormKernel, 2, 2},
    {"rotary", cuda::rotaryKernel, 3, 3},
    {"silu", cuda::siluKernel, 1, 1},
    {"softmax", cuda::softmaxKernel, 1, 1},
    {"softmax_cross_entropy", cuda::softmaxCrossEntropyKernel, 2, 2},
    {"sub", cuda::subKernel, 2, 2},
};

/// Operands the op may omit (given as a TensorRef with null data).
bool isOptionalOperand(const std::string &op, size_t index) {
  if (op == "layer_norm")
    return index >= 1;
  if (op == "adamw")
    return index == 2; // sum_squares, without clipping
  if (op == "attention")
    return index == 3; // the mask
  return false;
}

const KernelEntry *findKernel(const std::string &op) {
  auto it = std::lower_bound(std::begin(kKernels), std::end(kKernels), op,
                             [](const KernelEntry &e, const std::string &name) {
                               return name > e.name;
                             });
  if (it == std::end(kKernels) || op != it->name)
    return nullptr;
  return it;
}

std::string plural(int n, const char *what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

std::string implementedOps() {
  std::string list;
  for (const std::string &name : cudaKernelOps())
    list += (list.empty() ? "" : ", ") + name;
  return list;
}

} // namespace

int cleave::runtime::cudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError(); // no driver or no device: not an error here
    return 0;
  }
  return count;
}

Status cleave::runtime::selectCudaDevice(int localRank, int &device) {
  if (localRank < 0)
    return Status::error("selectCudaDevice: the local rank must not be "
                         "negative, got " +
                         std::to_string(localRank));
  int count = 0;
  cudaError_t result = cudaGetDeviceCount(&count);
  (void)cudaGetLastError();
  if (result != cudaSuccess)
    return Status::error(std::string("no CUDA device: cudaGetDeviceCount "
                                     "failed with ") +
                         cudaGetErrorName(result) + " (" +
                         cudaGetErrorString(result) +
                         "); is there a GPU and an NVIDIA driver on this "
                         "host?");
  if (count == 0)
    return Status::error("no CUDA device: cudaGetDeviceCount found none");
  device = localRank % count;
  CLEAVE_CUDA_CHECK(cudaSetDevice(device));
  return Status::ok();
}

Status cleave::runtime::runCudaKernel(const std::string &op,
                                      const Attributes &attributes,
                                      const std::vector<TensorRef> &inputs,
                                      const std::vector<TensorRef> &outputs,
                                      cudaStream_t stream) {
  const KernelEntry *entry = findKernel(op);
  if (!entry)
    return Status::error(op +
                         ": no CUDA kernel for this op yet; the CUDA "
                         "backend implements " +
                         implementedOps());
  int count = int(inputs.size());
  if (count < entry->minInputs || count > entry->maxInputs) {
    std::string expected = entry->maxInputs == entry->minInputs
                               ? plural(entry->minInputs, "operand")
                               : std::to_string(entry->minInputs) + " to " +
                                     plural(entry->maxInputs, "operand");
    return Status::error(op + ": got " + plural(count, "operand") +
                         ", expected " + expected);
  }
  if (int(outputs.size()) != entry->outputs)
    return Status::error(op + ": got " + plural(int(outputs.size()), "result") +
                         ", expected " + std::to_string(entry->outputs));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorRef &t = inputs[i];
    for (int64_t d : t.shape)
      if (d < 0)
        return Status::error(op + ": operand " + std::to_string(i) +
                             " has a negative dimension");
    if (!t.data && t.numElements() != 0 && !isOptionalOperand(op, i))
      return Status::error(op + ": operand " + std::to_string(i) +
                           " has no data");
    if (t.data && dtypeSize(t.dtype) == 0)
      return Status::error(op + ": operand " + std::to_string(i) +
                           " has an undefined element type");
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const TensorRef &out = outputs[i];
    std::string what =
        outputs.size() == 1 ? "the result" : "result " + std::to_string(i);
    for (int64_t d : out.shape)
      if (d < 0)
        return Status::error(op + ": " + what + " has a negative dimension");
    if (dtypeSize(out.dtype) == 0)
      return Status::error(op + ": " + what + " has an undefined element type");
    if (!out.data && out.numElements() != 0)
      return Status::error(op + ": " + what + " has no data");
  }
  Status status =
      entry->fn(cpu::KernelArgs{op, attributes, inputs, outputs}, stream);
  // A failed CUDA call's message names the call; say which op made it.
  if (!status.isOk() && status.message().compare(0, op.size() + 2, op + ": "))
    return Status::error(op + ": " + status.message());
  return status;
}

const std::vector<std::string> &cleave::runtime::cudaKernelOps() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> names;
    for (const KernelEntry &e : kKernels)
      names.push_back(e.name);
    return names;
  }();
  return ops;
}
