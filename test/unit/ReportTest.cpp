//===- ReportTest.cpp - units for the --report page of cleave-compile -----===//
//
// Renders test/inputs/plan-pp4.json and plans built here, and counts what
// the page draws: a box per timeline span, a bar per rank, a block per stage.
//
//===----------------------------------------------------------------------===//

#include "passes/Report.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include <gtest/gtest.h>

#include <map>
#include <regex>

using namespace llvm;

namespace {

/// test/inputs/plan-pp4.json of the checkout CMake names (not found from
/// __FILE__, which is relative under ccache's CCACHE_BASEDIR).
json::Object samplePlan() {
  SmallString<256> path(CLEAVE_SOURCE_DIR);
  sys::path::append(path, "test", "inputs", "plan-pp4.json");
  ErrorOr<std::unique_ptr<MemoryBuffer>> buffer = MemoryBuffer::getFile(path);
  EXPECT_TRUE(bool(buffer)) << "cannot read " << std::string(path);
  if (!buffer)
    return {};
  Expected<json::Value> value = json::parse((*buffer)->getBuffer());
  EXPECT_TRUE(bool(value)) << toString(value.takeError());
  if (!value || !value->getAsObject())
    return {};
  return std::move(*value->getAsObject());
}

size_t count(const std::string &text, StringRef needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + needle.size()))
    ++n;
  return n;
}

std::string render(const json::Object &plan) {
  Expected<std::string> page = cleave::renderReport(plan);
  EXPECT_TRUE(bool(page)) << toString(page.takeError());
  return page ? *page : "";
}

std::string renderError(const json::Object &plan) {
  Expected<std::string> page = cleave::renderReport(plan);
  if (page) {
    ADD_FAILURE() << "expected an error, got a page";
    return "";
  }
  return toString(page.takeError());
}

json::Object memory(int64_t scale) {
  return json::Object{
      {"peak_bytes", 9 * scale},  {"parameters", scale},
      {"gradients", scale},       {"optimizer_state", 2 * scale},
      {"activations", 3 * scale}, {"io", scale / 8},
      {"constants", scale / 16},  {"workspace", 0}};
}

/// A plan of `pipeline` ranks, each holding `chunks` stages (stage c*p + r),
/// with a GPipe-like timeline: every forward, then every backward.
json::Object syntheticPlan(int64_t pipeline, int64_t microbatches,
                           int64_t chunks) {
  const double forward = 0.001, backward = 0.002;
  json::Array stages, ranks, timeline;
  for (int64_t s = 0; s < pipeline * chunks; ++s)
    stages.push_back(json::Object{
        {"stage", s},
        {"pipeline_rank", s % pipeline},
        {"first_node", "/h." + std::to_string(s) + "/ln_1/LayerNormalization"},
        {"last_node", "/h." + std::to_string(s) + "/Add_1"},
        {"ops", 40},
        {"parameters", 6},
        {"parameter_bytes", 1 << 20},
        {"forward_seconds", forward},
        {"backward_seconds", backward},
        {"sent_bytes", 1 << 16}});
  for (int64_t r = 0; r < pipeline; ++r) {
    ranks.push_back(json::Object{{"rank", r},
                                 {"data_rank", 0},
                                 {"pipeline_rank", r},
                                 {"predicted_memory", memory(1 << 20)}});
    double t = double(r) * forward;
    for (const char *kind : {"forward", "backward"})
      for (int64_t c = 0; c < chunks; ++c)
        for (int64_t mb = 0; mb < microbatches; ++mb) {
          double length = StringRef(kind) == "forward" ? forward : backward;
          timeline.push_back(json::Object{{"rank", r},
                                          {"kind", kind},
                                          {"stage", c * pipeline + r},
                                          {"microbatch", mb},
                                          {"start", t},
                                          {"end", t + length}});
          t += length;
        }
  }
  return json::Object{
      {"model", "synthetic.onnx"},
      {"world_size", pipeline},
      {"mesh",
       json::Object{{"data", 1}, {"pipeline", pipeline}, {"tensor", 1}}},
      {"schedule", json::Object{{"kind", "interleaved"},
                                {"microbatches", microbatches},
                                {"virtual_stages", chunks},
                                {"theoretical_bubble", 0.1},
                                {"predicted_bubble", 0.2}}},
      {"stages", std::move(stages)},
      {"ranks", std::move(ranks)},
      {"timeline", std::move(timeline)}};
}

