//===- OverlapGradients.cpp - gradient all-reduce overlapping backward ----===//
//
// A rewrite of an emitted program (runtime/program.proto): see
// OverlapGradients.h.
//
//===----------------------------------------------------------------------===//

#include "passes/OverlapGradients.h"

#include "program.pb.h"

#include <map>
#include <set>
#include <vector>

namespace pb = ::cleave::program;

void mlir::cleave::overlapGradientReduction(pb::Program &program,
                                            int64_t microbatches) {
  int data = -1;
  for (int g = 0; g < program.mesh().groups_size(); ++g)
    if (program.mesh().groups(g).name() == "data" &&
        program.mesh().groups(g).ranks_size() > 1)
      data = g;
  if (data < 0)
    return;
  struct Bucket {
    int function, index;
    std::set<int> tensors;
    int event = 0;
  };
  std::vector<Bucket> buckets;
  for (int f = 0; f < program.functions_size(); ++f) {
    const pb::Function &fn = program.functions(f);
    if (fn.kind() != pb::OPTIMIZER)
      continue;
    for (int i = 0; i < fn.body_size(); ++i) {
      if (!fn.body(i).has_collective())
        continue;
      const pb::Collective &c = fn.body(i).collective();
      bool gradients = c.kind() == pb::ALL_REDUCE && c.group() == data &&
                       c.event() == 0;
      for (int k = 0; gradients && k < c.inputs_size(); ++k)
        gradients = c.inputs(k) == c.outputs(k) &&
                    program.tensors(c.inputs(k)).category() == pb::GRADIENTS;
      if (gradients)
        buckets.push_back(
            {f, i, std::set<int>(c.inputs().begin(), c.inputs().end())});
    }
  }
  int nextEvent = 1;
  for (pb::Step &step : *program.mutable_schedule()) {
    if (step.microbatch() != microbatches - 1 ||
        program.functions(step.function()).kind() != pb::BACKWARD)
      continue;
    pb::Function copy = program.functions(step.function());
    // Where each bucket's gradients are last written in this function.
    std::map<int, std::vector<size_t>> startsAfter;
    for (size_t b = 0; b < buckets.size(); ++b) {
      if (buckets[b].event)
        continue;
      std::set<int> written;
      int last = -1;
      for (int i = 0; i < copy.body_size(); ++i)
        if (copy.body(i).has_kernel())
          for (int out : copy.body(i).kernel().outputs())
            if (buckets[b].tensors.count(out)) {
              written.insert(out);
              last = i;
            }
      if (written.size() == buckets[b].tensors.size())
        startsAfter[last].push_back(b);
    }
    if (startsAfter.empty())
      continue;
    pb::Function overlapped;
    overlapped.set_name(copy.name() + " (last microbatch)");
    overlapped.set_kind(copy.kind());
    for (int i = 0; i < copy.body_size(); ++i) {
      *overlapped.add_body() = copy.body(i);
      for (size_t b : startsAfter[i]) {
        Bucket &bucket = buckets[b];
        bucket.event = nextEvent++;
        pb::Instruction start =
            program.functions(bucket.function).body(bucket.index);
        start.mutable_collective()->set_event(bucket.event);
        *overlapped.add_body() = start;
      }
    }
    step.set_function(program.functions_size());
    *program.add_functions() = std::move(overlapped);
  }
  for (const Bucket &bucket : buckets)
    if (bucket.event) {
      pb::Instruction *inst = program.mutable_functions(bucket.function)
                                  ->mutable_body(bucket.index);
      inst->Clear();
      inst->mutable_event()->set_id(bucket.event);
      inst->mutable_event()->set_wait(true);
    }
}
