//===- CostModel.h - FLOPs, bytes and time of dialect ops -------*- C++ -*-===//
//
// The one cost model of the compiler: for each op, the floating-point work
// and the bytes it moves, turned into seconds by rates measured once per
// backend (`cleave-calibrate` writes them; data/rates/ holds the checked-in
// defaults for the CPU and the H100). The pipeline partition balances
// stages with it and the plan predicts step time and the bubble from it.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_PASSES_COSTMODEL_H
#define CLEAVE_PASSES_COSTMODEL_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace mlir {
class Operation;
}

namespace mlir::cleave {

struct OpCost {
  double flops = 0; // floating-point operations of the forward op
  double bytes = 0; // bytes read and written
};

/// Rates of one backend: how fast it computes, moves memory and sends.
struct Rates {
  std::string backend;
  double flopsPerSecond = 0;     // matrix products (the op that dominates)
  double bytesPerSecond = 0;     // memory bandwidth, reads plus writes
  double linkBytesPerSecond = 0; // one point-to-point transfer
  double linkLatencySeconds = 0;
  /// One copy between device and host memory, each way (the host link:
  /// PCIe on a GPU; a memory copy on the CPU backends).
  double hostBytesPerSecond = 0;
};

/// The forward cost of `op`; zero for ops that only name storage
/// (parameters, constants).
OpCost estimateCost(Operation *op);

/// A copy between device and host memory (cleave.offload, cleave.fetch).
/// It runs on the critical path, once: not part of the forward's work that
/// the backward costs kBackwardFactor times. hostCopySeconds prices it.
bool isHostCopy(Operation *op);

/// Seconds of host copy `op`: its bytes at the rates' host link
/// (`host_bytes_per_second`).
double hostCopySeconds(Operation *op, const Rates &rates);

/// A collective of sharded data parallelism that the model prices as a
/// ring over its group: a sharded parameter's all-gather
/// (cleave.gather_param, in the forward and again in the backward) and a
/// reduce-scatter (cleave.reduce_scatter: ZeRO-3's gradients). Like a host
/// copy it runs where it is, not as forward work the backward costs
/// again; shardCollectiveSeconds prices it.
bool isShardCollective(Operation *op);

/// Seconds of shard collective `op` over a group of n ranks: each rank
/// sends and receives (n-1)/n of the whole tensor's bytes (the padded
/// parameter; the reduce-scatter's input) in n-1 steps that each pay the
/// link's latency; 0 for any other op or a group of one.
double shardCollectiveSeconds(Operation *op, const Rates &rates);

/// Seconds for `cost` at `rates`: the slower of compute and memory.
double seconds(const OpCost &cost, const Rates &rates);

/// Seconds to send `bytes` to another rank.
double transferSeconds(double bytes, const Rates &rates);

/// The backward pass costs about twice the forward (a product's two
/// gradient products); elementwise rules read and write about as much again.
constexpr double kBackwardFactor = 2.0;

/// The checked-in defaults ("cpu", "h100"); an error naming the choices.
llvm::Expected<Rates> defaultRates(llvm::StringRef backend);

/// Rates from a JSON file as cleave-calibrate writes it:
/// {"backend", "flops_per_second", "bytes_per_second",
///  "link_bytes_per_second", "link_latency_seconds",
///  "host_bytes_per_second"}. A file without the last (written before it)
/// gets half the memory rate: a copy's bytes read and written, as such
/// files were read.
llvm::Expected<Rates> readRates(llvm::StringRef path);

/// The JSON text of `rates` (what readRates reads).
std::string formatRates(const Rates &rates);

} // namespace mlir::cleave

#endif // CLEAVE_PASSES_COSTMODEL_H
