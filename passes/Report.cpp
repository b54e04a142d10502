//===- Report.cpp - plan.json as one HTML page with inline SVG ------------===//
//
// Two steps: readPlan checks every field the page uses once, naming the
// field's path when one is missing or ill-typed, into plain structs; the
// write* functions then draw from those structs and trust them. The page has
// no scripts, fonts or links, so it can be attached to a ticket and opened
// offline; hovering a box shows its exact figures (SVG <title>).
//
//===----------------------------------------------------------------------===//

#include "passes/Report.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Sequence.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <optional>
#include <vector>

using namespace llvm;

namespace cleave {
namespace {

//===----------------------------------------------------------------------===//
// The plan, as the page needs it
//===----------------------------------------------------------------------===//

struct Stage {
  int64_t stage = 0, pipelineRank = 0;
  std::string firstNode, lastNode;
  int64_t ops = 0, parameters = 0;
  double parameterBytes = 0, forwardSeconds = 0, backwardSeconds = 0;
  double sentBytes = 0;
};

/// The categories of `predicted_memory`, in the order the bars stack them.
struct MemoryCategory {
  const char *key;
  const char *label;
  uint32_t colour;
};
constexpr MemoryCategory kMemoryCategories[] = {
    {"parameters", "parameters", 0x4e79a7},
    {"gradients", "gradients", 0xf28e2b},
    {"optimizer_state", "optimizer state", 0x76b7b2},
    {"activations", "activations", 0xe15759},
    {"io", "io", 0x59a14f},
    {"constants", "constants", 0xb07aa1},
    {"workspace", "workspace", 0x9c755f},
};
constexpr size_t kNumMemoryCategories = std::size(kMemoryCategories);

struct Rank {
  int64_t rank = 0;
  std::optional<int64_t> dataRank, pipelineRank;
  double peakBytes = 0;
  // The most bytes of live tensors at once (plan.json's
  // predicted_live_peak_bytes.device): at most the arena's peak.
  std::optional<double> livePeakBytes;
  double bytes[kNumMemoryCategories] = {};
  std::optional<double> stepSeconds;
};

struct Span {
  int64_t rank = 0, stage = 0, microbatch = 0;
  std::string kind; // "forward", "backward" or anything else
  double start = 0, end = 0;
};

struct Schedule {
  std::string kind;
  int64_t microbatches = 0, virtualStages = 1;
  std::optional<int64_t> activeMicrobatches;
  double theoreticalBubble = 0, predictedBubble = 0;
};

struct Plan {
  std::string model;
  int64_t worldSize = 0, data = 1, pipeline = 1, tensor = 1;
  std::optional<std::string> placement;
  std::optional<int64_t> microbatches; // batch.microbatches
  std::optional<Schedule> schedule;
  std::vector<Stage> stages;
  std::vector<Rank> ranks;
  std::vector<Span> timeline; // empty: no pipeline timeline
};

/// Reads the fields of one plan.json object. The first problem is kept with
/// its path ("ranks[2].predicted_memory.activations is not a number") and
/// later reads return zeros, so a caller reads several fields and checks once.
class FieldReader {
public:
  FieldReader(const json::Object &object, std::string path,
              std::string &problem)
      : object(object), path(std::move(path)), problem(problem) {}

  bool has(StringRef key) const { return object.get(key) != nullptr; }

  std::string pathOf(StringRef key) const {
    return path.empty() ? key.str() : path + "." + key.str();
  }

  void report(const Twine &message) {
    if (problem.empty())
      problem = message.str();
  }

  double number(StringRef key) {
    if (const json::Value *value = require(key)) {
      if (std::optional<double> n = value->getAsNumber())
        return *n;
      report(pathOf(key) + " is not a number");
    }
    return 0;
  }

  int64_t integer(StringRef key) {
    if (const json::Value *value = require(key)) {
      if (std::optional<int64_t> n = value->getAsInteger())
        return *n;
      report(pathOf(key) + " is not an integer");
    }
    return 0;
  }

  std::string string(StringRef key) {
    if (const json::Value *value = require(key)) {
      if (std::optional<StringRef> s = value->getAsString())
        return s->str();
      report(pathOf(key) + " is not a string");
    }
    return "";
  }

  std::optional<double> optionalNumber(StringRef key) {
    if (!has(key))
      return std::nullopt;
    return number(key);
  }

  std::optional<int64_t> optionalInteger(StringRef key) {
    if (!has(key))
      return std::nullopt;
    return integer(key);
  }

  /// A reader for the object at `key`; none (and a problem) if it is
  /// missing or not an object.
  std::optional<FieldReader> nested(StringRef key) {
    const json::Value *value = require(key);
    if (!value)
      return std::nullopt;
    if (const json::Object *child = value->getAsObject())
      return FieldReader(*child, pathOf(key), problem);
    report(pathOf(key) + " is not an object");
    return std::nullopt;
  }

  /// Calls `read` with a reader for each element of the array at `key`,
  /// which must hold objects.
  template <typename ReadFn> void forEachObject(StringRef key, ReadFn read) {
    const json::Value *value = require(key);
    if (!value)
      return;
    const json::Array *array = value->getAsArray();
    if (!array)
      return report(pathOf(key) + " is not an array");
    for (size_t i = 0; i < array->size() && problem.empty(); ++i) {
      std::string elementPath = pathOf(key) + "[" + std::to_string(i) + "]";
      const json::Object *element = (*array)[i].getAsObject();
      if (!element)
        return report(elementPath + " is not an object");
      FieldReader reader(*element, elementPath, problem);
      read(reader);
    }
  }

private:
  const json::Value *require(StringRef key) {
    const json::Value *value = object.get(key);
    if (!value)
      report(pathOf(key) + " is missing");
    return value;
  }