/// The widths of the timeline's boxes, in the order drawn.
std::vector<double> boxWidths(const std::string &page) {
  std::regex box(
      R"re(<g class="span [a-z]+"><title>[^<]*</title><rect [^>]* width="([0-9.]+)")re");
  std::vector<double> widths;
  for (auto it = std::sregex_iterator(page.begin(), page.end(), box);
       it != std::sregex_iterator(); ++it)
    widths.push_back(std::stod((*it)[1]));
  return widths;
}

TEST(Report, RendersTheSamplePlanWithItsHeader) {
  json::Object plan = samplePlan();
  std::string page = render(plan);
  EXPECT_EQ(0u, page.find("<!DOCTYPE html>"));
  EXPECT_NE(std::string::npos, page.find("gpt2-toy.onnx"));
  EXPECT_NE(std::string::npos, page.find("1 × 4 × 1"));
  EXPECT_NE(std::string::npos, page.find(">interleaved<"));
  // predicted_bubble 0.3347 vs theoretical_bubble 0.2727.
  EXPECT_NE(std::string::npos, page.find("33.5% <small>vs 27.3%</small>"));
  // predicted_step_seconds 0.04364.
  EXPECT_NE(std::string::npos, page.find(">43.6 ms<"));
  EXPECT_TRUE(StringRef(page).endswith("</html>\n"));
}

TEST(Report, DrawsOneTimelineBoxPerSpan) {
  json::Object plan = samplePlan();
  ASSERT_TRUE(plan.getArray("timeline"));
  ASSERT_EQ(64u, plan.getArray("timeline")->size());
  std::string page = render(plan);
  EXPECT_EQ(64u, count(page, "<g class=\"span "));
  EXPECT_EQ(32u, count(page, "<g class=\"span forward\""));
  EXPECT_EQ(32u, count(page, "<g class=\"span backward\""));
  // One idle figure at the end of each of the 4 rows.
  EXPECT_EQ(4u, count(page, ">idle <tspan"));
}

TEST(Report, DrawsOneMemoryRowPerRank) {
  std::string page = render(samplePlan());
  EXPECT_EQ(4u, count(page, "<g class=\"memory-row\""));
  EXPECT_EQ(4u, count(page, "font-weight=\"600\">peak "));
  EXPECT_EQ(4u, count(page, "<line class=\"peak\""));
  for (StringRef category : {"parameters", "gradients", "optimizer state",
                             "activations", "io", "constants", "workspace"})
    EXPECT_NE(std::string::npos,
              page.find(("</span>" + category + "</span>").str()))
        << category.str() << " missing from the legend";
}

TEST(Report, DrawsOnePartitionBlockPerStage) {
  std::string page = render(samplePlan());
  EXPECT_EQ(4u, count(page, "<g class=\"stage-block\""));
  // And a table row per stage, with its nodes.
  EXPECT_EQ(1u, count(page, "<td class=\"node\">/wte/Gather</td>"));
  EXPECT_EQ(1u, count(page, "/loss/SoftmaxCrossEntropyLoss</td>"));
}

TEST(Report, FetchesNothing) {
  std::string page = render(samplePlan());
  EXPECT_EQ(0u, count(page, "<script"));
  EXPECT_EQ(0u, count(page, "<link"));
  EXPECT_EQ(0u, count(page, "src="));
  EXPECT_EQ(0u, count(page, "href="));
  EXPECT_EQ(0u, count(page, "url("));
  EXPECT_EQ(0u, count(page, "@import"));
}

TEST(Report, EscapesTextFromThePlan) {
  json::Object plan = samplePlan();
  plan["model"] = "a&b.onnx";
  json::Object *stage = (*plan.getArray("stages"))[1].getAsObject();
  ASSERT_TRUE(stage);
  (*stage)["first_node"] = "<script>alert(\"x\")</script>";
  std::string page = render(plan);
  EXPECT_EQ(0u, count(page, "<script"));
  EXPECT_NE(std::string::npos,
            page.find("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;"));
  EXPECT_NE(std::string::npos, page.find("a&amp;b.onnx"));
  EXPECT_EQ(0u, count(page, "a&b"));
}

