//===- RankBoxes.cpp - a rank's slice of a sharded parameter as boxes ----===//

#include "passes/RankBoxes.h"

using namespace mlir;
using namespace mlir::cleave;

FailureOr<RankBoxes>
mlir::cleave::rankBoxes(ArrayRef<int64_t> fullShape, ShardingAttr sharding,
                        MeshAttr mesh, int64_t rank,
                        function_ref<InFlightDiagnostic()> emitError) {
  if (!sharding.getPartial().empty()) {
    emitError() << "a parameter's sharding " << sharding
                << " is partial: a parameter is held whole or split, never "
                   "as a partial sum";
    return failure();
  }
  if (sharding.getDims().size() != fullShape.size()) {
    emitError() << "sharding " << sharding << " has "
                << sharding.getDims().size() << " dimensions, the tensor "
                << fullShape.size();
    return failure();
  }
  // Per dimension: the intervals the rank holds, one per block.
  RankBoxes out;
  SmallVector<SmallVector<std::pair<int64_t, int64_t>>> intervals;
  int64_t blockedDim = -1;
  for (auto [d, full] : llvm::enumerate(fullShape)) {
    int64_t parts = 1, index = 0;
    for (const AxisRef &ref : sharding.getDimAxisRefs(d)) {
      std::optional<int64_t> size = mesh ? mesh.getAxisSize(ref.name)
                                         : std::nullopt;
      if (!size) {
        emitError() << "mesh axis \"" << ref.name << "\" of sharding "
                    << sharding << " is not in the mesh " << mesh;
        return failure();
      }
      int64_t c = mesh.getCoordinate(rank, ref.name);
      int64_t n = *size, coordinate = c;
      if (!ref.isWhole()) {
        if (n % (ref.preSize * ref.size) != 0) {
          emitError() << "sub-axis \"" << ref.name << "\":(" << ref.preSize
                      << ")" << ref.size << " does not divide the axis's "
                      << n << " ranks";
          return failure();
        }
        n = ref.size;
        coordinate = (c / (*size / (ref.preSize * ref.size))) % ref.size;
      }
      parts *= n;
      index = index * n + coordinate;
    }
    int64_t blocks = sharding.getDimBlocks(d);
    if (full % (blocks * parts) != 0) {
      emitError() << "dimension " << d << " (size " << full
                  << ") is not divisible by the " << blocks * parts
                  << " pieces of sharding " << sharding;
      return failure();
    }
    if (blocks > 1 && parts > 1) {
      if (blockedDim >= 0) {
        emitError() << "sharding " << sharding << " has blocks in dimensions "
                    << blockedDim << " and " << d
                    << ": a rank's slice would be a grid of boxes, not boxes "
                       "concatenated along one dimension";
        return failure();
      }
      blockedDim = int64_t(d);
    }
    int64_t block = full / blocks, part = block / parts;
    auto &dim = intervals.emplace_back();
    if (parts == 1)
      dim.push_back({0, full}); // whole: its blocks are one box
    else
      for (int64_t k = 0; k < blocks; ++k)
        dim.push_back({k * block + index * part, part});
    out.localShape.push_back(full / parts);
  }
  out.axis = std::max<int64_t>(blockedDim, 0);
  SmallVector<std::pair<int64_t, int64_t>> along =
      fullShape.empty() ? SmallVector<std::pair<int64_t, int64_t>>{{0, 0}}
                        : intervals[out.axis];
  for (auto [start, size] : along) {
    TensorBox box;
    for (auto [d, dim] : llvm::enumerate(intervals)) {
      auto interval = int64_t(d) == out.axis ? std::make_pair(start, size)
                                             : dim.front();
      box.start.push_back(interval.first);
      box.size.push_back(interval.second);
    }
    out.boxes.push_back(std::move(box));
  }
  return out;
}
