//===- OpTable.cpp - the ops every backend knows, and their operand counts ===//
//
// The table says how many operands and results each op takes; the checks
// common to all ops (operand and result counts, required operands present)
// happen here, for every backend, so each kernel only checks what is
// particular to its op and the CPU and CUDA backends refuse the same calls
// with the same words.
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/OpTable.h"

#include <algorithm>
#include <iterator>

using namespace cleave::runtime;

namespace {

struct OpEntry {
  const char *name;
  int minInputs, maxInputs; // maxInputs -1: any number
  int outputs = 1; // -1: the kernel checks
};

constexpr int kAny = -1;

// Sorted by name (tableOps lists them in this order).
const OpEntry kOps[] = {
    {"abs", 1, 1},
    {"accumulate_grad", 1, 1},
    {"adamw", 2, 3, 3},
    {"add", 2, 2},
    {"and", 2, 2},
    {"attention", 3, 4},
    {"attention_grad", 4, 5, 3},
    {"broadcast_to", 1, 1},
    {"cast", 1, 1},
    {"concat", 1, kAny},
    {"cos", 1, 1},
    {"cumsum", 1, 1},
    {"div", 2, 2},
    {"dropout", 1, 1},
    {"embedding", 2, 2},
    {"embedding_grad", 2, 2},
    {"equal", 2, 2},
    {"erf", 1, 1},
    {"exp", 1, 1},
    {"gather", 2, 2},
    {"gather_elements", 2, 2},
    {"gather_elements_grad", 2, 2},
    {"gather_grad", 2, 2},
    {"gather_nd", 2, 2},
    {"gelu", 1, 1},
    {"gelu_grad", 2, 2},
    {"greater", 2, 2},
    {"greater_equal", 2, 2},
    {"layer_norm", 1, 3},
    {"layer_norm_grad", 2, 3, 3},
    {"less", 2, 2},
    {"less_equal", 2, 2},
    {"log", 1, 1},
    {"log_softmax", 1, 1},
    {"log_softmax_grad", 2, 2},
    {"matmul", 2, 2},
    {"max", 2, 2},
    {"min", 2, 2},
    {"mul", 2, 2},
    {"neg", 1, 1},
    {"nll_loss", 2, 2},
    {"nll_loss_grad", 2, 2},
    {"not", 1, 1},
    {"or", 2, 2},
    {"pow", 2, 2},
    {"reciprocal", 1, 1},
    {"reduce_max", 1, 1},
    {"reduce_mean", 1, 1},
    {"reduce_min", 1, 1},
    {"reduce_sum", 1, 1},
    {"relu", 1, 1},
    {"reshape", 1, 1},
    {"rms_norm", 2, 2},
    {"rms_norm_grad", 3, 3, 2},
    {"rotary", 3, 3},
    {"rsqrt", 1, 1},
    {"scatter_nd", 3, 3},
    {"select", 3, 3},
    {"sgd", 2, 3, kAny}, // 1 or 2: with momentum, its buffer
    {"sigmoid", 1, 1},
    {"silu", 1, 1},
    {"silu_grad", 2, 2},
    {"sin", 1, 1},
    {"slice", 1, 1},
    {"slice_grad", 1, 1},
    {"softmax", 1, 1},
    {"softmax_cross_entropy", 2, 2},
    {"softmax_cross_entropy_fused", 3, 3, 2},
    {"softmax_cross_entropy_grad", 3, 3},
    {"softmax_grad", 2, 2},
    {"sqrt", 1, 1},
    {"sub", 2, 2},
    {"sum_squares", 1, kAny},
    {"tanh", 1, 1},
    {"transpose", 1, 1},
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

const OpEntry *findOp(const std::string &op) {
  auto it = std::lower_bound(std::begin(kOps), std::end(kOps), op,
                             [](const OpEntry &e, const std::string &name) {
                               return name > e.name;
                             });
  if (it == std::end(kOps) || op != it->name)
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
  const OpEntry *entry = findOp(op);
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

const std::vector<std::string> &cleave::runtime::tableOps() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> names;
    for (const OpEntry &e : kOps)
      names.push_back(e.name);
    return names;
  }();
  return ops;
}
