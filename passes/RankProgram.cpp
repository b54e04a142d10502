//===- RankProgram.cpp - one rank's tensors, parameters and groups -------===//
//
// The parts of RankProgram (RankProgram.h) besides function bodies:
// tensors at their planned offsets, parameters, the replay of a
// last-microbatch copy in its original's storage, events, peers and
// communicator groups from the mesh.
//
//===----------------------------------------------------------------------===//

#include "passes/RankProgram.h"

#include "ir/AttrNames.h"
#include "ir/DistributionOps.h"
#include "passes/Layout.h"
#include "passes/RankBoxes.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::cleave;

FailureOr<int> RankProgram::addTensor(Type type, int64_t offset,
                                      pb::Category category, StringRef name,
                                      Operation *where, bool host) {
  auto tensor = type.dyn_cast<RankedTensorType>();
  if (!tensor || !tensor.hasStaticShape())
    return where->emitError()
           << "cannot emit " << type << ": not a static tensor";
  auto dtype = dtypeOf(tensor.getElementType(), where);
  if (failed(dtype))
    return failure();
  if (host && hostBuffer < 0)
    return where->emitError() << "a host value, but the memory plan gave this "
                                 "stage no host arena";
  int buffer = host ? hostBuffer : currentBuffer;
  if (host && offset < hostSlotBytes)
    offset += currentSlot * hostSlotBytes;
  else if (!host && offset >= slotBase && offset < slotBase + slotBytes)
    offset += currentSlot * slotBytes;
  if (replayNext >= 0)
    return replayTensor(tensor, buffer, offset, *dtype, category, name, where);
  pb::Tensor *t = program.add_tensors();
  t->set_buffer(buffer);
  t->set_offset(offset);
  for (int64_t d : tensor.getShape())
    t->add_shape(d);
  t->set_dtype(*dtype);
  t->set_category(category);
  t->set_name(name.str());
  if (category == pb::ACTIVATIONS)
    activationTensors.insert(program.tensors_size() - 1);
  return program.tensors_size() - 1;
}

/// Numbers the events that `copy` starts, after those already numbered:
/// called in the order the rank's schedule runs them.
void RankProgram::numberGradientEvents(func::FuncOp copy) {
  copy.walk([&](Operation *op) {
    int64_t event = 0;
    if (auto start = dyn_cast<AllReduceGradsStartOp>(op))
      event = start.getEvent();
    else if (auto start = dyn_cast<ReduceScatterGradsStartOp>(op))
      event = start.getEvent();
    else
      return;
    startedEvent(gradientEvents, event);
  });
}

FailureOr<int> RankProgram::programEvent(Operation *op, int64_t event) {
  auto it = gradientEvents.find(event);
  if (it == gradientEvents.end())
    return op->emitError() << "event " << event
                           << " is not started by a "
                              "copy of a backward that this rank's "
                              "schedule runs for the last microbatch";
  return it->second;
}

/// The tensor a last-microbatch copy asks for: its original's next.
FailureOr<int> RankProgram::replayTensor(RankedTensorType type, int buffer,
                                         int64_t offset, pb::DType dtype,
                                         pb::Category category, StringRef name,
                                         Operation *where) {
  if (replayNext < replayEnd) {
    const pb::Tensor &t = program.tensors(replayNext);
    if (t.buffer() == buffer && int64_t(t.offset()) == offset &&
        t.dtype() == dtype && t.category() == category && t.name() == name &&
        llvm::equal(t.shape(), type.getShape()))
      return replayNext++;
  }
  return where->emitError()
         << "the last-microbatch copy of a backward differs from it at " << type
         << " (offset " << offset
         << "); run cleave-overlap-gradients after cleave-memory-plan";
}

/// Emits `copy`, the last-microbatch copy of a function whose emission
/// added the tensors [tensors.first, tensors.second), as function `name`
/// at the program's end. It runs in its original's storage: it uses those
/// tensors, in order, and binds no inputs or outputs of its own.
FailureOr<int> RankProgram::emitLastMicrobatchCopy(func::FuncOp copy,
                                                   std::pair<int, int> tensors,
                                                   const std::string &name) {
  int inputs = program.inputs_size(), outputs = program.outputs_size();
  replayNext = tensors.first;
  replayEnd = tensors.second;
  LogicalResult emitted = emitFunction(copy);
  bool complete = replayNext == replayEnd;
  replayNext = replayEnd = -1;
  if (failed(emitted))
    return failure();
  if (!complete)
    return copy.emitError() << "the last-microbatch copy of a backward has "
                               "fewer values than it; run "
                               "cleave-overlap-gradients after "
                               "cleave-memory-plan";
  program.mutable_inputs()->DeleteSubrange(inputs,
                                           program.inputs_size() - inputs);
  program.mutable_outputs()->DeleteSubrange(outputs,
                                            program.outputs_size() - outputs);
  int index = program.functions_size() - 1;
  program.mutable_functions(index)->set_name(name);
  return index;
}

