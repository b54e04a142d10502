//===- Kernels.cpp - dispatch of the CPU kernels: op name to function -----===//
//
// The table says how many operands and results each op takes; the checks
// common to all ops (operand and result counts, required operands present)
// happen here so each kernel only checks what is particular to its op.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/KernelTable.h"

#include <algorithm>

using namespace cleave::runtime;
using namespace cleave::runtime::cpu;

namespace {

struct KernelEntry {
  const char *name;
  KernelFn fn;
  int minInputs, maxInputs; // maxInputs -1: any number
  int outputs = 1; // -1: the kernel checks
};

constexpr int kAny = -1;

// Sorted by name (cpuKernelOps lists them in this order).
const KernelEntry kKernels[] = {
    {"abs", absKernel, 1, 1},
    {"accumulate_grad", accumulateGradKernel, 1, 1},
    {"adamw", adamwKernel, 2, 3, 3},
    {"add", addKernel, 2, 2},
    {"and", andKernel, 2, 2},
    {"attention", attentionKernel, 3, 4},
    {"attention_grad", attentionGradKernel, 4, 5, 3},
    {"broadcast_to", broadcastToKernel, 1, 1},
    {"cast", castKernel, 1, 1},
    {"concat", concatKernel, 1, kAny},
    {"cos", cosKernel, 1, 1},
    {"cumsum", cumsumKernel, 1, 1},
    {"div", divKernel, 2, 2},
    {"embedding", embeddingKernel, 2, 2},
    {"embedding_grad", embeddingGradKernel, 2, 2},
    {"equal", equalKernel, 2, 2},
    {"erf", erfKernel, 1, 1},
    {"exp", expKernel, 1, 1},
    {"gather", gatherKernel, 2, 2},
    {"gather_elements", gatherElementsKernel, 2, 2},
    {"gather_elements_grad", gatherElementsGradKernel, 2, 2},
    {"gather_grad", gatherGradKernel, 2, 2},
    {"gather_nd", gatherNdKernel, 2, 2},
    {"gelu", geluKernel, 1, 1},
    {"gelu_grad", geluGradKernel, 2, 2},
    {"greater", greaterKernel, 2, 2},
    {"greater_equal", greaterEqualKernel, 2, 2},
    {"layer_norm", layerNormKernel, 1, 3},
    {"layer_norm_grad", layerNormGradKernel, 2, 3, 3},
    {"less", lessKernel, 2, 2},
    {"less_equal", lessEqualKernel, 2, 2},
    {"log", logKernel, 1, 1},
    {"log_softmax", logSoftmaxKernel, 1, 1},
    {"log_softmax_grad", logSoftmaxGradKernel, 2, 2},
    {"matmul", matmulKernel, 2, 2},
    {"max", maxKernel, 2, 2},
    {"min", minKernel, 2, 2},
    {"mul", mulKernel, 2, 2},
    {"neg", negKernel, 1, 1},
    {"nll_loss", nllLossKernel, 2, 2},
    {"nll_loss_grad", nllLossGradKernel, 2, 2},
    {"not", notKernel, 1, 1},
    {"or", orKernel, 2, 2},
    {"pow", powKernel, 2, 2},
    {"reciprocal", reciprocalKernel, 1, 1},
    {"reduce_max", reduceMaxKernel, 1, 1},
    {"reduce_mean", reduceMeanKernel, 1, 1},
    {"reduce_min", reduceMinKernel, 1, 1},
    {"reduce_sum", reduceSumKernel, 1, 1},
    {"relu", reluKernel, 1, 1},
    {"reshape", reshapeKernel, 1, 1},
    {"rms_norm", rmsNormKernel, 2, 2},
    {"rms_norm_grad", rmsNormGradKernel, 3, 3, 2},
    {"rotary", rotaryKernel, 3, 3},
    {"rsqrt", rsqrtKernel, 1, 1},
    {"scatter_nd", scatterNdKernel, 3, 3},
    {"select", selectKernel, 3, 3},
    {"sgd", sgdKernel, 2, 3, kAny}, // 1 or 2: with momentum, its buffer
    {"sigmoid", sigmoidKernel, 1, 1},
    {"silu", siluKernel, 1, 1},
    {"silu_grad", siluGradKernel, 2, 2},
    {"sin", sinKernel, 1, 1},
    {"slice", sliceKernel, 1, 1},
    {"slice_grad", sliceGradKernel, 1, 1},
    {"softmax", softmaxKernel, 1, 1},
    {"softmax_cross_entropy", softmaxCrossEntropyKernel, 2, 2},
    {"softmax_cross_entropy_fused", softmaxCrossEntropyFusedKernel, 3, 3, 2},
    {"softmax_cross_entropy_grad", softmaxCrossEntropyGradKernel, 3, 3},
    {"softmax_grad", softmaxGradKernel, 2, 2},
    {"sqrt", sqrtKernel, 1, 1},
    {"sub", subKernel, 2, 2},
    {"sum_squares", sumSquaresKernel, 1, kAny},
    {"tanh", tanhKernel, 1, 1},
    {"transpose", transposeKernel, 1, 1},
};

/// Operands the op may omit (given as a TensorRef with null data).
bool isOptionalOperand(const std::string &op, size_t index) {
  if (op == "layer_norm")
    return index >= 1;
  if (op == "attention")
    return index == 3;
  if (op == "layer_norm_grad")
    return index == 2;
  if (op == "attention_grad")
    return index == 4;
  if (op == "adamw" || op == "sgd")
    return index == 2; // sum_squares, without clipping
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

} // namespace

Status cleave::runtime::checkKernelOperands(
    const std::string &op, const std::vector<TensorRef> &inputs,
    const std::vector<TensorRef> &outputs) {
  const KernelEntry *entry = findKernel(op);
  if (!entry)
    return Status::error(op + ": no kernel for this op");
  int count = int(inputs.size());
  if (count < entry->minInputs ||
      (entry->maxInputs != kAny && count > entry->maxInputs)) {
    std::string expected =
        entry->maxInputs == entry->minInputs
            ? plural(entry->minInputs, "operand")
        : entry->maxInputs == kAny
            ? "at least " + plural(entry->minInputs, "operand")
            : std::to_string(entry->minInputs) + " to " +
                  plural(entry->maxInputs, "operand");
    return Status::error(op + ": got " + plural(count, "operand") +
                         ", expected " + expected);
  }
  if (entry->outputs != kAny && int(outputs.size()) != entry->outputs)
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
  return Status::ok();
}

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
