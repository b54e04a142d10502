//===- CostModel.cpp - FLOPs, bytes and time of dialect ops ---------------===//

#include "passes/CostModel.h"
#include "ir/CleaveOps.h"
#include "ir/DistributionOps.h"
#include "passes/Layout.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::cleave;

namespace {

double elements(Type type) {
  auto tensor = type.dyn_cast<RankedTensorType>();
  return tensor && tensor.hasStaticShape() ? double(tensor.getNumElements())
                                           : 0.0;
}

double bytes(Type type) {
  auto tensor = type.dyn_cast<RankedTensorType>();
  return tensor && tensor.hasStaticShape() ? double(tensorBytes(tensor)) : 0.0;
}

} // namespace

OpCost mlir::cleave::estimateCost(Operation *op) {
  OpCost cost;
  if (isa<ConstantOp, AxisIndexOp, GetParamOp, GetGradOp, GetGradShardOp>(op))
    return cost;
  // An optimizer update has no results: it reads the gradient and updates
  // the parameter and its state in place. AdamW reads p, g, m, v and writes
  // p, m, v, about 14 operations an element (decay, two moments, the bias
  // corrections, the step); SGD with momentum reads p, g, b and writes p, b.
  if (auto adamw = dyn_cast<AdamWOp>(op)) {
    cost.flops = 14.0 * elements(adamw.getGrad().getType());
    cost.bytes = 7.0 * bytes(adamw.getGrad().getType());
    return cost;
  }
  if (auto sgd = dyn_cast<SgdOp>(op)) {
    cost.flops = 6.0 * elements(sgd.getGrad().getType());
    cost.bytes = 5.0 * bytes(sgd.getGrad().getType());
    return cost;
  }
  for (Value v : op->getOperands())
    cost.bytes += bytes(v.getType());
  for (Value v : op->getResults())
    cost.bytes += bytes(v.getType());
  // A copy between memory spaces moves its bytes and computes nothing.
  if (isa<OffloadOp, FetchOp>(op))
    return cost;
  if (auto matmul = dyn_cast<MatmulOp>(op)) {
    auto lhs = matmul.getLhs().getType().cast<RankedTensorType>();
    int64_t k = matmul.getTransposeLhs() ? lhs.getDimSize(lhs.getRank() - 2)
                                         : lhs.getDimSize(lhs.getRank() - 1);
    cost.flops = 2.0 * elements(matmul.getType()) * double(k);
    return cost;
  }
  if (auto attention = dyn_cast<AttentionOp>(op)) {
    auto q = attention.getQ().getType().cast<RankedTensorType>();
    auto k = attention.getK().getType().cast<RankedTensorType>();
    double b = q.getDimSize(0), h = q.getDimSize(1), tq = q.getDimSize(2),
           d = q.getDimSize(3), tk = k.getDimSize(2);
    // Two products (q k^T and p v) and the softmax; causal skips half.
    double work = 4.0 * b * h * tq * tk * d + 5.0 * b * h * tq * tk;
    cost.flops = attention.getCausal() ? work / 2 : work;
    return cost;
  }
  for (Value v : op->getResults())
    cost.flops += elements(v.getType());
  return cost;
}

bool mlir::cleave::isHostCopy(Operation *op) {
  return isa<OffloadOp, FetchOp>(op);
}

double mlir::cleave::hostCopySeconds(Operation *op, const Rates &rates) {
  if (op->getNumOperands() != 1 || rates.hostBytesPerSecond <= 0)
    return 0;
  return bytes(op->getOperand(0).getType()) / rates.hostBytesPerSecond;
}

bool mlir::cleave::isShardCollective(Operation *op) {
  return isa<GatherParamOp, ReduceScatterOp>(op);
}

double mlir::cleave::shardCollectiveSeconds(Operation *op, const Rates &rates) {
  double n = 1, total = 0;
  if (auto gather = dyn_cast<GatherParamOp>(op)) {
    ParameterOp param = lookupParameter(gather, gather.getNameAttr());
    std::optional<StateShards> shards =
        param ? stateShards(param) : std::nullopt;
    if (!shards)
      return 0;
    n = double(shards->ranks);
    total = double(shards->padded()) *
            double(elementBytes(
                param.getType().cast<RankedTensorType>().getElementType()));
  } else if (auto scatter = dyn_cast<ReduceScatterOp>(op)) {
    auto in = scatter.getInput().getType().cast<RankedTensorType>();
    auto out = scatter.getResult().getType().cast<RankedTensorType>();
    int64_t dim = scatter.getDim();
    if (dim < 0 || dim >= out.getRank() || out.getDimSize(dim) <= 0)
      return 0;
    n = double(in.getDimSize(dim) / out.getDimSize(dim));
    total = bytes(in);
  }
  if (n < 2)
    return 0;
  double wire = rates.linkBytesPerSecond > 0
                    ? (n - 1) / n * total / rates.linkBytesPerSecond
                    : 0.0;
  return wire + (n - 1) * rates.linkLatencySeconds;
}