TEST(Report, NamesAMissingRanksField) {
  json::Object plan = samplePlan();
  plan.erase("ranks");
  EXPECT_EQ("plan.json: ranks is missing", renderError(plan));
}

TEST(Report, NamesANonNumberMemoryField) {
  json::Object plan = samplePlan();
  json::Object *rank = (*plan.getArray("ranks"))[2].getAsObject();
  ASSERT_TRUE(rank);
  (*rank->getObject("predicted_memory"))["activations"] = "a lot";
  EXPECT_EQ("plan.json: ranks[2].predicted_memory.activations is not a number",
            renderError(plan));
}

TEST(Report, NamesOtherIllTypedFields) {
  {
    json::Object plan = samplePlan();
    (*(*plan.getArray("stages"))[0].getAsObject())["ops"] = "many";
    EXPECT_EQ("plan.json: stages[0].ops is not an integer", renderError(plan));
  }
  {
    json::Object plan = samplePlan();
    plan["mesh"] = 4;
    EXPECT_EQ("plan.json: mesh is not an object", renderError(plan));
  }
  {
    json::Object plan = samplePlan();
    (*plan.getArray("timeline"))[5] = "forward";
    EXPECT_EQ("plan.json: timeline[5] is not an object", renderError(plan));
  }
  {
    json::Object plan = samplePlan();
    (*(*plan.getArray("timeline"))[3].getAsObject())["rank"] = 4;
    EXPECT_EQ("plan.json: timeline[3].rank is 4, but the mesh has 4 pipeline "
              "ranks",
              renderError(plan));
  }
  {
    json::Object plan = samplePlan();
    plan.getObject("schedule")->erase("predicted_bubble");
    EXPECT_EQ("plan.json: schedule.predicted_bubble is missing",
              renderError(plan));
  }
}

/// A data-parallel plan: two ranks, one stage, no schedule or timeline.
json::Object dataParallelPlan() {
  return json::Object{
      {"model", "mlp.onnx"},
      {"world_size", 2},
      {"mesh", json::Object{{"data", 2}, {"pipeline", 1}, {"tensor", 1}}},
      {"batch", json::Object{{"global_batch", 8}, {"microbatches", 2}}},
      {"stages", json::Array{json::Object{{"stage", 0},
                                          {"pipeline_rank", 0},
                                          {"first_node", "/fc1/Gemm"},
                                          {"last_node", "/loss"},
                                          {"ops", 12},
                                          {"parameters", 4},
                                          {"parameter_bytes", 4096},
                                          {"forward_seconds", 0.0005},
                                          {"backward_seconds", 0.001},
                                          {"sent_bytes", 0}}}},
      {"ranks", json::Array{json::Object{{"rank", 0},
                                         {"data_rank", 0},
                                         {"predicted_memory", memory(4096)}},
                            json::Object{{"rank", 1},
                                         {"data_rank", 1},
                                         {"predicted_memory", memory(4096)}}}}};
}

TEST(Report, RendersAPlanWithoutAPipeline) {
  std::string page = render(dataParallelPlan());
  EXPECT_NE(std::string::npos, page.find("no pipeline timeline"));
  EXPECT_EQ(1u, count(page, "<g class=\"stage-block\""));
  EXPECT_EQ(2u, count(page, "<g class=\"memory-row\""));
  EXPECT_EQ(0u, count(page, "<g class=\"span "));
  EXPECT_EQ(0u, count(page, "<svg class=\"timeline\""));
  // Memory in human units: the peak is 9 x 4096 bytes.
  EXPECT_EQ(2u, count(page, ">peak 36.0 KiB</text>"));
  // Times under a millisecond in microseconds.
  EXPECT_NE(std::string::npos, page.find(">500 µs</td>"));
}

