//===- Metrics.h - the per-step metrics file (JSON lines) ------*- C++ -*-===//
//
// `cleave-run --metrics FILE` writes one JSON object per step (DESIGN.md):
//   {"step", "loss", "tokens_per_s", "tflops", "peak_bytes",
//    "predicted_peak_bytes", "rss_peak_bytes"}, and with activation offload
//   "host_peak_bytes", "predicted_host_peak_bytes"; then per rank, as arrays
//   indexed by world rank, "live_peak_bytes" and "predicted_live_peak_bytes"
//   (device) and, with a host arena, "host_live_peak_bytes" and
//   "predicted_host_live_peak_bytes", and "live_peak_categories" (what each
//   rank's live peak held when reached: {"parameters": [per rank],
//   "gradients", "optimizer_state", "gathered_parameters", "activations",
//   "other"}) and "category_peak_bytes" (each category's own peak, the
//   same form)
// and, for a program with fp16 loss scaling, "loss_scale" (the scale the
// step used) and "skipped" (true when its gradients overflowed and the
// optimizer did not run).
// Each line is flushed as it is written, so a run that dies keeps the steps
// it finished.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_METRICS_H
#define CLEAVE_RUNTIME_METRICS_H

#include "runtime/Status.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace cleave::runtime {

struct StepMetrics {
  int64_t step = 0;    // from 0, as the reference losses count
  bool hasLoss = false; // false: "loss": null (a program without a LOSS)
  double loss = 0;
  double tokensPerSecond = 0;
  // Achieved TFLOP/s over all ranks. Counts only the FLOPs of matmul,
  // attention and attention_grad kernels (kernelFlops in Executor.h); 0 for
  // a program without them.
  double tflops = 0;
  uint64_t peakBytes = 0;          // measured live tensor bytes, max over ranks
  uint64_t predictedPeakBytes = 0; // the memory plan's, max over ranks
  uint64_t rssPeakBytes = 0;       // process peak RSS, max over ranks
  // Offloaded activations (a program with HOST buffers; else not written):
  // measured live bytes in host arenas and the plan's, max over ranks.
  uint64_t hostPeakBytes = 0, predictedHostPeakBytes = 0;
  // Per rank (index = world rank; empty: not written): the measured live
  // peak since start and the plan's prediction of it, device ("live_peak_
  // bytes", "predicted_live_peak_bytes") and, when a rank has a host arena,
  // host ("host_live_peak_bytes", "predicted_host_live_peak_bytes").
  std::vector<uint64_t> livePeakByRank, predictedLivePeakByRank;
  std::vector<uint64_t> hostLivePeakByRank, predictedHostLivePeakByRank;
  // Per rank, the parts of live_peak_bytes when it was reached
  // ("live_peak_categories": {NAME: [per rank]}, Executor.h's
  // peakCategoryName order; kPeakCategories entries per rank here).
  std::vector<uint64_t> peakCategoriesByRank;
  // Per rank, each category's own peak ("category_peak_bytes", same form).
  std::vector<uint64_t> categoryPeaksByRank;
  bool lossScaled = false;
  double lossScale = 0;
  bool skipped = false;
};

/// The JSON object of one step, without a newline.
std::string metricsLine(const StepMetrics &m);

class MetricsWriter {
public:
  MetricsWriter() = default;
  MetricsWriter(const MetricsWriter &) = delete;
  MetricsWriter &operator=(const MetricsWriter &) = delete;
  ~MetricsWriter();

  /// Creates (truncates) `path`; an error naming it if it cannot be written.
  Status open(const std::string &path);
  bool isOpen() const { return file_ != nullptr; }
  Status write(const StepMetrics &m);
  Status close();

private:
  std::string path_;
  std::FILE *file_ = nullptr;
};

} // namespace cleave::runtime

#endif // CLEAVE_RUNTIME_METRICS_H