double mlir::cleave::seconds(const OpCost &cost, const Rates &rates) {
  double compute =
      rates.flopsPerSecond > 0 ? cost.flops / rates.flopsPerSecond : 0.0;
  double memory =
      rates.bytesPerSecond > 0 ? cost.bytes / rates.bytesPerSecond : 0.0;
  return std::max(compute, memory);
}

double mlir::cleave::transferSeconds(double bytes, const Rates &rates) {
  if (bytes <= 0)
    return 0;
  return rates.linkLatencySeconds + (rates.linkBytesPerSecond > 0
                                         ? bytes / rates.linkBytesPerSecond
                                         : 0.0);
}

llvm::Expected<Rates> mlir::cleave::defaultRates(llvm::StringRef backend) {
  Rates r;
  r.backend = backend.str();
  // These equal data/rates/<backend>.json (a unit test checks it).
  if (backend == "cpu") {
    // `mpirun -np 2 cleave-calibrate --threads 1` on the 2-core build
    // machine: one rank per core, as a pipeline runs there.
    r.flopsPerSecond = 6.6044e10;
    r.bytesPerSecond = 1.2383e10;
    r.linkBytesPerSecond = 3.7978e9;
    r.linkLatencySeconds = 8.7985e-7;
    // A 64 MiB memcpy on one thread (what cpu-staged's upload and
    // download are), cleave-calibrate on the same machine.
    r.hostBytesPerSecond = 4.4814e9;
    return r;
  }
  if (backend == "h100") {
    // One H100 80GB HBM3: bf16 dense products at 798 TFLOP/s and a
    // device-to-device copy at 3.0 TB/s as measured on the lent machine
    // (the device tool's KINDS.md); NVLink 4 at 450 GB/s per direction.
    r.flopsPerSecond = 7.98e14;
    r.bytesPerSecond = 3.0e12;
    r.linkBytesPerSecond = 4.5e11;
    r.linkLatencySeconds = 1e-5;
    // PCIe 5 x16 from page-locked memory, 55.0 GB/s each way as measured
    // on the lent H200 (docs/gpu-runs.md, bench/host-link-gpu.py; an H100
    // SXM has the same link).
    r.hostBytesPerSecond = 5.5e10;
    return r;
  }
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      "no default rates for backend '%s' (the defaults: cpu, h100; or write "
      "a rates file with cleave-calibrate)",
      backend.str().c_str());
}

llvm::Expected<Rates> mlir::cleave::readRates(llvm::StringRef path) {
  auto fail = [&](const llvm::Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   (path + ": " + why).str());
  };
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return fail("cannot read the rates: " + buffer.getError().message());
  llvm::Expected<llvm::json::Value> parsed =
      llvm::json::parse((*buffer)->getBuffer());
  if (!parsed)
    return fail("not valid JSON: " + llvm::toString(parsed.takeError()));
  const llvm::json::Object *object = parsed->getAsObject();
  if (!object)
    return fail("expects an object such as " +
                formatRates(*defaultRates("cpu")));
  Rates r;
  if (auto backend = object->getString("backend"))
    r.backend = backend->str();
  struct Field {
    const char *key;
    double *value;
  } fields[] = {{"flops_per_second", &r.flopsPerSecond},
                {"bytes_per_second", &r.bytesPerSecond},
                {"link_bytes_per_second", &r.linkBytesPerSecond},
                {"link_latency_seconds", &r.linkLatencySeconds}};
  if (std::optional<double> host = object->getNumber("host_bytes_per_second")) {
    if (!(*host > 0))
      return fail("'host_bytes_per_second' must be positive");
    r.hostBytesPerSecond = *host;
  } else if (object->get("host_bytes_per_second")) {
    return fail("'host_bytes_per_second' is not a number");
  }
  for (Field f : fields) {
    std::optional<double> v = object->getNumber(f.key);
    if (!v)
      return fail(llvm::Twine("'") + f.key + "' is missing or not a number");
    if (!(*v >= 0) || (*v == 0 && llvm::StringRef(f.key).endswith("second") &&
                       llvm::StringRef(f.key) != "link_latency_seconds"))
      return fail(llvm::Twine("'") + f.key + "' must be positive");
    *f.value = *v;
  }
  if (r.hostBytesPerSecond == 0)
    r.hostBytesPerSecond = r.bytesPerSecond / 2;
  return r;
}

std::string mlir::cleave::formatRates(const Rates &r) {
  return llvm::formatv("{{\"backend\": \"{0}\", \"flops_per_second\": {1:e}, "
                       "\"bytes_per_second\": {2:e}, "
                       "\"link_bytes_per_second\": {3:e}, "
                       "\"link_latency_seconds\": {4:e}, "
                       "\"host_bytes_per_second\": {5:e}}",
                       r.backend, r.flopsPerSecond, r.bytesPerSecond,
                       r.linkBytesPerSecond, r.linkLatencySeconds,
                       r.hostBytesPerSecond)
      .str();
}
