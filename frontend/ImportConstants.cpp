//===- ImportConstants.cpp - ONNX ops about shapes and constants ---------===//
//
// Shape and Size read only the static type of their input, so they always
// give host constants. Constant, ConstantOfShape and Range are evaluated at
// compile time (ConstantFolding.cpp); they reach a handler only when an
// input is computed at run time, which a static-shape compiler cannot do.
//
//===----------------------------------------------------------------------===//

#include "frontend/ImportNode.h"

#include <algorithm>

using namespace mlir;
using ::cleave::HostTensor;
using ::cleave::intAttr;
using ::cleave::NodeImport;

namespace {

struct Constants : NodeImport {
  Constants(const NodeImport &n) : NodeImport(n) {}

  LogicalResult shapeOrSize() {
    if (node.input_size() < 1)
      return error(loc) << op << " needs an input";
    auto dims = shape(0);
    HostTensor result;
    if (op == "Size") {
      int64_t n = 1;
      for (int64_t d : dims)
        n *= d;
      result = HostTensor::scalarInt(n);
    } else {
      int64_t rank = dims.size();
      int64_t start = intAttr(node, "start", 0),
              end = intAttr(node, "end", rank);
      start = std::clamp<int64_t>(start < 0 ? start + rank : start, 0, rank);
      end = std::clamp<int64_t>(end < 0 ? end + rank : end, 0, rank);
      result = HostTensor::ints(
          dims.slice(start, std::max<int64_t>(end - start, 0)));
    }
    return outConstant(std::move(result));
  }

  LogicalResult onlyAtCompileTime() {
    return error(loc) << op
                      << " on inputs computed at run time cannot be made "
                         "static; Cleave needs its inputs to be constants";
  }
};

} // namespace

void ::cleave::registerConstantOps(::cleave::OnnxOpTable &table) {
  for (const char *op : {"Shape", "Size"})
    table[op] = [](NodeImport &n) { return Constants(n).shapeOrSize(); };
  for (const char *op : {"Constant", "ConstantOfShape", "Range"})
    table[op] = [](NodeImport &n) { return Constants(n).onlyAtCompileTime(); };
}
