//===- Report.h - the plan as a page to read at a glance --------*- C++ -*-===//
//
// `cleave-compile --report` (cleave-emit-program report=true) writes the
// plan analysis (passes/PlanAnalysis.h, as toJSON gives it) as a
// self-contained page (inline SVG and CSS, nothing fetched): the stage
// partition, the predicted memory per rank by category, the device memory
// over one step per stage and the pipeline timeline per rank.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PASSES_REPORT_H
#define CLEAVE_PASSES_REPORT_H

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <string>

namespace cleave {

/// The page for `plan` (the object plan.json holds), or an error naming the
/// first field the page needs that is missing or has the wrong type, e.g.
/// "plan.json: ranks[2].predicted_memory.activations is not a number".
/// `schedule` and `timeline` are optional: a plan without a pipeline renders
/// with a line saying there is no pipeline timeline.
llvm::Expected<std::string> renderReport(const llvm::json::Object &plan);

} // namespace cleave

#endif // CLEAVE_PASSES_REPORT_H