TEST(Report, ShowsTheLivePeakBesideTheArena) {
  json::Object plan = dataParallelPlan();
  for (json::Value &rank : *plan.getArray("ranks"))
    (*rank.getAsObject())["predicted_live_peak_bytes"] =
        json::Object{{"device", 8 * 4096}, {"host", 0}};
  std::string page = render(plan);
  // A dashed marker and the figure after the arena's, on each rank's row.
  EXPECT_EQ(2u, count(page, "<line class=\"live-peak\""));
  EXPECT_EQ(2u, count(page, ">peak 36.0 KiB<tspan font-weight=\"400\" "
                            "fill=\"#5b6472\"> · live 32.0 KiB</tspan></text>"));
  EXPECT_NE(std::string::npos, page.find("live peak (dashed)"));
  // Without it (older plans), neither.
  EXPECT_EQ(0u, count(render(dataParallelPlan()), "live-peak"));
}

TEST(Report, DrawsTheWholeModelWhenADataParallelPlanListsNoStages) {
  json::Object plan = dataParallelPlan();
  plan.erase("stages");
  std::string page = render(plan);
  EXPECT_EQ(1u, count(page, "<g class=\"stage-block\""));
  EXPECT_NE(std::string::npos, page.find("the whole model"));
  EXPECT_EQ(2u, count(page, "<g class=\"memory-row\""));
  EXPECT_NE(std::string::npos, page.find("no pipeline timeline"));
}

TEST(Report, NamesMissingStagesOfAPipeline) {
  json::Object plan = samplePlan();
  plan.erase("stages");
  EXPECT_EQ("plan.json: stages is missing", renderError(plan));
}

TEST(Report, PrintsEachRanksIdleFraction) {
  // Rank 0 is busy 2 of 6 ms, rank 1 busy 4 of 6 ms.
  json::Object plan = syntheticPlan(2, 1, 1);
  json::Array timeline;
  auto span = [](int64_t rank, const char *kind, double start, double end) {
    return json::Object{{"rank", rank},    {"kind", kind},   {"stage", rank},
                        {"microbatch", 0}, {"start", start}, {"end", end}};
  };
  timeline.push_back(span(0, "forward", 0, 0.001));
  timeline.push_back(span(1, "forward", 0.001, 0.002));
  timeline.push_back(span(1, "backward", 0.002, 0.005));
  timeline.push_back(span(0, "backward", 0.005, 0.006));
  plan["timeline"] = std::move(timeline);
  std::string page = render(plan);
  EXPECT_NE(std::string::npos,
            page.find(">idle <tspan font-weight=\"600\">66.7%"));
  EXPECT_NE(std::string::npos,
            page.find(">idle <tspan font-weight=\"600\">33.3%"));
}

TEST(Report, KeepsEveryBoxVisibleAndLabelledAtEightRanksBy32Microbatches) {
  std::string page = render(syntheticPlan(8, 32, 1));
  std::vector<double> widths = boxWidths(page);
  ASSERT_EQ(8u * 64u, widths.size());
  for (double w : widths)
    EXPECT_GE(w, 2.0);
  // Wide enough that every box carries its microbatch number.
  std::regex labelled(
      R"(<g class="span [a-z]+"><title>[^<]*</title><rect [^>]*/><text )");
  EXPECT_EQ(512, std::distance(
                     std::sregex_iterator(page.begin(), page.end(), labelled),
                     std::sregex_iterator()));
}

TEST(Report, ShadesTheSecondChunkOfARankLighter) {
  std::string page = render(syntheticPlan(4, 8, 2));
  EXPECT_EQ(4u * 32u, count(page, "<g class=\"span "));
  EXPECT_EQ(8u, count(page, "<g class=\"stage-block\""));
  EXPECT_NE(std::string::npos, page.find("forward, chunk 2 (stages 4–7)"));
  // Rank 0's first forward (stage 0) and its forward of stage 4 differ.
  std::regex fill(
      R"re(forward · stage ([04]) · microbatch 0 [^<]*</title><rect [^>]*fill="(#[0-9a-f]{6})")re");
  std::map<std::string, std::string> fills;
  for (auto it = std::sregex_iterator(page.begin(), page.end(), fill);
       it != std::sregex_iterator(); ++it)
    fills[(*it)[1]] = (*it)[2];
  ASSERT_EQ(2u, fills.size());
  EXPECT_NE(fills["0"], fills["4"]);
}

} // namespace
