//===- TensorGroups.h - f's and g's groups: an axis or a sub-axis ---------===//
//
// The `axes` of cleave.tp_copy and cleave.tp_reduce name whole mesh axes
// ("tensor") or one sub-axis written as Shardy writes it in a sharding,
// "tensor:(pre)size": on an axis of n ranks, the ranks whose coordinate
// differs only in the digit (c / (n / (pre * size))) % size. With more
// tensor ranks than key/value heads, a key/value head is replicated over
// the minor sub-axis and its gradient is summed over that sub-axis only
// (docs/tensor-parallel.md, "Blocked shardings and sub-axes"). The program
// names the group the same way.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_IR_TENSORGROUPS_H
#define CLEAVE_IR_TENSORGROUPS_H

#include "ir/CleaveDialect.h"

#include "llvm/ADT/Twine.h"

#include <optional>
#include <string>

namespace mlir::cleave {

/// The axis or sub-axis a group name stands for: "tensor" (whole), or
/// "tensor:(2)2"; nullopt when a sub-axis is malformed.
inline std::optional<AxisRef> parseGroupAxis(llvm::StringRef name) {
  auto [axis, rest] = name.split(":(");
  if (rest.empty())
    return name.contains(':') ? std::nullopt
                              : std::optional<AxisRef>(AxisRef{name});
  auto [pre, size] = rest.split(')');
  AxisRef ref{axis};
  if (axis.empty() || pre.getAsInteger(10, ref.preSize) ||
      size.getAsInteger(10, ref.size) || ref.preSize < 1 || ref.size < 2)
    return std::nullopt;
  return ref;
}

/// The group name of `ref` ("tensor", "tensor:(2)2").
inline std::string groupAxisName(const AxisRef &ref) {
  if (ref.isWhole())
    return ref.name.str();
  return (ref.name + ":(" + llvm::Twine(ref.preSize) + ")" +
          llvm::Twine(ref.size))
      .str();
}

} // namespace mlir::cleave

#endif // CLEAVE_IR_TENSORGROUPS_H
