//===- CutPoints.cpp - the places between layers of a forward function ----===//

#include "passes/CutPoints.h"
#include "ir/CleaveOps.h"
#include "passes/Layout.h"
#include "passes/NodeName.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <limits>

using namespace mlir;
using namespace mlir::cleave;

ValueSpans mlir::cleave::valueSpans(ArrayRef<Operation *> work,
                                    ValueRange liveOut) {
  int64_t n = work.size();
  llvm::DenseMap<Operation *, int64_t> position;
  for (auto [i, op] : llvm::enumerate(work))
    position[op] = i;
  ValueSpans spans;
  for (Operation *op : work)
    for (Value r : op->getResults())
      spans[r] = {position[op], position[op]};
  for (Operation *op : work)
    for (Value v : op->getOperands())
      if (auto it = spans.find(v); it != spans.end())
        it->second.second = std::max(it->second.second, position[op]);
  for (Value v : liveOut)
    if (auto it = spans.find(v); it != spans.end())
      it->second.second = n;
  return spans;
}

SmallVector<int64_t> mlir::cleave::crossingBytes(const ValueSpans &spans,
                                                 int64_t n, bool asFp32) {
  SmallVector<int64_t> delta(n + 2, 0);
  for (auto &[v, span] : spans) {
    auto [def, last] = span;
    if (last <= def)
      continue;
    // Crosses cuts def+1 .. last.
    auto tensor = v.getType().cast<RankedTensorType>();
    int64_t size = asFp32 && tensor.getElementType().isa<FloatType>()
                       ? tensor.getNumElements() * 4
                       : tensorBytes(tensor);
    delta[def + 1] += size;
    delta[last + 1] -= size;
  }
  SmallVector<int64_t> crossing(n + 1, 0);
  int64_t running = 0;
  for (int64_t c = 0; c <= n; ++c) {
    running += delta[c];
    crossing[c] = running;
  }
  return crossing;
}

SmallVector<int64_t>
mlir::cleave::leastCrossingPlaces(ArrayRef<int64_t> crossing) {
  int64_t n = int64_t(crossing.size()) - 1;
  int64_t least = std::numeric_limits<int64_t>::max();
  for (int64_t c = 1; c < n; ++c)
    if (crossing[c] > 0)
      least = std::min(least, crossing[c]);
  SmallVector<int64_t> places;
  for (int64_t c = 1; c < n; ++c)
    if (crossing[c] == least) {
      if (!places.empty() && places.back() == c - 1)
        places.back() = c;
      else
        places.push_back(c);
    }
  return places;
}

void mlir::cleave::skipCutsInsideNodes(ArrayRef<Operation *> work,
                                       MutableArrayRef<int64_t> crossing) {
  int64_t n = std::min<int64_t>(work.size(), crossing.size());
  auto inside = [&](int64_t c) {
    std::string before = onnxNodeName(work[c - 1]->getLoc());
    return !before.empty() && before == onnxNodeName(work[c]->getLoc());
  };
  int64_t least = std::numeric_limits<int64_t>::max();
  for (int64_t c = 1; c < n; ++c)
    if (crossing[c] > 0 && !inside(c))
      least = std::min(least, crossing[c]);
  for (int64_t c = 1; c < n; ++c)
    if (crossing[c] < least && inside(c))
      crossing[c] = 0;
}

SmallVector<std::pair<int64_t, int64_t>>
mlir::cleave::attentionCores(ArrayRef<Operation *> work) {
  llvm::DenseMap<Operation *, int64_t> position;
  for (auto [i, op] : llvm::enumerate(work))
    position[op] = i;
  SmallVector<std::pair<int64_t, int64_t>> cores;
  for (Operation *op : work) {
    if (!isa<SoftmaxOp>(op))
      continue;
    // Back along the scores' chain to the product that made them.
    Operation *at = op;
    std::optional<int64_t> begin;
    for (int depth = 0; at && depth < 8; ++depth) {
      Operation *from = nullptr;
      for (Value v : at->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (def && position.count(def) &&
            v.getType().cast<ShapedType>().getShape() ==
                op->getResult(0).getType().cast<ShapedType>().getShape() &&
            (!from || position[def] > position[from]))
          from = def;
      }
      if (!from)
        break;
      if (isa<MatmulOp>(from)) {
        begin = position[from];
        break;
      }
      at = from;
    }
    if (begin && (cores.empty() || cores.back().second <= *begin))
      cores.push_back({*begin, position[op] + 1});
  }
  return cores;
}

std::string mlir::cleave::layerKey(StringRef nodeName) {
  SmallVector<StringRef> parts;
  nodeName.split(parts, '/');
  size_t length = 0;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    StringRef part = parts[i];
    length += part.size() + 1;
    if (part.empty() || !isdigit(static_cast<unsigned char>(part.back())))
      continue;
    StringRef stem = part.rtrim("0123456789");
    if (stem.empty() || stem.endswith(".") || stem.endswith("_"))
      return nodeName.take_front(length).str();
  }
  return "";
}

SmallVector<std::pair<int64_t, int64_t>>
mlir::cleave::layersBetweenPlaces(ArrayRef<Operation *> work,
                                  ArrayRef<int64_t> bounds) {
  // Pieces into layers by their numbered module.
  SmallVector<std::pair<std::pair<int64_t, int64_t>, std::string>> pieces;
  bool anyKey = false;
  for (size_t i = 0; i + 1 < bounds.size(); ++i) {
    llvm::StringMap<int64_t> count;
    std::string key;
    int64_t best = 0;
    for (int64_t j = bounds[i]; j < bounds[i + 1]; ++j) {
      std::string k = layerKey(onnxNodeName(work[j]->getLoc()));
      if (!k.empty() && ++count[k] > best) {
        best = count[k];
        key = k;
      }
    }
    anyKey |= !key.empty();
    pieces.push_back({{bounds[i], bounds[i + 1]}, key});
  }
  SmallVector<std::pair<int64_t, int64_t>> found;
  for (auto [i, piece] : llvm::enumerate(pieces)) {
    auto &[range, key] = piece;
    bool isLayer = anyKey ? !key.empty() : (i > 0 && i + 1 < pieces.size());
    if (!isLayer)
      continue;
    if (anyKey && !found.empty() && found.back().second == range.first &&
        key == pieces[i - 1].second)
      found.back().second = range.second;
    else
      found.push_back(range);
  }
  return found;
}
