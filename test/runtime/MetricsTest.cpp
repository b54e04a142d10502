//===- MetricsTest.cpp - the metrics lines and the safetensors writer -----===//

#include "TestPrograms.h"
#include "runtime/Json.h"
#include "runtime/Metrics.h"
#include "runtime/Safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <sstream>

using namespace cleave::runtime;
using namespace cleave::test;

namespace {

std::string readAll(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Json, Numbers) {
  EXPECT_EQ(jsonNumber(5.25), "5.25");
  EXPECT_EQ(jsonNumber(0.1), "0.1"); // the shortest text that reads back
  EXPECT_EQ(std::strtod(jsonNumber(1.0 / 3).c_str(), nullptr), 1.0 / 3);
  EXPECT_EQ(jsonNumber(double(5.2860937f)), "5.286093711853027");
  EXPECT_EQ(jsonNumber(std::nan("")), "null");
  EXPECT_EQ(jsonNumber(1e300 * 1e300), "null");
}

TEST(Json, Strings) {
  EXPECT_EQ(jsonQuote("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"");
}

TEST(Metrics, Line) {
  StepMetrics m;
  m.step = 3;
  m.hasLoss = true;
  m.loss = 2.5;
  m.tokensPerSecond = 1000;
  m.tflops = 0;
  m.peakBytes = 10;
  m.predictedPeakBytes = 12;
  m.rssPeakBytes = 4096;
  EXPECT_EQ(metricsLine(m),
            "{\"step\": 3, \"loss\": 2.5, \"tokens_per_s\": 1000, \"tflops\": "
            "0, \"peak_bytes\": 10, \"predicted_peak_bytes\": 12, "
            "\"rss_peak_bytes\": 4096}");
  m.hasLoss = false;
  EXPECT_NE(metricsLine(m).find("\"loss\": null"), std::string::npos);
}

TEST(Metrics, LivePeaksPerRank) {
  StepMetrics m;
  m.livePeakByRank = {100, 90};
  m.predictedLivePeakByRank = {100, 95};
  m.hostLivePeakByRank = {0, 0};
  m.predictedHostLivePeakByRank = {0, 0};
  std::string line = metricsLine(m);
  EXPECT_NE(line.find("\"live_peak_bytes\": [100, 90], "
                      "\"predicted_live_peak_bytes\": [100, 95]}"),
            std::string::npos);
  // The host's only where a rank has host memory.
  m.hostLivePeakByRank = {7, 0};
  m.predictedHostLivePeakByRank = {7, 0};
  EXPECT_NE(metricsLine(m).find("\"host_live_peak_bytes\": [7, 0], "
                                "\"predicted_host_live_peak_bytes\": [7, 0]"),
            std::string::npos);
}

TEST(Metrics, LivePeakCategoriesPerRank) {
  StepMetrics m;
  m.livePeakByRank = {100, 90};
  m.predictedLivePeakByRank = {100, 95};
  // Rank 0's six parts, then rank 1's (Executor.h's peakCategoryName).
  m.peakCategoriesByRank = {40, 30, 20, 5, 4, 1, 40, 30, 10, 0, 9, 1};
  EXPECT_NE(metricsLine(m).find(
                "\"live_peak_categories\": {\"parameters\": [40, 40], "
                "\"gradients\": [30, 30], \"optimizer_state\": [20, 10], "
                "\"gathered_parameters\": [5, 0], \"activations\": [4, 9], "
                "\"other\": [1, 1]}"),
            std::string::npos);
  // Not written when the runtime measured none.
  m.peakCategoriesByRank.clear();
  EXPECT_EQ(metricsLine(m).find("live_peak_categories"), std::string::npos);
}

TEST(Metrics, WritesOneLinePerStep) {
  TempDir dir;
  MetricsWriter writer;
  ASSERT_TRUE(writer.open(dir.file("m.jsonl")));
  StepMetrics m;
  ASSERT_TRUE(writer.write(m));
  m.step = 1;
  ASSERT_TRUE(writer.write(m));
  ASSERT_TRUE(writer.close());
  std::string text = readAll(dir.file("m.jsonl"));
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2);
  EXPECT_EQ(text.rfind("{\"step\": 0,", 0), 0u);
  EXPECT_NE(text.find("\n{\"step\": 1,"), std::string::npos);
}

TEST(Metrics, UnwritablePath) {
  MetricsWriter writer;
  Status status = writer.open("/nonexistent/dir/m.jsonl");
  ASSERT_FALSE(status);
  EXPECT_EQ(status.message(), "/nonexistent/dir/m.jsonl: cannot write the "
                              "metrics file: No such file or directory");
}

TEST(Safetensors, Format) {
  TempDir dir;
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  std::vector<NamedTensor> tensors = {
      {"z.bias", DType::F32, {2}, bytesOf(std::vector<float>{7, 8})},
      {"a.weight", DType::F32, {2, 3}, bytesOf(a)},
      {"scalar\"q", DType::BF16, {}, std::string("\x80\x3f", 2)}};
  ASSERT_TRUE(writeSafetensors(dir.file("p.safetensors"), tensors));
  std::string bytes = readAll(dir.file("p.safetensors"));
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  ASSERT_EQ(n % 8, 0u);
  std::string header = bytes.substr(8, n);
  EXPECT_EQ(header.substr(0, header.find_last_not_of(' ') + 1),
            "{\"a.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":"
            "[0,24]},\"scalar\\\"q\":{\"dtype\":\"BF16\",\"shape\":[],"
            "\"data_offsets\":[24,26]},\"z.bias\":{\"dtype\":\"F32\","
            "\"shape\":[2],\"data_offsets\":[26,34]}}");
  ASSERT_EQ(bytes.size(), 8 + n + 34);
  float first;
  std::memcpy(&first, bytes.data() + 8 + n, 4);
  EXPECT_EQ(first, 1.0f);

  Status bad = writeSafetensors("/nonexistent/p.safetensors", tensors);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.message().rfind("/nonexistent/p.safetensors: cannot write", 0),
            0u);
}

} // namespace
