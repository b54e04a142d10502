//===- Device.cpp - CUDA devices and the dispatch of the CUDA kernels -----===//
//
// Device discovery and selection, and the table from op name to CUDA
// kernel. The checks common to every op (operand and result counts,
// required operands present, element types defined) are the CPU backend's
// checkKernelOperands, so each kernel only checks what is particular to its
// op. A kernel that keeps state between calls (matmul's cuBLASLt plans) has
// a second entry point, called when the caller passes its CudaContext.
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/KernelArgs.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/CudaKernels.h"

#include <algorithm>

using namespace cleave::runtime;

namespace {

struct KernelEntry {
  const char *name;
  cuda::KernelFn fn;
  /// The op's kernel when runCudaKernel is given a CudaContext, if it keeps
  /// state there.
  cuda::ContextKernelFn inContext = nullptr;
};

// Sorted by name (cudaKernelOps lists them in this order). The operand
// counts are runtime/ops/OpTable.cpp's (checkKernelOperands).
const KernelEntry kKernels[] = {
    {"abs", cuda::absKernel},
    {"accumulate_grad", cuda::accumulateGradKernel},
    {"adamw", cuda::adamwKernel},
    {"add", cuda::addKernel},
    {"and", cuda::andKernel},
    {"attention", cuda::attentionKernel},
    {"attention_grad", cuda::attentionGradKernel},
    {"broadcast_to", cuda::broadcastToKernel},
    {"cast", cuda::castKernel},
    {"concat", cuda::concatKernel},
    {"cos", cuda::cosKernel},
    {"cumsum", cuda::cumsumKernel},
    {"div", cuda::divKernel},
    {"dropout", cuda::dropoutKernel},
    {"embedding", cuda::embeddingKernel},
    {"embedding_grad", cuda::embeddingGradKernel},
    {"equal", cuda::equalKernel},
    {"erf", cuda::erfKernel},
    {"exp", cuda::expKernel},
    {"gather", cuda::gatherKernel},
    {"gather_elements", cuda::gatherElementsKernel},
    {"gather_elements_grad", cuda::gatherElementsGradKernel},
    {"gather_grad", cuda::gatherGradKernel},
    {"gather_nd", cuda::gatherNdKernel},
    {"gelu", cuda::geluKernel},
    {"gelu_grad", cuda::geluGradKernel},
    {"greater", cuda::greaterKernel},
    {"greater_equal", cuda::greaterEqualKernel},
    {"layer_norm", cuda::layerNormKernel},
    {"layer_norm_grad", cuda::layerNormGradKernel},
    {"less", cuda::lessKernel},
    {"less_equal", cuda::lessEqualKernel},
    {"log", cuda::logKernel},
    {"log_softmax", cuda::logSoftmaxKernel},
    {"log_softmax_grad", cuda::logSoftmaxGradKernel},
    {"matmul", cuda::matmulKernel, cuda::matmulKernelInContext},
    {"max", cuda::maxKernel},
    {"min", cuda::minKernel},
    {"mul", cuda::mulKernel},
    {"neg", cuda::negKernel},
    {"nll_loss", cuda::nllLossKernel},
    {"nll_loss_grad", cuda::nllLossGradKernel},
    {"not", cuda::notKernel},
    {"or", cuda::orKernel},
    {"pow", cuda::powKernel},
    {"reciprocal", cuda::reciprocalKernel},
    {"reduce_max", cuda::reduceMaxKernel},
    {"reduce_mean", cuda::reduceMeanKernel},
    {"reduce_min", cuda::reduceMinKernel},
    {"reduce_sum", cuda::reduceSumKernel},
    {"relu", cuda::reluKernel},
    {"reshape", cuda::reshapeKernel},
    {"rms_norm", cuda::rmsNormKernel},
    {"rms_norm_grad", cuda::rmsNormGradKernel},
    {"rotary", cuda::rotaryKernel},
    {"rsqrt", cuda::rsqrtKernel},
    {"scatter_nd", cuda::scatterNdKernel},
    {"select", cuda::selectKernel},
    {"sgd", cuda::sgdKernel},
    {"sigmoid", cuda::sigmoidKernel},
    {"silu", cuda::siluKernel},
    {"silu_grad", cuda::siluGradKernel},
    {"sin", cuda::sinKernel},
    {"slice", cuda::sliceKernel},
    {"slice_grad", cuda::sliceGradKernel},
    {"softmax", cuda::softmaxKernel},
    {"softmax_cross_entropy", cuda::softmaxCrossEntropyKernel},
    {"softmax_cross_entropy_fused", cuda::softmaxCrossEntropyFusedKernel},
    {"softmax_cross_entropy_grad", cuda::softmaxCrossEntropyGradKernel},
    {"softmax_grad", cuda::softmaxGradKernel},
    {"sqrt", cuda::sqrtKernel},
    {"sub", cuda::subKernel},
    {"sum_squares", cuda::sumSquaresKernel},
    {"tanh", cuda::tanhKernel},
    {"transpose", cuda::transposeKernel},
};

const KernelEntry *findKernel(const std::string &op) {
  auto it = std::lower_bound(std::begin(kKernels), std::end(kKernels), op,
                             [](const KernelEntry &e, const std::string &name) {
                               return name > e.name;
                             });
  if (it == std::end(kKernels) || op != it->name)
    return nullptr;
  return it;
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
                                      cudaStream_t stream,
                                      CudaContext *context) {
  const KernelEntry *entry = findKernel(op);
  if (!entry)
    return Status::error(op +
                         ": no CUDA kernel for this op yet; the CUDA "
                         "backend implements " +
                         implementedOps());
  CLEAVE_CHECK(checkKernelOperands(op, inputs, outputs));
  ops::KernelArgs args{op, attributes, inputs, outputs};
  Status status = context && entry->inContext
                      ? entry->inContext(args, stream, *context)
                      : entry->fn(args, stream);
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