/// The module's parameters (and gradient buffers) as tensors of the
/// current buffer, with where their initial values come from.
LogicalResult RankProgram::addParameters(ModuleOp module) {
  for (auto param : module.getOps<ParameterOp>()) {
    auto offset = param->getAttrOfType<IntegerAttr>("cleave.offset");
    if (!offset)
      return param.emitError() << "parameter has no planned offset";
    // A sharded parameter (ZeRO-3) is its chunk.
    std::optional<StateShards> shards = stateShards(param);
    bool sharded = shards && param->hasAttr(kParamAxisAttr);
    // ZeRO-1's split masters: the whole parameter in its working type,
    // which the functions read, and the fp32 master chunk, which is what
    // the program's Parameter (initialization, checkpoints) names.
    bool working = param->hasAttr(kWorkingTypeAttr);
    Type stored = sharded ? Type(chunkType(param, *shards)) : readType(param);
    auto id = addTensor(stored, offset.getInt(), pb::PARAMETERS,
                        working ? (param.getSymName() + " (working copy)").str()
                                : param.getSymName().str(),
                        param);
    if (failed(id))
      return failure();
    paramTensor[param.getSymName()] = *id;
    int master = -1;
    if (working) {
      auto at = param->getAttrOfType<IntegerAttr>("cleave.master_offset");
      if (!shards || !at)
        return param.emitError() << "parameter with a working copy has no "
                                    "planned master chunk; run "
                                    "cleave-memory-plan first";
      FailureOr<int> m = addTensor(chunkType(param, *shards), at.getInt(),
                                   pb::PARAMETERS, param.getSymName(), param);
      if (failed(m))
        return failure();
      master = *m;
    }
    if (auto grad = param->getAttrOfType<IntegerAttr>("cleave.grad_offset")) {
      auto g = addTensor(sharded ? Type(chunkType(param, *shards))
                                 : param.getType(),
                         grad.getInt(), pb::GRADIENTS,
                         (param.getSymName() + ".grad").str(), param);
      if (failed(g))
        return failure();
      gradTensor[param.getSymName()] = *g;
    }
    pb::Parameter *p = program.add_parameters();
    p->set_name(param.getSymName().str());
    p->set_tensor(master >= 0 ? master : *id);
    if (master >= 0)
      p->set_working_tensor(*id);
    if (failed(addSlice(param, p)))
      return failure();
    p->set_seed(seed);
    // tensor_parallel_seed (cleave-compile's attribute on the top module)
    // seeds the generated initialization of the tensor-split parameters.
    if (param->hasAttr(kFullTypeAttr))
      for (Operation *up = param->getParentOp(); up; up = up->getParentOp())
        if (auto tpSeed =
                up->getAttrOfType<IntegerAttr>(kTensorParallelSeedAttr)) {
          p->set_seed(tpSeed.getInt());
          break;
        }
    if (failed(addSplitViews(param, offset.getInt(), p)))
      return failure();
    if (auto it = paramFile.find(param.getSymName()); it != paramFile.end()) {
      pb::FileData *file = p->mutable_file();
      file->set_path("params.bin");
      file->set_offset(it->second.offset);
      file->set_size_bytes(it->second.size);
      file->set_sha256(it->second.sha256);
    } else if (auto init = param.getInitAttr()) {
      p->set_generator(init.getValue().str());
    } else {
      return param.emitError()
             << "parameter '" << param.getSymName()
             << "' has neither data nor an initializer (init = "
                "\"normal:STD\", \"zeros\" or \"ones\")";
    }
  }
  return success();
}

