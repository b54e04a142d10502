//===- AttrNames.h - every discardable cleave.* attribute name -*- C++ -*-===//
//
// Each name a pass puts on an op, a function argument or a module is
// declared here once (openxla/shardy's constants.h), and the dialect's
// attribute verifier refuses a `cleave.*` name not listed, so a misspelt
// name fails verification instead of being silently ignored.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_IR_ATTRNAMES_H
#define CLEAVE_IR_ATTRNAMES_H

#include "llvm/ADT/StringRef.h"

namespace mlir::cleave {

// Distribution (docs/distribution-ir.md): checked for their kind and,
// where they meet a type, against it and the mesh.
inline constexpr llvm::StringLiteral kMeshAttr = "cleave.mesh";
inline constexpr llvm::StringLiteral kShardingAttr = "cleave.sharding";
inline constexpr llvm::StringLiteral kMemorySpaceAttr = "cleave.memory_space";
// On a cleave.parameter after cleave-partition-tensor, whose type is then
// the rank's local slice: the full tensor's type (a TypeAttr). Its
// cleave.sharding (and `value`, when it has one) are the full tensor's; the
// emitter turns them into the rank's boxes (passes/RankBoxes.h).
inline constexpr llvm::StringLiteral kFullTypeAttr = "cleave.full_type";
// On a cleave.parameter padded by cleave-pad-vocabulary: its logical shape
// (a DenseI64ArrayAttr), which `value`, params.bin and checkpoints hold;
// the type (and cleave.full_type) are the padded rows'.
inline constexpr llvm::StringLiteral kUnpaddedShapeAttr =
    "cleave.unpadded_shape";
// On an op where a split value had to be gathered (cleave-propagate-
// shardings): why, for the report.
inline constexpr llvm::StringLiteral kShardingStopAttr = "cleave.sharding_stop";
// On the module (cleave-compile, spec key tensor_parallel_seed): the seed
// of the generated initialization of the tensor-split parameters.
inline constexpr llvm::StringLiteral kTensorParallelSeedAttr =
    "cleave.tensor_parallel_seed";

// The conventional mesh axis names.
inline constexpr llvm::StringLiteral kDataAxis = "data";
inline constexpr llvm::StringLiteral kShardedDataAxis = "sharded_data";
// MiCS (sharded data parallelism in groups smaller than the data-parallel
// ranks): the data axis split in two adjacent axes, the groups
// ("data_replica", slower) and the ranks of one group ("sharded_data");
// "data" then names both together (MeshAttr).
inline constexpr llvm::StringLiteral kDataReplicaAxis = "data_replica";
inline constexpr llvm::StringLiteral kPipelineAxis = "pipeline";
inline constexpr llvm::StringLiteral kTensorAxis = "tensor";

// Pipeline stages (cleave-pipeline-partition, cleave-pipeline-schedule).
inline constexpr llvm::StringLiteral kStageAttr = "cleave.stage";
inline constexpr llvm::StringLiteral kStagesAttr = "cleave.stages";
inline constexpr llvm::StringLiteral kBoundaryAttr = "cleave.boundary";
inline constexpr llvm::StringLiteral kTiedStagesAttr = "cleave.tied_stages";
inline constexpr llvm::StringLiteral kFirstNodeAttr = "cleave.first_node";
inline constexpr llvm::StringLiteral kLastNodeAttr = "cleave.last_node";
inline constexpr llvm::StringLiteral kRoleAttr = "cleave.role";
// prescaled_batch false (cleave-split-token-reads): on a token-ids or
// targets argument, the number of parts each microbatch is read in, one
// per tensor-parallel rank; the argument is the rank's part.
inline constexpr llvm::StringLiteral kReadPartsAttr = "cleave.read_parts";

// ZeRO-1 (cleave-shard-optimizer-state): on a parameter, the mesh axis its
// optimizer state and update are split over (DistributionOps.h,
// stateShards).
inline constexpr llvm::StringLiteral kStateAxisAttr = "cleave.state_axis";

// Sharded data parallelism (cleave-shard-parameters): on a parameter whose
// state is split (kStateAxisAttr), the same axis again: its persistent
// storage is then this rank's chunk only, and functions read the whole
// parameter through cleave.gather_param.
inline constexpr llvm::StringLiteral kParamAxisAttr = "cleave.param_axis";
// ZeRO-1 under mixed precision (cleave-shard-optimizer-state,
// master-copies): on a parameter whose state is split (kStateAxisAttr) and
// which every function reads in one low float type only, that element type.
// A rank then holds the whole parameter in that type (the working copy its
// functions read) and its fp32 value, the master weights, only for its own
// chunk (at `cleave.master_offset`): the optimizer updates the master
// chunk, and cleave.cast_master_chunk and cleave.all_gather_params in the
// stage's refresh function make the working copy from the masters at the
// start of each step.
inline constexpr llvm::StringLiteral kWorkingTypeAttr = "cleave.working_type";
// On a cleave.gather_param (cleave-shard-parameters, processes-per-host):
// the group's ranks on one host; the emitter gathers within the host first,
// then across hosts.
inline constexpr llvm::StringLiteral kGatherPerHostAttr =
    "cleave.gather_per_host";

// Sharded data parallelism's gradient buckets (cleave-bucket-scatters): on
// a cleave.reduce_scatter, that it only starts; the cleave.wait_scatter of
// its result completes it. Dropped, the op is a synchronous one.
inline constexpr llvm::StringLiteral kEventAttr = "cleave.event";

// Data parallelism overlapping backward (cleave-overlap-gradients): on a
// backward function, its copy for the step's last microbatch; on that copy,
// the function it copies.
inline constexpr llvm::StringLiteral kLastMicrobatchAttr =
    "cleave.last_microbatch";
inline constexpr llvm::StringLiteral kLastMicrobatchOfAttr =
    "cleave.last_microbatch_of";

/// Every discardable `cleave.*` attribute name the compiler writes, the
/// distribution ones included; sorted.
inline constexpr llvm::StringLiteral kKnownAttrNames[] = {
    "cleave.backward",
    "cleave.backward_seconds",
    "cleave.boundary",
    "cleave.buffers",
    "cleave.differentiable",
    "cleave.elided_data",
    "cleave.event",
    "cleave.first_node",
    "cleave.forward",
    "cleave.forward_seconds",
    "cleave.frozen",
    "cleave.full_type",
    "cleave.gather_per_host",
    "cleave.grad_of_arg",
    "cleave.grad_of_result",
    "cleave.grad_offset",
    "cleave.host_copy_seconds",
    "cleave.init",
    "cleave.kind",
    "cleave.last_microbatch",
    "cleave.last_microbatch_of",
    "cleave.last_node",
    "cleave.loss_scaling",
    "cleave.master_offset",
    "cleave.memory",
    "cleave.memory_space",
    "cleave.memory_timeline",
    "cleave.memory_timeline_without_remat",
    "cleave.mesh",
    "cleave.offset",
    "cleave.offsets",
    "cleave.onnx_name",
    "cleave.param_axis",
    "cleave.pipeline",
    "cleave.read_parts",
    "cleave.recompute",
    "cleave.recompute_seconds",
    "cleave.role",
    "cleave.saved",
    "cleave.saved_from",
    "cleave.schedule",
    "cleave.shapes_only",
    "cleave.shard_collective_seconds",
    "cleave.sharding",
    "cleave.sharding_stop",
    "cleave.slots",
    "cleave.spec_notes",
    "cleave.stage",
    "cleave.stages",
    "cleave.state_axis",
    "cleave.state_offsets",
    "cleave.tensor_parallel_seed",
    "cleave.tied_stages",
    "cleave.unpadded_shape",
    "cleave.working_type",
};

} // namespace mlir::cleave

#endif // CLEAVE_IR_ATTRNAMES_H
