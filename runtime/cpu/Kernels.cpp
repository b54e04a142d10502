//===- Kernels.cpp - dispatch of the CPU kernels: op name to function -----===//
//
// Each op's kernel function, by name. How many operands and results an op
// takes, and the checks common to all ops, are every backend's: they are in
// runtime/ops/OpTable.cpp (checkKernelOperands), which runCpuKernel calls
// first so each kernel only checks what is particular to its op.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/KernelTable.h"

#include <algorithm>
#include <iterator>

using namespace cleave::runtime;
using namespace cleave::runtime::cpu;
using namespace cleave::runtime::ops;

namespace {

struct KernelEntry {
  const char *name;
  KernelFn fn;
};

// Sorted by name (cpuKernelOps lists them in this order).
const KernelEntry kKernels[] = {
    {"abs", absKernel},
    {"accumulate_grad", accumulateGradKernel},
    {"adamw", adamwKernel},
    {"add", addKernel},
    {"and", andKernel},
    {"attention", attentionKernel},
    {"attention_grad", attentionGradKernel},
    {"broadcast_to", broadcastToKernel},
    {"cast", castKernel},
    {"concat", concatKernel},
    {"cos", cosKernel},
    {"cumsum", cumsumKernel},
    {"div", divKernel},
    {"dropout", dropoutKernel},
    {"embedding", embeddingKernel},
    {"embedding_grad", embeddingGradKernel},
    {"equal", equalKernel},
    {"erf", erfKernel},
    {"exp", expKernel},
    {"gather", gatherKernel},
    {"gather_elements", gatherElementsKernel},
    {"gather_elements_grad", gatherElementsGradKernel},
    {"gather_grad", gatherGradKernel},
    {"gather_nd", gatherNdKernel},
    {"gelu", geluKernel},
    {"gelu_grad", geluGradKernel},
    {"greater", greaterKernel},
    {"greater_equal", greaterEqualKernel},
    {"layer_norm", layerNormKernel},
    {"layer_norm_grad", layerNormGradKernel},
    {"less", lessKernel},
    {"less_equal", lessEqualKernel},
    {"log", logKernel},
    {"log_softmax", logSoftmaxKernel},
    {"log_softmax_grad", logSoftmaxGradKernel},
    {"matmul", matmulKernel},
    {"max", maxKernel},
    {"min", minKernel},
    {"mul", mulKernel},
    {"neg", negKernel},
    {"nll_loss", nllLossKernel},
    {"nll_loss_grad", nllLossGradKernel},
    {"not", notKernel},
    {"or", orKernel},
    {"pow", powKernel},
    {"reciprocal", reciprocalKernel},
    {"reduce_max", reduceMaxKernel},
    {"reduce_mean", reduceMeanKernel},
    {"reduce_min", reduceMinKernel},
    {"reduce_sum", reduceSumKernel},
    {"relu", reluKernel},
    {"reshape", reshapeKernel},
    {"rms_norm", rmsNormKernel},
    {"rms_norm_grad", rmsNormGradKernel},
    {"rotary", rotaryKernel},
    {"rsqrt", rsqrtKernel},
    {"scatter_nd", scatterNdKernel},
    {"select", selectKernel},
    {"sgd", sgdKernel},
    {"sigmoid", sigmoidKernel},
    {"silu", siluKernel},
    {"silu_grad", siluGradKernel},
    {"sin", sinKernel},
    {"slice", sliceKernel},
    {"slice_grad", sliceGradKernel},
    {"softmax", softmaxKernel},
    {"softmax_cross_entropy", softmaxCrossEntropyKernel},
    {"softmax_cross_entropy_fused", softmaxCrossEntropyFusedKernel},
    {"softmax_cross_entropy_grad", softmaxCrossEntropyGradKernel},
    {"softmax_grad", softmaxGradKernel},
    {"sqrt", sqrtKernel},
    {"sub", subKernel},
    {"sum_squares", sumSquaresKernel},
    {"tanh", tanhKernel},
    {"transpose", transposeKernel},
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

} // namespace

Status cleave::runtime::runCpuKernel(const std::string &op,
                                     const Attributes &attributes,
                                     const std::vector<TensorRef> &inputs,
                                     const std::vector<TensorRef> &outputs) {
  const KernelEntry *entry = findKernel(op);
  if (!entry)
    return Status::error(op + ": no CPU kernel for this op");
  CLEAVE_CHECK(checkKernelOperands(op, inputs, outputs));
  return entry->fn(KernelArgs{op, attributes, inputs, outputs});
}

const std::vector<std::string> &cleave::runtime::cpuKernelOps() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> names;
    for (const KernelEntry &e : kKernels)
      names.push_back(e.name);
    return names;
  }();
  return ops;
}