/// The part of the full tensor a parameter's tensor holds: the whole, or
/// after cleave-partition-tensor (a local type with cleave.full_type and
/// the full tensor's cleave.sharding) this rank's boxes of it; several
/// boxes (a blocked sharding) make the program version VERSION_PIECES.
LogicalResult RankProgram::addSlice(ParameterOp param, pb::Parameter *p) {
  auto local = param.getType().cast<RankedTensorType>();
  auto full = param->getAttrOfType<TypeAttr>(kFullTypeAttr);
  auto sharding = param->getAttrOfType<ShardingAttr>(kShardingAttr);
  // A padded vocabulary (cleave-pad-vocabulary): the full tensor is the
  // unpadded one, and the rank's slice its real rows, which its tensor
  // holds first (the rest are the padding's zero rows).
  auto unpadded = param->getAttrOfType<DenseI64ArrayAttr>(kUnpaddedShapeAttr);
  if (!full) {
    ArrayRef<int64_t> shape =
        unpadded ? unpadded.asArrayRef() : local.getShape();
    for (int64_t d : shape) {
      p->add_full_shape(d);
      p->add_slice_start(0);
      p->add_slice_size(d);
    }
    return success();
  }
  auto fullType = full.getValue().cast<RankedTensorType>();
  if (!sharding)
    return param.emitError()
           << "parameter '" << param.getSymName() << "' has "
           << kFullTypeAttr << " " << fullType << " but no " << kShardingAttr
           << " saying which part of it this rank holds";
  auto emitError = [&] {
    return param.emitError() << "parameter '" << param.getSymName() << "': ";
  };
  FailureOr<RankBoxes> boxes =
      rankBoxes(fullType.getShape(), sharding, mesh, rank, emitError);
  if (failed(boxes))
    return failure();
  if (!llvm::equal(boxes->localShape, local.getShape()))
    return emitError() << "its type " << local << " is not the slice of "
                       << fullType << " that sharding " << sharding
                       << " gives a rank ("
                       << RankedTensorType::get(boxes->localShape,
                                                local.getElementType())
                       << ")";
  if (unpadded) {
    if (boxes->boxes.size() != 1)
      return emitError() << "a padded vocabulary split into "
                         << boxes->boxes.size()
                         << " boxes a rank (one is supported)";
    for (auto [d, size] : llvm::enumerate(unpadded.asArrayRef())) {
      int64_t start = std::min(boxes->boxes.front().start[d], size);
      int64_t end = std::min(start + local.getDimSize(d), size);
      p->add_full_shape(size);
      p->add_slice_start(start);
      p->add_slice_size(end - start);
    }
    return success();
  }
  for (auto [d, size] : llvm::enumerate(fullType.getShape())) {
    p->add_full_shape(size);
    p->add_slice_start(boxes->boxes.front().start[d]);
    p->add_slice_size(local.getDimSize(d));
  }
  if (boxes->boxes.size() == 1)
    return success();
  program.set_version(pb::VERSION_PIECES);
  p->set_pieces_axis(int(boxes->axis));
  for (const TensorBox &box : boxes->boxes) {
    pb::Box *out = p->add_pieces();
    for (auto [start, size] : llvm::zip(box.start, box.size)) {
      out->add_start(start);
      out->add_size(size);
    }
  }
  return success();
}

/// For a parameter whose optimizer state is split (ZeRO-1): views of its
/// padded buffers, whole and this rank's chunk, and the range of elements
/// whose state this rank keeps.
LogicalResult RankProgram::addSplitViews(ParameterOp param, int64_t offset,
                                         pb::Parameter *p) {
  std::optional<StateShards> shards = stateShards(param);
  if (!shards)
    return success();
  Type element = param.getType().cast<RankedTensorType>().getElementType();
  auto flat = RankedTensorType::get({shards->padded()}, element);
  RankedTensorType chunk = chunkType(param, *shards);
  // A working copy's views are in its type; its gradient's stay fp32.
  Type read = readType(param).getElementType();
  Type paramFlat = flat.clone(read), paramChunk = chunk.clone(read);
  int64_t c = mesh ? mesh.getCoordinate(rank, shards->axis) : 0;
  int64_t chunkBytes = tensorBytes(chunk);
  std::string name = param.getSymName().str();
  SplitViews views;
  int64_t start = c * shards->chunk;
  // The ranges count the slice's elements (addSlice's slice_size): a padded
  // vocabulary's tensor has more, the padding's zero rows after them,
  // which no range covers.
  int64_t elements = 1;
  for (int64_t d : p->slice_size())
    elements *= d;
  elements = std::min(elements, shards->elements);
  auto setRange = [&](pb::StateRange *range) {
    range->set_start(std::min(start, elements));
    range->set_size(std::clamp<int64_t>(elements - start, 0, shards->chunk));
  };
  auto add = [&](Type type, int64_t at, const std::string &what,
                 int &id) -> LogicalResult {
    FailureOr<int> t = addTensor(type, at, pb::VIEW, what, param);
    if (failed(t))
      return failure();
    id = *t;
    return success();
  };
  if (param->hasAttr(kParamAxisAttr)) {
    // Sharded (ZeRO-3): the parameter's tensor is the chunk; functions
    // gather the whole into values of their own.
    views.paramFlat = -1;
    views.paramChunk = p->tensor();
    setRange(p->mutable_flat_range());
  } else if (failed(add(paramFlat, offset, name + " (padded)",
                        views.paramFlat)) ||
             failed(add(paramChunk, offset + c * tensorBytes(paramChunk),
                        name + " (chunk)", views.paramChunk))) {
    return failure();
  }
  if (param->hasAttr(kWorkingTypeAttr)) {
    // The master chunk is the Parameter's tensor: a range of the slice, as
    // a sharded parameter's.
    views.master = p->tensor();
    setRange(p->mutable_flat_range());
  }
  if (param->hasAttr(kParamAxisAttr)) {
    // Its gradient too is one chunk, reduce-scattered in the backward.
    if (auto it = gradTensor.find(param.getSymName()); it != gradTensor.end())
      views.gradChunk = it->second;
  } else if (auto grad =
                 param->getAttrOfType<IntegerAttr>("cleave.grad_offset")) {
    if (failed(add(flat, grad.getInt(), name + ".grad (padded)",
                   views.gradFlat)) ||
        failed(add(chunk, grad.getInt() + c * chunkBytes,
                   name + ".grad (chunk)", views.gradChunk)))
      return failure();
  }
  splitViews[param.getSymName()] = views;
  setRange(p->mutable_state_range());
  return success();
}