  const json::Object &object;
  std::string path;
  std::string &problem;
};

Error planError(const Twine &message) {
  return createStringError(inconvertibleErrorCode(),
                           "plan.json: " + message.str());
}

Expected<Plan> readPlan(const json::Object &object) {
  std::string problem;
  FieldReader plan(object, "", problem);
  Plan result;
  result.model = plan.string("model");
  result.worldSize = plan.integer("world_size");
  if (std::optional<FieldReader> mesh = plan.nested("mesh")) {
    result.data = mesh->integer("data");
    result.pipeline = mesh->integer("pipeline");
    result.tensor = mesh->integer("tensor");
  }
  if (plan.has("placement"))
    result.placement = plan.string("placement");
  if (plan.has("batch"))
    if (std::optional<FieldReader> batch = plan.nested("batch"))
      result.microbatches = batch->optionalInteger("microbatches");
  if (plan.has("schedule")) {
    if (std::optional<FieldReader> schedule = plan.nested("schedule")) {
      Schedule s;
      s.kind = schedule->string("kind");
      s.microbatches = schedule->integer("microbatches");
      s.virtualStages = schedule->integer("virtual_stages");
      s.activeMicrobatches = schedule->optionalInteger("active_microbatches");
      s.theoreticalBubble = schedule->number("theoretical_bubble");
      s.predictedBubble = schedule->number("predicted_bubble");
      result.schedule = s;
    }
  }
  // Data-parallel plans (one stage) may list no stages: the page then draws
  // the whole model as one. A pipeline needs them.
  bool needsStages =
      plan.has("stages") || plan.has("timeline") || result.pipeline > 1;
  if (needsStages)
    plan.forEachObject("stages", [&](FieldReader &stage) {
      Stage s;
      s.stage = stage.integer("stage");
      s.pipelineRank = stage.integer("pipeline_rank");
      s.firstNode = stage.string("first_node");
      s.lastNode = stage.string("last_node");
      s.ops = stage.integer("ops");
      s.parameters = stage.integer("parameters");
      s.parameterBytes = stage.number("parameter_bytes");
      s.forwardSeconds = stage.number("forward_seconds");
      s.backwardSeconds = stage.number("backward_seconds");
      s.sentBytes = stage.number("sent_bytes");
      if (problem.empty() &&
          (s.pipelineRank < 0 || s.pipelineRank >= result.pipeline))
        stage.report(formatv("{0} is {1}, but the mesh has {2} pipeline ranks",
                             stage.pathOf("pipeline_rank"), s.pipelineRank,
                             result.pipeline));
      result.stages.push_back(std::move(s));
    });
  plan.forEachObject("ranks", [&](FieldReader &rank) {
    Rank r;
    r.rank = rank.integer("rank");
    r.dataRank = rank.optionalInteger("data_rank");
    r.pipelineRank = rank.optionalInteger("pipeline_rank");
    r.stepSeconds = rank.optionalNumber("predicted_step_seconds");
    if (std::optional<FieldReader> memory = rank.nested("predicted_memory")) {
      r.peakBytes = memory->number("peak_bytes");
      for (size_t i = 0; i < kNumMemoryCategories; ++i)
        r.bytes[i] = memory->number(kMemoryCategories[i].key);
    }
    if (rank.has("predicted_live_peak_bytes"))
      if (std::optional<FieldReader> live =
              rank.nested("predicted_live_peak_bytes"))
        r.livePeakBytes = live->optionalNumber("device");
    result.ranks.push_back(r);
  });
  if (plan.has("timeline")) {
    plan.forEachObject("timeline", [&](FieldReader &span) {
      Span s;
      s.rank = span.integer("rank");
      s.kind = span.string("kind");
      s.stage = span.integer("stage");
      s.microbatch = span.integer("microbatch");
      s.start = span.number("start");
      s.end = span.number("end");
      if (!problem.empty())
        return;
      if (s.rank < 0 || s.rank >= result.pipeline)
        span.report(formatv("{0} is {1}, but the mesh has {2} pipeline ranks",
                            span.pathOf("rank"), s.rank, result.pipeline));
      else if (s.start < 0)
        span.report(span.pathOf("start") + " is negative");
      else if (s.end < s.start)
        span.report(span.pathOf("end") + " is before its start");
      else if (none_of(result.stages,
                       [&](const Stage &st) { return st.stage == s.stage; }))
        span.report(formatv("{0} is {1}, which is not in stages",
                            span.pathOf("stage"), s.stage));
      result.timeline.push_back(std::move(s));
    });
  }
  if (problem.empty() && needsStages && result.stages.empty())
    problem = "stages is empty";
  if (problem.empty() && result.ranks.empty())
    problem = "ranks is empty";
  if (problem.empty() && result.pipeline < 1)
    problem =
        formatv("mesh.pipeline is {0}, expected at least 1", result.pipeline);
  if (!problem.empty())
    return planError(problem);
  return result;
}

//===----------------------------------------------------------------------===//
// Text, numbers and colours
//===----------------------------------------------------------------------===//

std::string escape(StringRef text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    case '\'':
      out += "&#39;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

/// Three significant digits: "812 B", "4.58 MiB", "45.8 MiB", "1.25 GiB".
std::string formatBytes(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  size_t unit = 0;
  while (std::fabs(bytes) >= 1024 && unit + 1 < std::size(units)) {
    bytes /= 1024;
    ++unit;
  }
  if (unit == 0)
    return formatv("{0:f0} B", bytes);
  const char *style = std::fabs(bytes) < 10    ? "{0:f2} {1}"
                      : std::fabs(bytes) < 100 ? "{0:f1} {1}"
                                               : "{0:f0} {1}";
  return formatv(style, bytes, units[unit]);
}

/// Three significant digits: "60.6 µs", "1.30 ms", "43.6 ms"; "12.3 s".
std::string formatSeconds(double seconds) {
  if (seconds >= 10)
    return formatv("{0:f1} s", seconds);
  if (seconds > 0 && seconds < 1e-3) {
    double us = seconds * 1e6;
    const char *style = us < 10    ? "{0:f2} µs"
                        : us < 100 ? "{0:f1} µs"
                                   : "{0:f0} µs";
    return formatv(style, us);
  }
  double ms = seconds * 1e3;
  const char *style = ms < 10    ? "{0:f2} ms"
                      : ms < 100 ? "{0:f1} ms"
                                 : "{0:f0} ms";
  return formatv(style, ms);
}

std::string formatPercent(double fraction) {
  return formatv("{0:f1}%", fraction * 100);
}

/// An SVG coordinate: one decimal is finer than a pixel and keeps pages small.
std::string px(double x) { return formatv("{0:f1}", x); }

/// A round step (1, 2 or 5 times a power of ten) cutting `range` into about
/// `pieces` pieces, for axis ticks.
double niceStep(double range, double pieces) {
  if (range <= 0)
    return 1;
  double raw = range / pieces;
  double power = std::pow(10, std::floor(std::log10(raw)));
  double f = raw / power;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * power;
}

/// A tick label with only the decimals that `step` needs.
std::string formatTick(double value, double step) {
  int decimals = step >= 1 ? 0 : int(std::ceil(-std::log10(step) - 1e-9));
  std::string out;
  raw_string_ostream(out) << format("%.*f", decimals, value);
  return out;
}

struct Colour {
  double r, g, b;
};

Colour colourOf(uint32_t rgb) {
  return {double(rgb >> 16 & 0xff), double(rgb >> 8 & 0xff),
          double(rgb & 0xff)};
}

/// `c` moved a fraction `t` of the way to white.
Colour lighten(Colour c, double t) {
  return {c.r + (255 - c.r) * t, c.g + (255 - c.g) * t, c.b + (255 - c.b) * t};
}

std::string css(Colour c) {
  std::string out;
  raw_string_ostream os(out);
  os << format("#%02x%02x%02x", int(std::lround(c.r)), int(std::lround(c.g)),
               int(std::lround(c.b)));
  return os.str();
}

/// Dark text on light fills, white on dark ones.
const char *textColourOn(Colour c) {
  return 0.299 * c.r + 0.587 * c.g + 0.114 * c.b > 150 ? "#1d2330" : "#ffffff";
}

/// The shade of chunk `chunk` of `chunks` (virtual stages on one rank): the
/// first chunk in full colour, later ones lighter.
Colour chunkShade(Colour base, int64_t chunk, int64_t chunks) {
  if (chunks <= 1)
    return base;
  return lighten(base, 0.55 * double(chunk) / double(chunks - 1));
}

/// Roughly how wide `text` is at `fontSize` px, to decide whether a label fits.
double textWidth(StringRef text, double fontSize) {
  return double(text.size()) * fontSize * 0.6;
}

//===----------------------------------------------------------------------===//
// The page
//===----------------------------------------------------------------------===//

constexpr const char *kStyle = R"(
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif;
       margin: 24px 32px; color: #1d2330; background: #ffffff; }
h1 { font-size: 22px; margin: 0 0 12px; }
h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid #dde2ea; padding-bottom: 4px; }
.cards { display: flex; flex-wrap: wrap; gap: 6px; }
.card { border: 1px solid #dde2ea; border-radius: 6px; padding: 5px 10px; background: #f7f9fb; }
.card .k { font-size: 10px; color: #5b6472; text-transform: uppercase; letter-spacing: .03em; }
.card .v { font-size: 16px; font-weight: 600; }
.card .v small { font-weight: 400; color: #5b6472; }
table { border-collapse: collapse; font-size: 13px; margin-top: 10px; }
th { text-align: left; font-weight: 600; color: #5b6472; border-bottom: 2px solid #dde2ea; }
th, td { padding: 3px 10px; }
td { border-bottom: 1px solid #eceff3; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
.node { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12px; }
.note { color: #5b6472; font-size: 13px; margin: 4px 0; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 16px; font-size: 13px; margin: 6px 0; }
.legend span.sw { display: inline-block; width: 12px; height: 12px; border-radius: 2px;
                  vertical-align: -1px; margin-right: 5px; border: 1px solid rgba(0,0,0,.15); }
.scroll { overflow-x: auto; }
.frame { display: flex; align-items: flex-start; }
.frame > .scroll { min-width: 0; flex: 0 1 auto; }
.frame svg { flex: none; }
svg text { font-family: inherit; }
)";

void writeCard(raw_ostream &os, StringRef key, StringRef valueHtml) {
  os << "<div class=\"card\"><div class=\"k\">" << key
     << "</div><div class=\"v\">" << valueHtml << "</div></div>\n";
}

void writeLegendItem(raw_ostream &os, StringRef fill, StringRef labelHtml) {
  os << "<span><span class=\"sw\" style=\"background:" << fill << "\"></span>"
     << labelHtml << "</span>\n";
}

/// The predicted step: the slowest rank's, else the timeline's length.
std::optional<double> stepSeconds(const Plan &plan) {
  std::optional<double> step;
  for (const Rank &rank : plan.ranks)
    if (rank.stepSeconds)
      step = std::max(step.value_or(0), *rank.stepSeconds);
  if (!step && !plan.timeline.empty())
    for (const Span &span : plan.timeline)
      step = std::max(step.value_or(0), span.end);
  return step;
}

void writeHeader(raw_ostream &os, const Plan &plan) {
  os << "<h1>Cleave plan: " << escape(sys::path::filename(plan.model))
     << "</h1>\n<div class=\"cards\">\n";
  writeCard(os, "model", escape(plan.model));
  writeCard(
      os, "mesh (data × pipeline × tensor)",
      formatv("{0} × {1} × {2}", plan.data, plan.pipeline, plan.tensor).str());
  std::string world = std::to_string(plan.worldSize);
  if (plan.placement)
    world += " <small>placement " + escape(*plan.placement) + "</small>";
  writeCard(os, "world size", world);
  if (const std::optional<Schedule> &s = plan.schedule) {
    writeCard(os, "schedule", escape(s->kind));
    std::string microbatches = std::to_string(s->microbatches);
    if (s->activeMicrobatches.value_or(0) > 0) // 0: all of them
      microbatches +=
          formatv(" <small>{0} in flight</small>", *s->activeMicrobatches)
              .str();
    writeCard(os, "microbatches", microbatches);
    writeCard(os, "virtual stages", std::to_string(s->virtualStages));
  } else {
    writeCard(os, "schedule", "none <small>(one stage)</small>");
    if (plan.microbatches)
      writeCard(os, "microbatches", std::to_string(*plan.microbatches));
  }
  std::optional<double> step = stepSeconds(plan);
  writeCard(os, "predicted step", step ? formatSeconds(*step) : "—");
  if (plan.schedule)
    writeCard(os, "bubble (predicted vs theoretical)",
              formatPercent(plan.schedule->predictedBubble) + " <small>vs " +
                  formatPercent(plan.schedule->theoreticalBubble) + "</small>");
  os << "</div>\n";
}

/// The colour of pipeline rank `rank` in the partition bar.
Colour rankColour(int64_t rank) {
  const uint32_t palette[] = {0x4e79a7, 0x59a14f, 0xb07aa1, 0x9c755f,
                              0x76b7b2, 0xedc948, 0xff9da7, 0xe15759};
  return colourOf(palette[rank % std::size(palette)]);
}

/// Which of its rank's stages `stage` is (0 for the first chunk), and how
/// many that rank holds: interleaved schedules give a rank several.
struct Chunk {
  int64_t index = 0, count = 1;
};

DenseMap<int64_t, Chunk> chunksOf(const std::vector<Stage> &stages) {
  DenseMap<int64_t, std::vector<int64_t>> byRank;
  for (const Stage &s : stages)
    byRank[s.pipelineRank].push_back(s.stage);
  DenseMap<int64_t, Chunk> chunks;
  for (auto &entry : byRank) {
    std::vector<int64_t> &ids = entry.second;
    llvm::sort(ids);
    for (size_t i = 0; i < ids.size(); ++i)
      chunks[ids[i]] = {int64_t(i), int64_t(ids.size())};
  }
  return chunks;
}

/// The two lines a partition block carries.
struct BlockLabel {
  std::string title, detail;
};

/// Form 0 is the longest; later forms fit narrower blocks.
constexpr int kBlockLabelForms = 5;
BlockLabel blockLabel(const Stage &s, int form) {
  std::string time = formatSeconds(s.forwardSeconds + s.backwardSeconds);
  switch (form) {
  case 0:
    return {formatv("stage {0} · rank {1}", s.stage, s.pipelineRank), time};
  case 1:
    return {formatv("stage {0}", s.stage),
            formatv("rank {0} · {1}", s.pipelineRank, time)};
  case 2:
    return {formatv("stage {0}", s.stage), formatv("rank {0}", s.pipelineRank)};
  case 3:
    return {formatv("S{0}", s.stage), formatv("r{0}", s.pipelineRank)};
  default:
    return {std::to_string(s.stage), ""};
  }
}

bool fits(const BlockLabel &label, double width) {
  return textWidth(label.title, 12) + 6 <= width &&
         textWidth(label.detail, 11) + 6 <= width;
}

/// A plan that lists no stages runs the whole model on every rank.
void writeWholeModelPartition(raw_ostream &os) {
  Colour fill = rankColour(0);
  os << "<p class=\"note\">One stage: every rank runs the whole model "
        "(plan.json lists no per-stage figures).</p>\n"
        "<svg class=\"partition\" width=\"1102\" height=\"48\" "
        "xmlns=\"http://www.w3.org/2000/svg\">\n<g class=\"stage-block\">"
        "<rect x=\"1\" y=\"1\" width=\"1100\" height=\"46\" fill=\""
     << css(fill) << "\"/><text x=\"551\" y=\"29\" text-anchor=\"middle\" "
     << "font-size=\"12\" font-weight=\"600\" fill=\"" << textColourOn(fill)
     << "\">stage 0 · the whole model</text></g>\n</svg>\n";
}

void writePartition(raw_ostream &os, const Plan &plan,
                    const DenseMap<int64_t, Chunk> &chunks) {
  constexpr double barWidth = 1100, barHeight = 46, minBlock = 3;
  os << "<h2>Partition</h2>\n";
  if (plan.stages.empty())
    return writeWholeModelPartition(os);
  double total = 0;
  for (const Stage &s : plan.stages)
    total += s.forwardSeconds + s.backwardSeconds;
  os << "<p class=\"note\">" << plan.stages.size()
     << (plan.stages.size() == 1 ? " stage" : " stages")
     << "; block widths are proportional to forward + backward time per "
        "microbatch ("
     << formatSeconds(total) << " in all), coloured by pipeline rank.</p>\n";

  std::vector<double> widths;
  for (const Stage &s : plan.stages) {
    double share = total > 0 ? (s.forwardSeconds + s.backwardSeconds) / total
                             : 1.0 / double(plan.stages.size());
    widths.push_back(std::max(minBlock, share * barWidth));
  }
  double svgWidth = 0;
  for (double w : widths)
    svgWidth += w;
  os << "<div class=\"scroll\"><svg class=\"partition\" width=\""
     << px(svgWidth + 2) << "\" height=\"" << px(barHeight + 2)
     << "\" xmlns=\"http://www.w3.org/2000/svg\">\n";
  // One label form for the whole bar, the longest that every block but the
  // slivers holds, so the blocks read alike.
  int form = 0;
  for (; form + 1 < kBlockLabelForms; ++form)
    if (all_of(llvm::seq<size_t>(0, plan.stages.size()), [&](size_t i) {
          return widths[i] < 40 ||
                 fits(blockLabel(plan.stages[i], form), widths[i]);
        }))
      break;
  double x = 1;
  for (size_t i = 0; i < plan.stages.size(); ++i) {
    const Stage &s = plan.stages[i];
    double w = widths[i];
    Chunk chunk = chunks.lookup(s.stage);
    Colour fill =
        chunkShade(rankColour(s.pipelineRank), chunk.index, chunk.count);
    os << "<g class=\"stage-block\"><title>"
       << formatv("stage {0} on pipeline rank {1}: {2} … {3}, {4} ops, "
                  "forward {5}, backward {6}",
                  s.stage, s.pipelineRank, escape(s.firstNode),
                  escape(s.lastNode), s.ops, formatSeconds(s.forwardSeconds),
                  formatSeconds(s.backwardSeconds))
       << "</title><rect x=\"" << px(x) << "\" y=\"1\" width=\"" << px(w)
       << "\" height=\"" << px(barHeight) << "\" fill=\"" << css(fill)
       << "\" stroke=\"#ffffff\" stroke-width=\"1.5\"/>";
    std::optional<BlockLabel> label;
    for (int f = form; f < kBlockLabelForms && !label; ++f)
      if (BlockLabel candidate = blockLabel(s, f); fits(candidate, w))
        label = candidate;
    const char *ink = textColourOn(fill);
    if (label) {
      os << "<text x=\"" << px(x + w / 2)
         << "\" y=\"20\" text-anchor=\"middle\" "
         << "font-size=\"12\" font-weight=\"600\" fill=\"" << ink << "\">"
         << label->title << "</text>";
      if (!label->detail.empty())
        os << "<text x=\"" << px(x + w / 2)
           << "\" y=\"37\" text-anchor=\"middle\" "
           << "font-size=\"11\" fill=\"" << ink << "\">" << label->detail
           << "</text>";
    }
    os << "</g>\n";
    x += w;
  }
  os << "</svg></div>\n";

  os << "<table>\n<tr><th>stage</th><th>rank</th><th>first node</th>"
        "<th>last node</th><th class=\"num\">ops</th>"
        "<th class=\"num\">parameters</th><th class=\"num\">parameter "
        "bytes</th>"
        "<th class=\"num\">forward</th><th class=\"num\">backward</th>"
        "<th class=\"num\">sent to next</th></tr>\n";
  for (const Stage &s : plan.stages) {
    os << "<tr><td class=\"num\">" << s.stage << "</td><td class=\"num\">"
       << s.pipelineRank << "</td><td class=\"node\">" << escape(s.firstNode)
       << "</td><td class=\"node\">" << escape(s.lastNode)
       << "</td><td class=\"num\">" << s.ops << "</td><td class=\"num\">"
       << s.parameters << "</td><td class=\"num\">"
       << formatBytes(s.parameterBytes) << "</td><td class=\"num\">"
       << formatSeconds(s.forwardSeconds) << "</td><td class=\"num\">"
       << formatSeconds(s.backwardSeconds) << "</td><td class=\"num\">"
       << (s.sentBytes > 0 ? formatBytes(s.sentBytes) : "—") << "</td></tr>\n";
  }
  os << "</table>\n";
}

/// A unit for an axis of bytes whose largest value is `bytes`.
std::pair<double, const char *> byteAxisUnit(double bytes) {
  if (bytes >= 1024.0 * 1024 * 1024)
    return {1024.0 * 1024 * 1024, "GiB"};
  if (bytes >= 1024.0 * 1024)
    return {1024.0 * 1024, "MiB"};
  if (bytes >= 1024)
    return {1024, "KiB"};
  return {1, "B"};
}

std::string rankLabel(const Rank &rank) {
  return formatv("rank {0}", rank.rank);
}

void writeMemory(raw_ostream &os, const Plan &plan) {
  constexpr double labelWidth = 150, barWidth = 860, peakWidth = 250;
  constexpr double rowHeight = 24, barHeight = 17, axisHeight = 40;
  os << "<h2>Memory per rank</h2>\n<div class=\"legend\">\n";
  for (const MemoryCategory &category : kMemoryCategories)
    writeLegendItem(os, css(colourOf(category.colour)), category.label);
  writeLegendItem(os, "#1d2330", "peak (marker and figure)");
  if (llvm::any_of(plan.ranks, [](const Rank &r) { return r.livePeakBytes; }))
    writeLegendItem(os, "#8a93a3",
                    "live peak (dashed): the most bytes of live tensors at "
                    "once, what cleave-run measures; the arena's peak adds "
                    "alignment and first-fit holes");
  os << "</div>\n";

  double largest = 0;
  for (const Rank &rank : plan.ranks) {
    double sum = 0;
    for (double b : rank.bytes)
      sum += b;
    largest = std::max({largest, sum, rank.peakBytes});
  }
  double scale = largest > 0 ? barWidth / largest : 0;
  double height = rowHeight * double(plan.ranks.size()) + axisHeight;
  double width = labelWidth + barWidth + peakWidth;
  os << "<div class=\"scroll\"><svg class=\"memory\" width=\"" << px(width)
     << "\" height=\"" << px(height)
     << "\" xmlns=\"http://www.w3.org/2000/svg\">\n";

  // Grid and axis first, so the bars draw over the grid lines.
  double plotBottom = rowHeight * double(plan.ranks.size());
  auto [unit, unitName] = byteAxisUnit(largest);
  double step = niceStep(largest / unit, 8);
  for (double v = 0; largest > 0 && v * unit <= largest * 1.0001; v += step) {
    double x = labelWidth + v * unit * scale;
    os << "<line x1=\"" << px(x) << "\" y1=\"0\" x2=\"" << px(x) << "\" y2=\""
       << px(plotBottom + 4) << "\" stroke=\"#e4e8ee\"/>"
       << "<text x=\"" << px(x) << "\" y=\"" << px(plotBottom + 17)
       << "\" text-anchor=\"middle\" font-size=\"11\" fill=\"#5b6472\">"
       << formatTick(v, step) << "</text>\n";
  }
  os << "<text x=\"" << px(labelWidth) << "\" y=\"" << px(plotBottom + 32)
     << "\" font-size=\"12\" fill=\"#5b6472\">memory (" << unitName
     << ")</text>\n";

  for (size_t i = 0; i < plan.ranks.size(); ++i) {
    const Rank &rank = plan.ranks[i];
    double y = rowHeight * double(i) + (rowHeight - barHeight) / 2;
    double textY = y + barHeight / 2 + 4;
    os << "<g class=\"memory-row\"><text x=\"0\" y=\"" << px(textY)
       << "\" font-size=\"12\" font-weight=\"600\">" << rankLabel(rank)
       << "</text>";
    if (rank.pipelineRank || rank.dataRank) {
      std::string where;
      if (rank.pipelineRank)
        where += formatv("pp {0}", *rank.pipelineRank).str();
      if (rank.dataRank)
        where +=
            formatv("{0}dp {1}", where.empty() ? "" : " · ", *rank.dataRank)
                .str();
      os << "<text x=\"56\" y=\"" << px(textY)
         << "\" font-size=\"11\" fill=\"#5b6472\">" << where << "</text>";
    }
    double x = labelWidth;
    for (size_t c = 0; c < kNumMemoryCategories; ++c) {
      double w = rank.bytes[c] * scale;
      if (w <= 0)
        continue;
      // Small categories still show: a sliver of at least one pixel.
      w = std::max(w, 1.0);
      Colour fill = colourOf(kMemoryCategories[c].colour);
      os << "<rect x=\"" << px(x) << "\" y=\"" << px(y) << "\" width=\""
         << px(w) << "\" height=\"" << px(barHeight) << "\" fill=\""
         << css(fill) << "\"><title>"
         << formatv("{0} · {1}: {2}", rankLabel(rank),
                    kMemoryCategories[c].label, formatBytes(rank.bytes[c]))
         << "</title></rect>";
      std::string figure = formatBytes(rank.bytes[c]);
      if (textWidth(figure, 10) + 6 <= w)
        os << "<text x=\"" << px(x + w / 2) << "\" y=\"" << px(textY - 1)
           << "\" text-anchor=\"middle\" font-size=\"10\" fill=\""
           << textColourOn(fill) << "\">" << figure << "</text>";
      x += w;
    }
    double peakX = labelWidth + rank.peakBytes * scale;
    if (rank.livePeakBytes) {
      double liveX = labelWidth + *rank.livePeakBytes * scale;
      os << "<line class=\"live-peak\" x1=\"" << px(liveX) << "\" y1=\""
         << px(y - 2) << "\" x2=\"" << px(liveX) << "\" y2=\""
         << px(y + barHeight + 2)
         << "\" stroke=\"#8a93a3\" stroke-width=\"2\" stroke-dasharray=\"3 2\">"
         << "<title>"
         << formatv("{0} · live peak {1}", rankLabel(rank),
                    formatBytes(*rank.livePeakBytes))
         << "</title></line>";
    }
    os << "<line class=\"peak\" x1=\"" << px(peakX) << "\" y1=\"" << px(y - 2)
       << "\" x2=\"" << px(peakX) << "\" y2=\"" << px(y + barHeight + 2)
       << "\" stroke=\"#1d2330\" stroke-width=\"2\"/>";
    os << "<text x=\"" << px(std::max(x, peakX) + 8) << "\" y=\"" << px(textY)
       << "\" font-size=\"12\" font-weight=\"600\">peak "
       << formatBytes(rank.peakBytes);
    if (rank.livePeakBytes)
      os << "<tspan font-weight=\"400\" fill=\"#5b6472\"> · live "
         << formatBytes(*rank.livePeakBytes) << "</tspan>";
    os << "</text></g>\n";
  }
  os << "</svg></div>\n";
}

/// The fill of a timeline box: forward blue, backward orange, anything else
/// grey-violet; later chunks of a rank lighter.
Colour spanColour(StringRef kind, Chunk chunk) {
  uint32_t base = kind == "forward"    ? 0x2f6db5
                  : kind == "backward" ? 0xe0701e
                                       : 0x8a7fa8;
  return chunkShade(colourOf(base), chunk.index, chunk.count);
}

/// The fraction of [0, makespan] in which `spans` (one rank's) do nothing.
double idleFraction(std::vector<const Span *> spans, double makespan) {
  if (makespan <= 0)
    return 0;
  llvm::sort(spans,
             [](const Span *a, const Span *b) { return a->start < b->start; });
  double busy = 0, coveredTo = -INFINITY;
  for (const Span *s : spans) {
    double from = std::max(s->start, coveredTo);
    if (s->end > from)
      busy += s->end - from;
    coveredTo = std::max(coveredTo, s->end);
  }
  return std::max(0.0, 1 - busy / makespan);
}

/// How the timeline maps time to pixels, and the rows' geometry.
struct TimelineLayout {
  static constexpr double rowHeight = 26, rowGap = 6, axisHeight = 34;
  static constexpr double labelWidth = 120, idleWidth = 96;
  static constexpr double padding = 12; // keeps the first and last tick label
  double makespan = 0, plotWidth = 0, scale = 0;

  double rowTop(int64_t rank) const {
    return double(rank) * (rowHeight + rowGap);
  }
  double x(double seconds) const { return padding + seconds * scale; }
};

/// Wide enough that a typical forward box holds its microbatch number; a
/// long schedule scrolls sideways rather than shrinking its boxes away.
TimelineLayout layoutTimeline(const std::vector<Span> &timeline) {
  constexpr double minPlot = 1000, maxPlot = 6000, labelledBox = 20;
  TimelineLayout layout;
  std::vector<double> durations;
  for (const Span &s : timeline) {
    layout.makespan = std::max(layout.makespan, s.end);
    durations.push_back(s.end - s.start);
  }
  llvm::sort(durations);
  // A short box, but not the shortest: one tiny span must not stretch the page.
  double typical = durations[durations.size() / 10];
  layout.plotWidth = minPlot;
  if (layout.makespan > 0 && typical > 0)
    layout.plotWidth =
        std::clamp(labelledBox * layout.makespan / typical, minPlot, maxPlot);
  layout.scale = layout.makespan > 0 ? layout.plotWidth / layout.makespan : 0;
  return layout;
}

void writeTimelineLegend(raw_ostream &os, const Plan &plan,
                         const DenseMap<int64_t, Chunk> &chunks,
                         double makespan) {
  int64_t maxChunks = 1;
  for (const auto &entry : chunks)
    maxChunks = std::max(maxChunks, entry.second.count);
  std::vector<std::string> otherKinds;
  for (const Span &s : plan.timeline)
    if (s.kind != "forward" && s.kind != "backward" &&
        !is_contained(otherKinds, s.kind))
      otherKinds.push_back(s.kind);
  os << "<div class=\"legend\">\n";
  for (StringRef kind : {"forward", "backward"})
    for (int64_t c = 0; c < maxChunks; ++c) {
      std::string label = kind.str();
      if (maxChunks > 1)
        label += formatv(", chunk {0} (stages {1}–{2})", c + 1,
                         c * plan.pipeline, (c + 1) * plan.pipeline - 1)
                     .str();
      writeLegendItem(os, css(spanColour(kind, {c, maxChunks})), label);
    }
  for (const std::string &kind : otherKinds)
    writeLegendItem(os, css(spanColour(kind, {})), escape(kind));
  writeLegendItem(os, "#eceff3", "idle");
  os << "</div>\n<p class=\"note\">One data-parallel replica over the "
        "predicted step ("
     << formatSeconds(makespan)
     << "); boxes are labelled with their microbatch; the figure at each "
        "row's end is the rank's idle fraction.</p>\n";
}

/// The left column: each row's rank and the stages it holds.
void writeTimelineLabels(raw_ostream &os, const Plan &plan,
                         const TimelineLayout &layout, double height) {
  os << "<svg class=\"timeline-labels\" width=\"" << px(layout.labelWidth)
     << "\" height=\"" << px(height)
     << "\" xmlns=\"http://www.w3.org/2000/svg\">\n";
  for (int64_t r = 0; r < plan.pipeline; ++r) {
    std::vector<std::string> held;
    for (const Stage &s : plan.stages)
      if (s.pipelineRank == r)
        held.push_back(std::to_string(s.stage));
    double y = layout.rowTop(r);
    os << "<text x=\"0\" y=\"" << px(y + 12)
       << "\" font-size=\"12\" font-weight=\"600\">rank " << r
       << "</text><text x=\"0\" y=\"" << px(y + 24)
       << "\" font-size=\"10\" fill=\"#5b6472\">"
       << (held.size() == 1 ? "stage " : "stages ") << join(held, ", ")
       << "</text>\n";
  }
  os << "</svg>\n";
}

/// The plot: rows' idle background, the time grid and axis, then the boxes.
void writeTimelinePlot(raw_ostream &os, const Plan &plan,
                       const DenseMap<int64_t, Chunk> &chunks,
                       const TimelineLayout &layout, double height) {
  constexpr double minBox = 2;
  const double rowHeight = layout.rowHeight, rowGap = layout.rowGap;
  double rowsHeight = layout.rowTop(plan.pipeline);
  double plotRight = layout.x(layout.makespan);
  os << "<svg class=\"timeline\" width=\""
     << px(layout.plotWidth + 2 * layout.padding) << "\" height=\""
     << px(height) << "\" xmlns=\"http://www.w3.org/2000/svg\">\n";
  for (int64_t r = 0; r < plan.pipeline; ++r)
    os << "<rect x=\"" << px(layout.x(0)) << "\" y=\"" << px(layout.rowTop(r))
       << "\" width=\"" << px(layout.plotWidth) << "\" height=\""
       << px(rowHeight) << "\" fill=\"#eceff3\"/>\n";

  double step = niceStep(layout.makespan * 1e3, layout.plotWidth / 90);
  for (double ms = 0; ms <= layout.makespan * 1e3 * 1.0001; ms += step) {
    double x = layout.x(ms * 1e-3);
    os << "<line x1=\"" << px(x) << "\" y1=\"0\" x2=\"" << px(x) << "\" y2=\""
       << px(rowsHeight - rowGap) << "\" stroke=\"#ffffff\"/><line x1=\""
       << px(x) << "\" y1=\"" << px(rowsHeight - rowGap) << "\" x2=\"" << px(x)
       << "\" y2=\"" << px(rowsHeight) << "\" stroke=\"#5b6472\"/><text x=\""
       << px(x) << "\" y=\"" << px(rowsHeight + 12)
       << "\" text-anchor=\"middle\" font-size=\"11\" fill=\"#5b6472\">"
       << formatTick(ms, step) << "</text>\n";
  }
  os << "<line x1=\"" << px(layout.x(0)) << "\" y1=\""
     << px(rowsHeight - rowGap) << "\" x2=\"" << px(plotRight) << "\" y2=\""
     << px(rowsHeight - rowGap) << "\" stroke=\"#5b6472\"/><text x=\""
     << px(layout.x(0)) << "\" y=\"" << px(rowsHeight + 28)
     << "\" font-size=\"12\" fill=\"#5b6472\">time (ms)</text>\n";

  for (const Span &s : plan.timeline) {
    double y = layout.rowTop(s.rank);
    double x = layout.x(s.start);
    double w = std::max(minBox, (s.end - s.start) * layout.scale);
    Colour fill = spanColour(s.kind, chunks.lookup(s.stage));
    StringRef cls = s.kind == "forward"    ? "forward"
                    : s.kind == "backward" ? "backward"
                                           : "other";
    os << "<g class=\"span " << cls << "\"><title>"
       << formatv("{0} · stage {1} · microbatch {2} · {3} ({4} – {5})",
                  escape(s.kind), s.stage, s.microbatch,
                  formatSeconds(s.end - s.start), formatSeconds(s.start),
                  formatSeconds(s.end))
       << "</title><rect x=\"" << px(x) << "\" y=\"" << px(y + 1)
       << "\" width=\"" << px(w) << "\" height=\"" << px(rowHeight - 2)
       << "\" fill=\"" << css(fill)
       << "\" stroke=\"#ffffff\" stroke-width=\"0.75\"/>";
    std::string label = std::to_string(s.microbatch);
    if (textWidth(label, 11) + 4 <= w)
      os << "<text x=\"" << px(x + w / 2) << "\" y=\""
         << px(y + rowHeight / 2 + 4) << "\" text-anchor=\"middle\" "
         << "font-size=\"11\" fill=\"" << textColourOn(fill) << "\">" << label
         << "</text>";
    os << "</g>\n";
  }
  os << "</svg>\n";
}

/// The right column: each rank's idle fraction of the step.
void writeTimelineIdle(raw_ostream &os, const Plan &plan,
                       const TimelineLayout &layout, double height) {
  std::vector<std::vector<const Span *>> byRank(plan.pipeline);
  for (const Span &s : plan.timeline)
    byRank[s.rank].push_back(&s);
  os << "<svg class=\"timeline-idle\" width=\"" << px(layout.idleWidth)
     << "\" height=\"" << px(height)
     << "\" xmlns=\"http://www.w3.org/2000/svg\">\n";
  for (int64_t r = 0; r < plan.pipeline; ++r)
    os << "<text x=\"6\" y=\""
       << px(layout.rowTop(r) + layout.rowHeight / 2 + 4)
       << "\" font-size=\"12\">idle <tspan font-weight=\"600\">"
       << formatPercent(idleFraction(byRank[r], layout.makespan))
       << "</tspan></text>\n";
  os << "</svg>\n";
}

/// One row per pipeline rank: labels and idle fractions stay in view while a
/// long plot scrolls between them.
void writeTimeline(raw_ostream &os, const Plan &plan,
                   const DenseMap<int64_t, Chunk> &chunks) {
  os << "<h2>Pipeline timeline</h2>\n";
  if (plan.timeline.empty()) {
    os << "<p class=\"note\">There is no pipeline timeline: the plan has "
       << (plan.stages.size() <= 1 ? "one stage" : "no pipeline schedule")
       << ", so every rank runs each microbatch's forward and backward "
          "without waiting on another rank.</p>\n";
    return;
  }
  TimelineLayout layout = layoutTimeline(plan.timeline);
  writeTimelineLegend(os, plan, chunks, layout.makespan);
  double height = layout.rowTop(plan.pipeline) + layout.axisHeight;
  os << "<div class=\"frame\">\n";
  writeTimelineLabels(os, plan, layout, height);
  os << "<div class=\"scroll\">\n";
  writeTimelinePlot(os, plan, chunks, layout, height);
  os << "</div>\n";
  writeTimelineIdle(os, plan, layout, height);
  os << "</div>\n";
}

} // namespace

/// The device arena in use over one step's ops, per stage (plan.json's
/// stages[].memory_timeline, from the memory plan's offsets and lifetimes):
/// a line per stage, the functions' bounds marked, the peak named. Plans
/// without it (older ones) render without the section.
void writeMemoryTimeline(raw_ostream &os, const json::Object &planObject) {
  const json::Array *stages = planObject.getArray("stages");
  if (!stages)
    return;
  struct Line {
    int64_t stage = 0;
    std::vector<double> bytes;
    // Had remat and offload not run (bytes_without_remat), else empty.
    std::vector<double> without;
    std::vector<std::pair<size_t, std::string>> starts; // function bounds
  };
  std::vector<Line> lines;
  for (const json::Value &v : *stages) {
    const json::Object *stage = v.getAsObject();
    const json::Array *functions =
        stage ? stage->getArray("memory_timeline") : nullptr;
    if (!functions)
      continue;
    Line line;
    line.stage = stage->getInteger("stage").value_or(0);
    bool anyWithout = false;
    for (const json::Value &f : *functions) {
      const json::Object *fn = f.getAsObject();
      const json::Array *bytes = fn ? fn->getArray("bytes") : nullptr;
      if (!bytes)
        continue;
      line.starts.push_back(
          {line.bytes.size(), fn->getString("function").value_or("").str()});
      const json::Array *without = fn->getArray("bytes_without_remat");
      anyWithout |= without != nullptr;
      if (!without || without->size() != bytes->size())
        without = bytes;
      for (const json::Value &b : *bytes)
        line.bytes.push_back(b.getAsNumber().value_or(0));
      for (const json::Value &b : *without)
        line.without.push_back(b.getAsNumber().value_or(0));
    }
    if (!anyWithout)
      line.without.clear();
    if (!line.bytes.empty())
      lines.push_back(std::move(line));
  }
  if (lines.empty())
    return;
  os << "<h2>Device memory over one step</h2>\n<p class=\"note\">The "
        "device arena in use at each op of one microbatch's forward and "
        "backward and the optimizer (parameters, gradients, optimizer state, "
        "inputs and the activation slots are the floor; the activations "
        "above them), from the memory plan. Its highest point is the "
        "stage's predicted peak. Where the plan recomputes or offloads "
        "activations, the dashed grey line is the same step without "
        "(activation checkpointing and offload undone).</p>\n";
  constexpr double width = 860, height = 120, left = 150;
  for (const Line &line : lines) {
    double top = *std::max_element(line.bytes.begin(), line.bytes.end());
    size_t at = std::max_element(line.bytes.begin(), line.bytes.end()) -
                line.bytes.begin();
    double topWithout =
        line.without.empty()
            ? 0
            : *std::max_element(line.without.begin(), line.without.end());
    double scale = std::max(top, topWithout) > 0
                       ? height / std::max(top, topWithout)
                       : 0;
    double step = line.bytes.size() > 1 ? width / (line.bytes.size() - 1) : 0;
    os << "<svg class=\"memory-timeline\" width=\"" << px(left + width + 20)
       << "\" height=\"" << px(height + 30) << "\">\n";
    os << "<text x=\"0\" y=\"" << px(height / 2) << "\" font-size=\"12\">stage "
       << line.stage << "</text>\n";
    for (auto &[index, name] : line.starts)
      os << "<line x1=\"" << px(left + index * step) << "\" y1=\"0\" x2=\""
         << px(left + index * step) << "\" y2=\"" << px(height)
         << "\" stroke=\"#bbb\"/><text x=\"" << px(left + index * step + 2)
         << "\" y=\"" << px(height + 14) << "\" font-size=\"10\">"
         << escape(name) << "</text>\n";
    if (!line.without.empty()) {
      os << "<polyline fill=\"none\" stroke=\"#999\" "
            "stroke-dasharray=\"4 3\" points=\"";
      for (size_t i = 0; i < line.without.size(); ++i)
        os << px(left + i * step) << "," << px(height - line.without[i] * scale)
           << " ";
      os << "\"/>\n<text x=\"" << px(left + width - 260) << "\" y=\"10\" "
         << "font-size=\"12\" fill=\"#777\">without remat/offload: peak "
         << formatBytes(topWithout) << "</text>\n";
    }
    os << "<polyline fill=\"none\" stroke=\"#e15759\" points=\"";
    for (size_t i = 0; i < line.bytes.size(); ++i)
      os << px(left + i * step) << "," << px(height - line.bytes[i] * scale)
         << " ";
    os << "\"/>\n<text x=\"" << px(left + at * step) << "\" y=\"10\" "
       << "font-size=\"12\" font-weight=\"600\">peak " << formatBytes(top)
       << "</text>\n</svg>\n";
    os << "<!-- memory-timeline stage=" << line.stage << " ops="
       << line.bytes.size() << " peak=" << int64_t(top);
    if (!line.without.empty())
      os << " peak_without_remat=" << int64_t(topWithout);
    os << " -->\n";
  }
}

/// Tensor parallelism (plan.json's "tensor_parallel"): the mesh's axes, each
/// parameter split along which dimension over which axis or whole and why,
/// and the collectives over the tensor axis per step with their bytes.
void writeTensorParallel(raw_ostream &os, const json::Object &planObject) {
  const json::Object *tp = planObject.getObject("tensor_parallel");
  if (!tp)
    return;
  os << "<h2>Tensor parallelism</h2>\n<p class=\"note\">Mesh:";
  if (const json::Array *axes = planObject.getArray("mesh_axes"))
    for (const json::Value &v : *axes)
      if (const json::Object *axis = v.getAsObject())
        os << " " << escape(axis->getString("name").value_or("?")) << " "
           << axis->getInteger("size").value_or(0);
  os << ". " << tp->getInteger("split_parameters").value_or(0)
     << " parameters split over the tensor axis ("
     << formatBytes(
            tp->getNumber("split_parameter_bytes_per_rank").value_or(0))
     << " per rank), " << tp->getInteger("replicated_parameters").value_or(0)
     << " whole on every tensor rank ("
     << formatBytes(
            tp->getNumber("replicated_parameter_bytes_per_rank").value_or(0))
     << ").</p>\n";
  auto shape = [](const json::Array *dims) {
    std::string text;
    if (dims)
      for (const json::Value &d : *dims)
        text += (text.empty() ? "" : "×") +
                std::to_string(d.getAsInteger().value_or(0));
    return text;
  };
  os << "<table>\n<tr><th>stage</th><th>parameter</th><th>full</th>"
        "<th>per rank</th><th>split</th></tr>\n";
  if (const json::Array *params = tp->getArray("parameters"))
    for (const json::Value &v : *params) {
      const json::Object *p = v.getAsObject();
      if (!p)
        continue;
      std::string split;
      if (std::optional<StringRef> why = p->getString("replicated_why")) {
        split = "whole: " + escape(*why);
      } else if (const json::Array *dims = p->getArray("split")) {
        for (const json::Value &d : *dims)
          if (const json::Object *dim = d.getAsObject())
            split += (split.empty() ? "" : ", ") +
                     formatv("dimension {0} over {1}",
                             dim->getInteger("dim").value_or(0),
                             escape(dim->getString("axis").value_or("?")))
                         .str();
        if (int64_t blocks = p->getInteger("blocks").value_or(1); blocks > 1)
          split += formatv(" ({0} blocks, each split)", blocks).str();
        if (const json::Array *padded = p->getArray("padded_shape"))
          split += " (padded to " + shape(padded) + ")";
      }
      os << "<tr><td class=\"num\">" << p->getInteger("stage").value_or(0)
         << "</td><td class=\"node\">"
         << escape(p->getString("name").value_or("")) << "</td><td>"
         << shape(p->getArray("full_shape")) << "</td><td>"
         << shape(p->getArray("local_shape")) << "</td><td>" << split
         << "</td></tr>\n";
    }
  os << "</table>\n<table>\n<tr><th>stage</th><th>function</th>"
        "<th>collective</th><th>axis</th><th class=\"num\">per step</th>"
        "<th class=\"num\">bytes per step</th></tr>\n";
  if (const json::Array *collectives = tp->getArray("collectives"))
    for (const json::Value &v : *collectives) {
      const json::Object *c = v.getAsObject();
      if (!c)
        continue;
      os << "<tr><td class=\"num\">" << c->getInteger("stage").value_or(0)
         << "</td><td>" << escape(c->getString("function").value_or(""))
         << "</td><td>" << escape(c->getString("kind").value_or("")) << " "
         << escape(c->getString("reduce").value_or("")) << " <small>("
         << escape(c->getString("op").value_or("")) << ")</small></td><td>"
         << escape(c->getString("axis").value_or("")) << "</td><td "
         << "class=\"num\">" << c->getInteger("per_step").value_or(0)
         << "</td><td class=\"num\">"
         << formatBytes(c->getNumber("bytes_per_step").value_or(0))
         << "</td></tr>\n";
    }
  os << "</table>\n";
}

Expected<std::string> renderReport(const json::Object &planObject) {
  Expected<Plan> plan = readPlan(planObject);
  if (!plan)
    return plan.takeError();
  DenseMap<int64_t, Chunk> chunks = chunksOf(plan->stages);
  std::string page;
  raw_string_ostream os(page);
  os << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta "
        "charset=\"utf-8\">\n"
     << "<title>Cleave plan: " << escape(sys::path::filename(plan->model))
     << "</title>\n<style>" << kStyle << "</style>\n</head>\n<body>\n";
  writeHeader(os, *plan);
  writePartition(os, *plan, chunks);
  writeMemory(os, *plan);
  writeMemoryTimeline(os, planObject);
  writeTensorParallel(os, planObject);
  writeTimeline(os, *plan, chunks);
  os << "</body>\n</html>\n";
  return std::move(os.str());
}

} // namespace cleave
