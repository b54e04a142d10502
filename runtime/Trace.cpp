//===- Trace.cpp - what a rank did when, as a Chrome trace ----------------===//

#include "runtime/Trace.h"
#include "runtime/Communicator.h"
#include "runtime/Json.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

using namespace cleave::runtime;

Status TraceRecorder::start(Communicator &comm) {
  std::vector<double> barrier = {0};
  CLEAVE_CHECK(comm.sumAll(barrier)); // every rank starts its clock here
  origin_ = Clock::now();
  active_ = true;
  return Status::ok();
}

std::string
cleave::runtime::traceJson(const std::vector<std::vector<TraceSpan>> &perRank) {
  std::string s = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  bool first = true;
  auto event = [&](const std::string &body) {
    s += (first ? "  " : ",\n  ") + body;
    first = false;
  };
  for (size_t r = 0; r < perRank.size(); ++r) {
    std::string pid = std::to_string(r);
    event("{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": " + pid +
          ", \"args\": {\"name\": \"rank " + pid + "\"}}");
    event("{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " + pid +
          ", \"tid\": 0, \"args\": {\"name\": \"compute\"}}");
    event("{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " + pid +
          ", \"tid\": 1, \"args\": {\"name\": \"communication\"}}");
    // Only where a save ran: other traces stay as they were.
    for (const TraceSpan &span : perRank[r])
      if (span.thread == 2) {
        event("{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " +
              pid + ", \"tid\": 2, \"args\": {\"name\": \"checkpoint "
                    "writer\"}}");
        break;
      }
    for (const TraceSpan &span : perRank[r])
      event("{\"ph\": \"X\", \"name\": " + jsonQuote(span.name) +
            ", \"pid\": " + pid + ", \"tid\": " + std::to_string(span.thread) +
            ", \"ts\": " + jsonNumber(span.startUs) +
            ", \"dur\": " + jsonNumber(span.durationUs) + "}");
  }
  return s + "\n]}\n";
}

Status TraceRecorder::write(Communicator &comm, const std::string &path) const {
  // Each rank's spans as text lines: thread, start, duration, name.
  std::string mine;
  for (const TraceSpan &span : spans_) {
    char head[96];
    std::snprintf(head, sizeof head, "%d %.3f %.3f ", span.thread, span.startUs,
                  span.durationUs);
    mine += head + span.name + "\n";
  }
  std::vector<std::string> all;
  CLEAVE_CHECK(comm.gatherToRoot(mine, all));
  if (comm.rank() != 0)
    return Status::ok();
  std::vector<std::vector<TraceSpan>> perRank(all.size());
  for (size_t r = 0; r < all.size(); ++r) {
    size_t at = 0;
    while (at < all[r].size()) {
      size_t end = all[r].find('\n', at);
      std::string line = all[r].substr(at, end - at);
      at = end == std::string::npos ? all[r].size() : end + 1;
      TraceSpan span;
      int used = 0;
      if (std::sscanf(line.c_str(), "%d %lf %lf %n", &span.thread,
                      &span.startUs, &span.durationUs, &used) < 3)
        return Status::error("trace: rank " + std::to_string(r) +
                             " sent a malformed span");
      span.name = line.substr(used);
      perRank[r].push_back(std::move(span));
    }
  }
  std::FILE *f = std::fopen(path.c_str(), "w");
  if (!f)
    return Status::error(path + ": cannot write the trace: " +
                         std::strerror(errno));
  std::string text = traceJson(perRank);
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok &= std::fclose(f) == 0;
  if (!ok)
    return Status::error(path + ": writing the trace failed");
  return Status::ok();
}