/// The world rank at coordinate `peer` of mesh axis `axis`, this rank's
/// other coordinates.
int RankProgram::peerRank(StringRef axis, int64_t peer) const {
  return int(mesh ? mesh.withCoordinate(rank, axis, peer) : peer);
}

/// The program's group for a collective over `ref`: a whole mesh axis's
/// group, or (a sub-axis `"tensor":(pre)size`) the ranks whose coordinate
/// on the axis differs from this rank's in that sub-axis's digit only,
/// made on first use and named `tensor:(pre)size`.
FailureOr<int> RankProgram::subAxisGroup(const AxisRef &ref,
                                         Operation *where) {
  if (ref.isWhole())
    return groupIndex(ref.name, std::nullopt, where);
  std::optional<int64_t> axisSize =
      mesh ? mesh.getAxisSize(ref.name) : std::nullopt;
  if (!axisSize || *axisSize % (ref.preSize * ref.size) != 0)
    return where->emitError() << "sub-axis \"" << ref.name << "\":("
                              << ref.preSize << ")" << ref.size
                              << " is not inside an axis of the mesh";
  std::string name = groupAxisName(ref);
  pb::Mesh *programMesh = program.mutable_mesh();
  for (int g = 0; g < programMesh->groups_size(); ++g)
    if (programMesh->groups(g).name() == name)
      return g;
  int64_t stride = *axisSize / (ref.preSize * ref.size);
  int64_t c = mesh.getCoordinate(rank, ref.name);
  int64_t base = c - ((c / stride) % ref.size) * stride;
  pb::Group *group = programMesh->add_groups();
  group->set_name(name);
  for (int64_t k = 0; k < ref.size; ++k)
    group->add_ranks(mesh.withCoordinate(rank, ref.name, base + k * stride));
  return programMesh->groups_size() - 1;
}

/// The program's group for a collective over mesh axis `axis`, among the
/// ranks at coordinates `members` of it when given (all otherwise), then
/// named `label` (with the axis unless it is the pipeline's "tied") and
/// the members.
FailureOr<int> RankProgram::groupIndex(StringRef axis,
                                       std::optional<ArrayRef<int64_t>> members,
                                       Operation *where, StringRef label) {
  std::string name = axis.str();
  if (members) {
    name = label == "tied" ? label.str() : (label + " " + axis).str();
    for (auto [i, m] : llvm::enumerate(*members))
      name += (i ? "," : ":") + std::to_string(m);
  }
  pb::Mesh *programMesh = program.mutable_mesh();
  for (int g = 0; g < programMesh->groups_size(); ++g)
    if (programMesh->groups(g).name() == name)
      return g;
  if (!members)
    return where->emitError() << "no mesh group named '" << axis << "'";
  if (!mesh || !mesh.getAxisSize(axis))
    return where->emitError() << "mesh axis '" << axis << "' is not in the "
                              << "mesh";
  pb::Group *group = programMesh->add_groups();
  group->set_name(name);
  for (int64_t m : *members)
    group->add_ranks(peerRank(axis, m));
  return programMesh->groups_size() - 1;
}
