//===- Metrics.cpp - the per-step metrics file (JSON lines) ---------------===//

#include "runtime/Metrics.h"
#include "runtime/Executor.h"
#include "runtime/Json.h"

#include <cerrno>
#include <cstring>

using namespace cleave::runtime;

std::string cleave::runtime::metricsLine(const StepMetrics &m) {
  std::string s = "{\"step\": " + std::to_string(m.step);
  s += ", \"loss\": " + (m.hasLoss ? jsonNumber(m.loss) : "null");
  s += ", \"tokens_per_s\": " + jsonNumber(m.tokensPerSecond);
  s += ", \"tflops\": " + jsonNumber(m.tflops);
  s += ", \"peak_bytes\": " + std::to_string(m.peakBytes);
  s += ", \"predicted_peak_bytes\": " + std::to_string(m.predictedPeakBytes);
  s += ", \"rss_peak_bytes\": " + std::to_string(m.rssPeakBytes);
  if (m.predictedHostPeakBytes) {
    s += ", \"host_peak_bytes\": " + std::to_string(m.hostPeakBytes);
    s += ", \"predicted_host_peak_bytes\": " +
         std::to_string(m.predictedHostPeakBytes);
  }
  auto list = [](const std::vector<uint64_t> &values) {
    std::string out = "[";
    for (size_t i = 0; i < values.size(); ++i)
      out += (i ? ", " : "") + std::to_string(values[i]);
    return out + "]";
  };
  if (!m.livePeakByRank.empty()) {
    s += ", \"live_peak_bytes\": " + list(m.livePeakByRank);
    s += ", \"predicted_live_peak_bytes\": " + list(m.predictedLivePeakByRank);
    auto any = [](const std::vector<uint64_t> &v) {
      for (uint64_t x : v)
        if (x)
          return true;
      return false;
    };
    size_t world = m.livePeakByRank.size();
    auto categories = [&](const char *key, const std::vector<uint64_t> &v) {
      if (v.size() != world * kPeakCategories)
        return;
      s += std::string(", \"") + key + "\": {";
      for (int c = 0; c < kPeakCategories; ++c) {
        std::vector<uint64_t> byRank;
        for (size_t r = 0; r < world; ++r)
          byRank.push_back(v[r * kPeakCategories + c]);
        s += std::string(c ? ", " : "") + "\"" + peakCategoryName(c) +
             "\": " + list(byRank);
      }
      s += "}";
    };
    categories("live_peak_categories", m.peakCategoriesByRank);
    categories("category_peak_bytes", m.categoryPeaksByRank);
    if (any(m.hostLivePeakByRank) || any(m.predictedHostLivePeakByRank)) {
      s += ", \"host_live_peak_bytes\": " + list(m.hostLivePeakByRank);
      s += ", \"predicted_host_live_peak_bytes\": " +
           list(m.predictedHostLivePeakByRank);
    }
  }
  if (m.lossScaled) {
    s += ", \"loss_scale\": " + jsonNumber(m.lossScale);
    s += std::string(", \"skipped\": ") + (m.skipped ? "true" : "false");
  }
  return s + "}";
}

MetricsWriter::~MetricsWriter() {
  if (file_)
    std::fclose(file_);
}

Status MetricsWriter::open(const std::string &path) {
  if (file_)
    return Status::error(path + ": the metrics file is open already");
  file_ = std::fopen(path.c_str(), "w");
  if (!file_)
    return Status::error(path + ": cannot write the metrics file: " +
                         std::strerror(errno));
  path_ = path;
  return Status::ok();
}

Status MetricsWriter::write(const StepMetrics &m) {
  if (!file_)
    return Status::error("the metrics file is not open");
  std::string line = metricsLine(m) + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() ||
      std::fflush(file_) != 0)
    return Status::error(path_ + ": writing the metrics failed: " +
                         std::strerror(errno));
  return Status::ok();
}

Status MetricsWriter::close() {
  if (!file_)
    return Status::ok();
  int rc = std::fclose(file_);
  file_ = nullptr;
  if (rc != 0)
    return Status::error(path_ + ": closing the metrics file failed: " +
                         std::strerror(errno));
  return Status::ok();
}
