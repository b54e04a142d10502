//===- CutPoints.h - the places between layers of a forward function -*- C++
//-*-===//
//
// The pipeline partition cuts a forward function into stages, and the remat
// pass cuts it into layers to checkpoint; both cut where the fewest
// activation bytes cross (the residual stream of a transformer, once per
// half block). This is that one search, over a function's work ops in
// order.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_PASSES_CUTPOINTS_H
#define CLEAVE_PASSES_CUTPOINTS_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SmallVector.h"

#include <string>
#include <utility>

namespace mlir::cleave {

/// Per value defined by a work op, in order of definition: the position of
/// the op defining it and of its last use (work.size() when it is live out).
using ValueSpans = llvm::MapVector<Value, std::pair<int64_t, int64_t>>;

/// The spans of the values `work` defines; those in `liveOut` (what the
/// function returns and someone reads after it) stay live to the end.
ValueSpans valueSpans(ArrayRef<Operation *> work, ValueRange liveOut);

/// Bytes of the values crossing the cut before work[c], for c in
/// 0..work.size(). With `asFp32`, every float counts 4 bytes an element,
/// whatever its type: the places between layers must not depend on the
/// compute precision. (Under mixed precision the last norm's output is cast
/// to bf16 for the head's product, so the place before that product crosses
/// half the bytes of the fp32 residual stream and, counted in real bytes,
/// would be the only least place.)
SmallVector<int64_t> crossingBytes(const ValueSpans &spans, int64_t n,
                                   bool asFp32);

/// The places between layers: the cuts c in 1..n-1 where the fewest (but
/// some) bytes cross, by `crossing` (from crossingBytes with asFp32), in
/// order. Adjacent least places (a reshape between layers) are one place,
/// the later.
SmallVector<int64_t> leastCrossingPlaces(ArrayRef<int64_t> crossing);

/// Zeroes `crossing` (from crossingBytes) at the cuts inside one ONNX
/// node's ops that cross fewer bytes than every cut between two nodes;
/// leastCrossingPlaces then skips them. Tensor parallelism lowers the
/// vocab-parallel embedding and cross-entropy each to a chain whose
/// per-rank index arithmetic (the rank's vocabulary offset, a [tokens, 1]
/// sum) crosses fewer bytes than the residual stream; without this those
/// would be the only places. A cut inside a node that crosses as much as
/// the least between nodes stays (a cast located at the product it feeds,
/// next to a place between layers).
void skipCutsInsideNodes(ArrayRef<Operation *> work,
                         MutableArrayRef<int64_t> crossing);

/// The numbered module an ONNX node belongs to: the node name up to its
/// first path component that ends in a number (`/h.0/`, `/model/layers.3/`,
/// `/blocks/0/`), or "" if none. The last component is the node's own name
/// (`MatMul_1`), never a module.
std::string layerKey(StringRef nodeName);

/// The layers of `work`, as half-open ranges in order: the pieces between
/// `bounds` (0, the places between layers, work.size()) joined by the
/// numbered module most of their ops' ONNX nodes belong to (two half blocks
/// of `/h.3/` are one layer), those of no module left out (the embedding,
/// the head); for a model whose node names give no module, every piece but
/// the first and the last. What `activation_checkpointing` checkpoints,
/// unless the spec names the layers.
SmallVector<std::pair<int64_t, int64_t>>
layersBetweenPlaces(ArrayRef<Operation *> work, ArrayRef<int64_t> bounds);

/// The attention cores of `work` (what `activation_checkpointing:
/// selective` recomputes): each a half-open range of positions from the
/// product of queries and keys through mask and scale to the softmax of the
/// scores, in order and disjoint. A fused cleave.attention has none.
SmallVector<std::pair<int64_t, int64_t>>
attentionCores(ArrayRef<Operation *> work);

} // namespace mlir::cleave

#endif // CLEAVE_PASSES_CUTPOINTS_H
