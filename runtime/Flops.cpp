//===- Flops.cpp - the FLOPs of a kernel that the progress line counts ----===//

#include "runtime/Executor.h"

#include <algorithm>

using namespace cleave::runtime;

double cleave::runtime::kernelFlops(const std::string &op,
                                    const Attributes &attributes,
                                    const std::vector<TensorRef> &inputs,
                                    const std::vector<TensorRef> &outputs) {
  if (op == "matmul" && inputs.size() == 2 && outputs.size() == 1 &&
      inputs[0].rank() >= 2) {
    // The contracted dimension is the lhs's last, or with transpose_lhs
    // (lhs stored [..., K, M]) its second to last.
    auto it = attributes.find("transpose_lhs");
    bool transposed = it != attributes.end() &&
                      (it->second.kind == AttrValue::Kind::Float
                           ? it->second.f != 0
                           : it->second.i != 0);
    const std::vector<int64_t> &lhs = inputs[0].shape;
    int64_t k = transposed ? lhs[lhs.size() - 2] : lhs.back();
    return 2.0 * double(outputs[0].numElements()) * double(k);
  }
  // A product of [Tq, D] by [D, Tk] per head: 2 * B*H*Tq*D * Tk. The
  // forward has two (the scores, then the weighted values); the backward
  // five (the scores again, then dv, dp, dq and dk).
  auto products = [&](size_t query, size_t key) {
    if (inputs.size() <= std::max(query, key) || inputs[key].rank() < 2)
      return 0.0;
    return 2.0 * double(inputs[query].numElements()) *
           double(inputs[key].shape[inputs[key].rank() - 2]);
  };
  if (op == "attention")
    return 2 * products(0, 1);
  if (op == "attention_grad") // dy, q, k, v
    return 5 * products(1, 2);
  return 0;
}
