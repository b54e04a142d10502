//===- EmitFunction.cpp - a function's body as runtime instructions ------===//
//
// RankProgram::emitFunction (RankProgram.h): each op of a planned function
// becomes a kernel, a collective, a send or receive, an event or a free
// after a last use, reading tensors by their planned offsets. Inputs bind
// by their cleave.role, outputs by their ONNX names.
//
//===----------------------------------------------------------------------===//

#include "passes/ForwardBackward.h"
#include "passes/Layout.h"
#include "passes/RankProgram.h"

#include "ir/AttrNames.h"
#include "passes/NodeName.h"
#include "passes/RankBoxes.h"

#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace mlir::cleave;

LogicalResult RankProgram::emitFunction(func::FuncOp func) {
  pb::FunctionKind kind = kindOf(func);
  pb::Function *fn = program.add_functions();
  fn->set_name(func.getName().str());
  fn->set_kind(kind);
  if (func.isExternal())
    return func.emitError() << "cannot emit a function without a body";
  Block &body = func.getBody().front();
  // Stage boundaries are cleave.send and cleave.recv ops by now.
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (func.getArgAttr(i, kBoundaryAttr) ||
        func.getArgAttr(i, "cleave.grad_of_result"))
      return func.emitError()
             << "argument " << i
             << " is a pipeline stage boundary; run "
                "cleave-stage-transfers to make it a cleave.recv";
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    if (func.getResultAttr(i, kBoundaryAttr) ||
        func.getResultAttr(i, "cleave.grad_of_arg"))
      return func.emitError()
             << "result " << i
             << " is a pipeline stage boundary; run "
                "cleave-stage-transfers to make it a cleave.send";

  // What the function receives first, in order: the runtime posts these
  // before binding the step's inputs.
  Block::iterator rest = body.begin();
  for (; rest != body.end() && isa<RecvOp>(*rest); ++rest)
    if (failed(emitRecv(cast<RecvOp>(*rest), fn)))
      return failure();

  llvm::DenseSet<Value> freeable;
  auto forwardName = func->getAttrOfType<FlatSymbolRefAttr>("cleave.forward");
  // Looked up once: a backward has an argument per saved value.
  func::FuncOp forward = forwardName ? forwardOf(func) : func::FuncOp();
  for (BlockArgument arg : body.getArguments()) {
    auto from = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                   "cleave.saved_from");
    if (!from) {
      if (failed(bindInput(func, arg)))
        return failure();
      continue;
    }
    if (!forward ||
        from.getInt() >=
            forward.getBody().front().getTerminator()->getNumOperands())
      return func.emitError()
             << "argument " << arg.getArgNumber() << " names no forward result";
    Value source =
        forward.getBody().front().getTerminator()->getOperand(from.getInt());
    auto it = tensorOf.find(source);
    if (it == tensorOf.end())
      return func.emitError() << "the forward function " << forwardName
                              << " must come before its backward";
    int id = it->second; // tensorOf[arg] may rehash and move `it`
    tensorOf[arg] = id;
    // A saved gathered parameter is read through its view, and freed as
    // its padded space.
    if (activationTensors.contains(storageOf(id)))
      freeable.insert(arg);
  }

  llvm::DenseMap<Value, Operation *> lastUser;
  for (Operation &op : body)
    for (Value operand : op.getOperands())
      lastUser[operand] = &op;
  for (Value arg : freeable)
    if (!lastUser.count(arg))
      fn->add_body()->mutable_free()->set_tensor(
          storageOf(tensorOf.lookup(arg)));

  for (Operation &op : llvm::make_range(rest, body.end())) {
    if (auto recv = dyn_cast<RecvOp>(op)) {
      if (failed(emitRecv(recv, fn)))
        return failure();
      continue;
    }
    if (auto send = dyn_cast<SendOp>(op)) {
      // No free after a send: the sent tensor stays in its slot until the
      // receiver has it (the runtime's send does not wait).
      pb::SendRecv *r = fn->add_body()->mutable_send_recv();
      r->set_send(true);
      r->set_peer(peerRank(send.getAxis(), send.getPeer()));
      r->set_tensor(tensorOf.lookup(send.getInput()));
      r->set_tag(send.getTag());
      continue;
    }
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [index, v] : llvm::enumerate(ret.getOperands())) {
        if (func.getResultAttr(index, "cleave.saved"))
          continue;
        pb::Binding *binding = program.add_outputs();
        binding->set_tensor(tensorOf.lookup(v));
        auto name =
            func.getResultAttrOfType<StringAttr>(index, "cleave.onnx_name");
        binding->set_name(name ? name.str() : "result");
        auto type = v.getType().cast<RankedTensorType>();
        bool loss =
            type.getRank() == 0 && type.getElementType().isa<FloatType>();
        binding->set_role(loss ? pb::LOSS : pb::OTHER);
      }
      continue;
    }
    if (auto get = dyn_cast<GetParamOp>(op)) {
      auto it = paramTensor.find(get.getName());
      if (it == paramTensor.end())
        return get.emitError() << "no parameter @" << get.getName();
      tensorOf[get.getResult()] = it->second;
      continue;
    }
    if (auto get = dyn_cast<GetGradShardOp>(op)) {
      auto it = splitViews.find(get.getName());
      if (it == splitViews.end() || it->second.gradChunk < 0)
        return get.emitError() << "parameter @" << get.getName()
                               << " has no planned, split gradient";
      tensorOf[get.getResult()] = it->second.gradChunk;
      continue;
    }
    if (auto get = dyn_cast<GetGradOp>(op)) {
      auto it = gradTensor.find(get.getName());
      if (it == gradTensor.end())
        return get.emitError()
               << "parameter @" << get.getName() << " has no planned gradient";
      tensorOf[get.getResult()] = it->second;
      continue;
    }
    std::string name = onnxNodeName(op.getLoc());
    if (auto acc = dyn_cast<AccumulateGradOp>(op)) {
      auto it = gradTensor.find(acc.getName());
      if (it == gradTensor.end())
        return acc.emitError()
               << "parameter @" << acc.getName() << " has no planned gradient";
      pb::Kernel *kernel = fn->add_body()->mutable_kernel();
      kernel->set_op("accumulate_grad");
      kernel->set_location(name);
      kernel->add_inputs(tensorOf.lookup(acc.getGrad()));
      kernel->add_outputs(it->second);
      addFrees(op, fn, freeable, lastUser);
      continue;
    }
    if (auto reduce = dyn_cast<AllReduceGradsOp>(op)) {
      std::optional<ArrayRef<int64_t>> members;
      if (auto m = reduce.getMembers())
        members = *m;
      if (failed(emitBucket(fn->add_body()->mutable_collective(),
                            reduce.getParams(), reduce.getGroup(), members,
                            reduce.getReduce(), &op)))
        return failure();
      continue;
    }
    if (auto scatter = dyn_cast<ReduceScatterGradsOp>(op)) {
      pb::Collective *c = fn->add_body()->mutable_collective();
      if (failed(emitSplitBucket(c, scatter.getParams(), scatter.getGroup(),
                                 /*gather=*/false, &op)))
        return failure();
      c->set_reduce(scatter.getReduce() == "sum" ? pb::SUM : pb::MEAN);
      continue;
    }
    if (auto cast = dyn_cast<CastMasterChunkOp>(op)) {
      // The master chunk rounded into this rank's chunk of the working copy.
      auto views = splitViews.find(cast.getName());
      if (views == splitViews.end() || views->second.master < 0)
        return cast.emitError() << "parameter @" << cast.getName()
                                << " has no planned master chunk";
      pb::Kernel *kernel = fn->add_body()->mutable_kernel();
      kernel->set_op("cast");
      kernel->set_location(cast.getName().str());
      kernel->add_inputs(views->second.master);
      kernel->add_outputs(views->second.paramChunk);
      continue;
    }
    if (auto gather = dyn_cast<AllGatherParamsOp>(op)) {
      if (failed(emitSplitBucket(fn->add_body()->mutable_collective(),
                                 gather.getParams(), gather.getGroup(),
                                 /*gather=*/true, &op)))
        return failure();
      continue;
    }
    auto allReduceStart = dyn_cast<AllReduceGradsStartOp>(op);
    auto scatterStart = dyn_cast<ReduceScatterGradsStartOp>(op);
    if (allReduceStart || scatterStart) {
      FailureOr<int> event = programEvent(
          &op, allReduceStart ? allReduceStart.getEvent()
                              : scatterStart.getEvent());
      pb::Instruction inst;
      if (failed(event))
        return failure();
      if (allReduceStart &&
          failed(emitBucket(inst.mutable_collective(),
                            allReduceStart.getParams(),
                            allReduceStart.getGroup(), std::nullopt,
                            allReduceStart.getReduce(), &op)))
        return failure();
      if (scatterStart) {
        if (failed(emitSplitBucket(inst.mutable_collective(),
                                   scatterStart.getParams(),
                                   scatterStart.getGroup(),
                                   /*gather=*/false, &op)))
          return failure();
        inst.mutable_collective()->set_reduce(
            scatterStart.getReduce() == "sum" ? pb::SUM : pb::MEAN);
      }
      inst.mutable_collective()->set_event(*event);
      // Right after the kernel before it, ahead of that kernel's frees:
      // the reduction starts as soon as its gradients are final.
      int at = fn->body_size();
      while (at > 0 && fn->body(at - 1).has_free())
        --at;
      *fn->add_body() = std::move(inst);
      for (int i = fn->body_size() - 1; i > at; --i)
        fn->mutable_body()->SwapElements(i, i - 1);
      continue;
    }
    if (auto wait = dyn_cast<WaitGradsOp>(op)) {
      FailureOr<int> event = programEvent(&op, wait.getEvent());
      if (failed(event))
        return failure();
      pb::Event *e = fn->add_body()->mutable_event();
      e->set_id(*event);
      e->set_wait(true);
      continue;
    }
    if (auto scatter = dyn_cast<ReduceScatterOp>(op)) {
      // A value reduce-scattered over one mesh axis (a sharded
      // parameter's gradient, cleave-shard-parameters).
      auto offsets = op.getAttrOfType<DenseI64ArrayAttr>("cleave.offsets");
      if (!offsets || offsets.size() != 1)
        return op.emitError() << "op has no planned offsets; run "
                                 "cleave-memory-plan first";
      if (scatter.getAxes().size() != 1 || scatter.getDim() != 0 ||
          scatter.getReduce() == "max")
        return op.emitError() << "the runtime reduce-scatters over one mesh "
                                 "axis along dimension 0, by sum or mean";
      auto id =
          addTensor(scatter.getType(), offsets[0], pb::ACTIVATIONS, name, &op);
      if (failed(id))
        return failure();
      FailureOr<int> group = groupIndex(
          scatter.getAxes()[0].cast<StringAttr>().getValue(), std::nullopt,
          &op);
      if (failed(group))
        return failure();
      pb::Collective *c = fn->add_body()->mutable_collective();
      c->set_kind(pb::REDUCE_SCATTER);
      c->set_group(*group);
      c->set_reduce(scatter.getReduce() == "sum" ? pb::SUM : pb::MEAN);
      c->add_inputs(tensorOf.lookup(scatter.getInput()));
      c->add_outputs(*id);
      // Started only (cleave-bucket-scatters): its wait_scatter waits.
      if (auto event = op.getAttrOfType<IntegerAttr>(kEventAttr))
        c->set_event(startedEvent(scatterEvents, event.getInt()));
      tensorOf[scatter.getResult()] = *id;
      freeable.insert(scatter.getResult());
      addFrees(op, fn, freeable, lastUser);
      continue;
    }
    if (auto wait = dyn_cast<WaitScatterOp>(op)) {
      auto scatter = wait.getScattered().getDefiningOp<ReduceScatterOp>();
      auto event = scatter ? scatter->getAttrOfType<IntegerAttr>(kEventAttr)
                           : IntegerAttr();
      auto it = event ? scatterEvents.find(event.getInt())
                      : scatterEvents.end();
      if (it == scatterEvents.end())
        return op.emitError() << "waits for a reduce-scatter this function "
                                 "has not started";
      pb::Event *e = fn->add_body()->mutable_event();
      e->set_id(it->second);
      e->set_wait(true);
      addFrees(op, fn, freeable, lastUser);
      continue;
    }
    if (auto wait = dyn_cast<WaitParamOp>(op)) {
      auto gather = wait.getGathered().getDefiningOp<GatherParamOp>();
      auto it = gather && gather.getEvent()
                    ? gatherEvents.find(*gather.getEvent())
                    : gatherEvents.end();
      if (it == gatherEvents.end())
        return op.emitError() << "waits for a gather this function has not "
                                 "started";
      pb::Event *e = fn->add_body()->mutable_event();
      e->set_id(it->second);
      e->set_wait(true);
      addFrees(op, fn, freeable, lastUser);
      continue;
    }
    if (auto next = dyn_cast<GatherNextHopOp>(op)) {
      auto gather = next.getGathered().getDefiningOp<GatherParamOp>();
      std::optional<int64_t> event = gather ? gather.getEvent() : std::nullopt;
      auto first = event ? firstHopEvents.find(*event) : firstHopEvents.end();
      auto second = event ? secondHops.find(*event) : secondHops.end();
      if (first == firstHopEvents.end() || second == secondHops.end())
        return op.emitError() << "starts the second hop of a gather whose "
                                 "first hop this function has not started";
      pb::Event *e = fn->add_body()->mutable_event();
      e->set_id(first->second);
      e->set_wait(true);
      pb::Collective *c = fn->add_body()->mutable_collective();
      c->set_kind(pb::ALL_GATHER);
      c->set_group(second->second[0]);
      c->add_inputs(second->second[1]);
      c->add_outputs(second->second[2]);
      c->set_event(startedEvent(gatherEvents, *event));
      addFrees(op, fn, freeable, lastUser);
      continue;
    }
    if (auto gather = dyn_cast<GatherParamOp>(op)) {
      if (failed(emitGatherParam(gather, fn)))
        return failure();
      freeable.insert(gather.getResult());
      addFrees(op, fn, freeable, lastUser);
      continue;
    }
    // An all-reduce of a value: the clipping norm's sum over a group, and
    // Megatron's g (cleave.tp_reduce, a sum over the tensor axis).
    auto reduce = dyn_cast<AllReduceOp>(op);
    auto tpReduce = dyn_cast<TpReduceOp>(op);
    if (reduce || tpReduce) {
      auto offsets = op.getAttrOfType<DenseI64ArrayAttr>("cleave.offsets");
      if (!offsets || offsets.size() != 1)
        return op.emitError() << "op has no planned offsets; run "
                                 "cleave-memory-plan first";
      std::optional<AxisRef> tpGroup =
          tpReduce && tpReduce.getAxes().size() == 1
              ? parseGroupAxis(
                    tpReduce.getAxes()[0].cast<StringAttr>().getValue())
              : std::nullopt;
      if (tpReduce && !tpGroup)
        return op.emitError() << "the runtime all-reduces over one mesh axis "
                                 "or sub-axis";
      Value input = op.getOperand(0), result = op.getResult(0);
      auto id =
          addTensor(result.getType(), offsets[0], pb::ACTIVATIONS, name, &op);
      if (failed(id))
        return failure();
      FailureOr<int> group =
          reduce ? groupIndex(reduce.getGroup(), std::nullopt, &op)
                 : subAxisGroup(*tpGroup, &op);
      if (failed(group))
        return failure();
      StringRef how = reduce ? reduce.getReduce() : "sum";
      pb::Collective *c = fn->add_body()->mutable_collective();
      c->set_kind(pb::ALL_REDUCE);
      c->set_group(*group);
      c->set_reduce(how == "sum" ? pb::SUM : how == "mean" ? pb::MEAN : pb::MAX);
      c->add_inputs(tensorOf.lookup(input));
      c->add_outputs(*id);
      tensorOf[result] = *id;
      freeable.insert(result);
      addFrees(op, fn, freeable, lastUser);
      continue;
    }
    // Sequence parallelism's gather and reduce-scatter over the tensor
    // group: the runtime's flat ALL_GATHER and REDUCE_SCATTER, which
    // concatenate and split along dimension 0 (the partition transposes
    // the sequence there).
    // The token ids' gather of prescaled_batch false (cleave.all_gather
    // over the tensor axis) is the same flat ALL_GATHER.
    auto spGather = dyn_cast<SpAllGatherOp>(op);
    auto spScatter = dyn_cast<SpReduceScatterOp>(op);
    auto allGather = dyn_cast<AllGatherOp>(op);
    if (spGather || spScatter || allGather) {
      auto offsets = op.getAttrOfType<DenseI64ArrayAttr>("cleave.offsets");
      if (!offsets || offsets.size() != 1)
        return op.emitError() << "op has no planned offsets; run "
                                 "cleave-memory-plan first";
      ArrayAttr axes = spGather    ? spGather.getAxes()
                       : allGather ? allGather.getAxes()
                                   : spScatter.getAxes();
      int64_t dim = spGather    ? spGather.getDim()
                    : allGather ? allGather.getDim()
                                : spScatter.getDim();
      if (axes.size() != 1 || dim != 0)
        return op.emitError() << "the runtime gathers and scatters over one "
                                 "mesh axis along dimension 0, got dim "
                              << dim << " over " << axes;
      Value input = op.getOperand(0), result = op.getResult(0);
      auto id =
          addTensor(result.getType(), offsets[0], pb::ACTIVATIONS, name, &op);
      if (failed(id))
        return failure();
      FailureOr<int> group = groupIndex(
          axes[0].cast<StringAttr>().getValue(), std::nullopt, &op);
      if (failed(group))
        return failure();
      pb::Collective *c = fn->add_body()->mutable_collective();
      c->set_kind(spScatter ? pb::REDUCE_SCATTER : pb::ALL_GATHER);
      c->set_group(*group);
      if (spScatter)
        c->set_reduce(pb::SUM);
      c->add_inputs(tensorOf.lookup(input));
      c->add_outputs(*id);
      tensorOf[result] = *id;
      freeable.insert(result);
      addFrees(op, fn, freeable, lastUser);
      continue;
    }
    // A copy between memory spaces (activation offload): the result is a
    // tensor of the host arena (cleave.offload) or of the device arena
    // (cleave.fetch).
    // Megatron's f (cleave.tp_copy) is the identity forward: a copy.
    if (isa<OffloadOp, FetchOp, TpCopyOp>(op)) {
      auto offsets = op.getAttrOfType<DenseI64ArrayAttr>("cleave.offsets");
      if (!offsets || offsets.size() != 1)
        return op.emitError() << "op has no planned offsets; run "
                                 "cleave-memory-plan first";
      auto id = addTensor(op.getResult(0).getType(), offsets[0],
                          pb::ACTIVATIONS, name, &op, isa<OffloadOp>(op));
      if (failed(id))
        return failure();
      pb::Copy *copy = fn->add_body()->mutable_copy();
      copy->set_source(tensorOf.lookup(op.getOperand(0)));
      copy->set_destination(*id);
      tensorOf[op.getResult(0)] = *id;
      freeable.insert(op.getResult(0));
      addFrees(op, fn, freeable, lastUser);
      continue;
    }
    if (auto space = op.getAttrOfType<MemorySpaceAttr>(kMemorySpaceAttr);
        space && space.getValue() == MemorySpace::host)
      return op.emitError() << "only cleave.offload writes host memory; the "
                               "runtime's kernels read and write the device's";
    if (isa<AdamWOp, SgdOp>(op)) {
      if (failed(emitUpdate(op, fn)))
        return failure();
      addFrees(op, fn, freeable, lastUser);
      continue;
    }
    auto offsets = op.getAttrOfType<DenseI64ArrayAttr>("cleave.offsets");
    if (!offsets || (int64_t)offsets.size() != op.getNumResults())
      return op.emitError() << "op has no planned offsets; run "
                               "cleave-memory-plan first";
    if (auto constant = dyn_cast<ConstantOp>(op)) {
      auto id =
          addTensor(constant.getType(), offsets[0], pb::CONSTANTS, name, &op);
      if (failed(id))
        return failure();
      auto bytes = bytesOf(constant.getValue().cast<ElementsAttr>(), &op);
      if (failed(bytes))
        return failure();
      program.mutable_tensors(*id)->set_data(std::move(*bytes));
      tensorOf[constant.getResult()] = *id;
      continue;
    }
    if (auto index = dyn_cast<AxisIndexOp>(op)) {
      // This rank's coordinate: a constant of its program.
      auto id = addTensor(index.getType(), offsets[0], pb::CONSTANTS, name, &op);
      if (failed(id))
        return failure();
      int64_t c = mesh ? mesh.getCoordinate(rank, index.getAxis()) : 0;
      program.mutable_tensors(*id)->set_data(
          std::string(reinterpret_cast<const char *>(&c), sizeof c));
      tensorOf[index.getResult()] = *id;
      continue;
    }
    if (!isa<CleaveDialect>(op.getDialect()))
      return op.emitError()
             << "op '" << op.getName() << "' has no runtime kernel";

    // An operand whose space a result takes over (the fused loss writes
    // the logits' gradient over the logits) is dead before the kernel.
    if (isa<SoftmaxCrossEntropyFusedOp>(op))
      for (Value v : op.getOperands())
        if (freeable.contains(v) && lastUser.lookup(v) == &op &&
            llvm::is_contained(offsets.asArrayRef(),
                               program.tensors(tensorOf.lookup(v)).offset())) {
          fn->add_body()->mutable_free()->set_tensor(tensorOf.lookup(v));
          freeable.erase(v);
        }

    pb::Kernel *kernel = fn->add_body()->mutable_kernel();
    kernel->set_op(op.getName().stripDialect().str());
    kernel->set_location(name);
    auto segments =
        op.getAttrOfType<DenseI32ArrayAttr>("operand_segment_sizes");
    unsigned operand = 0;
    if (segments) {
      // Optional operands that are absent are -1, so operand positions
      // stay those of the op's definition.
      for (int32_t size : segments.asArrayRef()) {
        if (size == 0)
          kernel->add_inputs(-1);
        for (int32_t k = 0; k < size; ++k)
          kernel->add_inputs(tensorOf.lookup(op.getOperand(operand++)));
      }
    } else {
      for (Value v : op.getOperands())
        kernel->add_inputs(tensorOf.lookup(v));
      if (isa<AttentionOp>(op) && op.getNumOperands() == 3)
        kernel->add_inputs(-1); // no mask
    }
    if (failed(addAttributes(op, kernel)))
      return failure();
    for (auto [result, offset] :
         llvm::zip(op.getResults(), offsets.asArrayRef())) {
      auto id = addTensor(result.getType(), offset, pb::ACTIVATIONS, name, &op);
      if (failed(id))
        return failure();
      tensorOf[result] = *id;
      kernel->add_outputs(*id);
      freeable.insert(result);
    }
    addFrees(op, fn, freeable, lastUser);
  }
  return success();
}

/// A forward function's arguments: the step's inputs. The first two
/// integer [batch, seq] arguments are the token ids and the targets.
LogicalResult RankProgram::bindInput(func::FuncOp func, BlockArgument arg) {
  auto offset =
      func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(), "cleave.offset");
  if (!offset)
    return func.emitError()
           << "argument " << arg.getArgNumber() << " has no planned offset";
  auto name =
      func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "cleave.onnx_name");
  auto role =
      func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "cleave.role");
  std::string argName =
      name ? name.str()
           : (role ? role.str() : "arg" + std::to_string(arg.getArgNumber()));
  auto id = addTensor(arg.getType(), offset.getInt(), pb::IO, argName, func);
  if (failed(id))
    return failure();
  tensorOf[arg] = *id;
  pb::Binding *binding = program.add_inputs();
  binding->set_name(argName);
  binding->set_tensor(*id);
  auto type = arg.getType().cast<RankedTensorType>();
  if (role && role.getValue() == "loss_scale") {
    if (type.getRank() != 0 || !type.getElementType().isF32())
      return func.emitError() << "the loss scale argument must be tensor<f32>";
    binding->set_role(pb::LOSS_SCALE);
    return success();
  }
  if (role && (role.getValue() == "tokens" || role.getValue() == "targets")) {
    // The model's inputs, named by cleave-input-roles.
    binding->set_role(role.getValue() == "tokens" ? pb::TOKENS : pb::TARGETS);
    return success();
  }
  if (role && role.getValue() == "step") {
    if (type.getRank() != 0 || !type.getElementType().isInteger(64))
      return func.emitError() << "the step argument must be tensor<i64>";
    binding->set_role(pb::STEP);
    return success();
  }
  // Token ids and targets are marked by cleave-input-roles; any other
  // input is the user's.
  binding->set_role(pb::OTHER);
  return success();
}

/// The op's attributes, without the plan's and the symbol it updates.
LogicalResult RankProgram::addAttributes(Operation &op, pb::Kernel *kernel) {
  if (auto dropout = dyn_cast<DropoutOp>(op))
    if (failed(addDropoutAttributes(dropout, kernel)))
      return failure();
  for (NamedAttribute attr : op.getAttrs()) {
    StringRef key = attr.getName().getValue();
    if (key == "operand_segment_sizes" || key.startswith("cleave.") ||
        attr.getValue().isa<SymbolRefAttr>() ||
        (isa<DropoutOp>(op) && key == "split"))
      continue;
    pb::Attribute converted;
    if (failed(convertAttribute(attr.getValue(), converted)))
      return op.emitError()
             << "attribute '" << key
             << "' has a kind the runtime cannot read: " << attr.getValue();
    (*kernel->mutable_attributes())[key.str()] = converted;
  }
  return success();
}

/// What a dropout kernel reads besides its ratio, stream and full shape
/// (ops/DropoutStream.h): the run's seed, and for a slice of the full
/// tensor this rank's offsets in it, from the split (the runtime adds the
/// step and the microbatch's samples).
LogicalResult RankProgram::addDropoutAttributes(DropoutOp dropout,
                                                pb::Kernel *kernel) {
  auto &attrs = *kernel->mutable_attributes();
  attrs["seed"].set_i(seed);
  std::optional<ArrayRef<int64_t>> full = dropout.getFullShape();
  if (!full)
    return success();
  auto emitError = [&] {
    return dropout.emitOpError() << "the rank's slice: ";
  };
  FailureOr<RankBoxes> boxes =
      rankBoxes(*full, dropout.getSplitAttr(), mesh, rank, emitError);
  if (failed(boxes))
    return failure();
  auto local = dropout.getType().cast<RankedTensorType>();
  if (boxes->boxes.size() != 1 ||
      !llvm::equal(boxes->localShape, local.getShape()))
    return dropout.emitOpError()
           << "its operand " << local << " is not one box of "
           << "full_shape by split " << dropout.getSplitAttr()
           << "; a blocked split of a dropout's input is not supported";
  auto *offsets = attrs["offsets"].mutable_ints();
  for (int64_t start : boxes->boxes.front().start)
    offsets->add_values(start);
  return success();
}

/// A receive: its tensor in the planned (slot) offset, then the runtime's
/// blocking receive into it.
LogicalResult RankProgram::emitRecv(RecvOp recv, pb::Function *fn) {
  auto offsets = recv->getAttrOfType<DenseI64ArrayAttr>("cleave.offsets");
  if (!offsets || offsets.size() != 1)
    return recv.emitError() << "op has no planned offsets; run "
                               "cleave-memory-plan first";
  bool gradient = recv.getResult().getParentBlock()->getParentOp()->hasAttr(
      "cleave.forward");
  auto id =
      addTensor(recv.getType(), offsets[0], pb::ACTIVATIONS,
                gradient ? "received gradient" : "received activation", recv);
  if (failed(id))
    return failure();
  tensorOf[recv.getResult()] = *id;
  pb::SendRecv *r = fn->add_body()->mutable_send_recv();
  r->set_send(false);
  r->set_peer(peerRank(recv.getAxis(), recv.getPeer()));
  r->set_tensor(*id);
  r->set_tag(recv.getTag());
  return success();
}

/// An optimizer update: inputs (grad, step, sum of squares or -1),
/// outputs (the parameter, then its state tensors), all updated in place.
LogicalResult RankProgram::emitUpdate(Operation &op, pb::Function *fn) {
  auto symbol = op.getAttrOfType<FlatSymbolRefAttr>("name");
  auto param = paramTensor.find(symbol.getValue());
  if (param == paramTensor.end())
    return op.emitError() << "no parameter " << symbol;
  pb::Kernel *kernel = fn->add_body()->mutable_kernel();
  kernel->set_op(op.getName().stripDialect().str());
  kernel->set_location(onnxNodeName(op.getLoc()));
  kernel->add_inputs(tensorOf.lookup(op.getOperand(0)));
  kernel->add_inputs(tensorOf.lookup(op.getOperand(1)));
  kernel->add_inputs(op.getNumOperands() > 2 ? tensorOf.lookup(op.getOperand(2))
                                             : -1);
  // A split parameter (ZeRO-1): only this rank's chunk is updated, its
  // fp32 master chunk if it has a working copy.
  auto split = splitViews.find(symbol.getValue());
  kernel->add_outputs(split == splitViews.end()   ? param->second
                      : split->second.master >= 0 ? split->second.master
                                                  : split->second.paramChunk);
  auto states = op.getAttrOfType<DenseI64ArrayAttr>("cleave.state_offsets");
  const char *names[] = {".exp_avg", ".exp_avg_sq"};
  int64_t k = 0;
  for (int64_t offset : states ? states.asArrayRef() : ArrayRef<int64_t>{}) {
    std::string stateName =
        symbol.getValue().str() +
        (isa<SgdOp>(op) ? ".momentum_buffer" : names[std::min<int64_t>(k, 1)]);
    auto id = addTensor(op.getOperand(0).getType(), offset, pb::OPTIMIZER_STATE,
                        stateName, &op);
    if (failed(id))
      return failure();
    kernel->add_outputs(*id);
    ++k;
  }
  return addAttributes(op, kernel);
}

/// A sharded parameter gathered whole (ZeRO-3): the all-gather of every
/// rank's chunk into the value's padded space, which the memory plan sized
/// so (a view of it), read as the parameter's shape from its start.
LogicalResult RankProgram::emitGatherParam(GatherParamOp gather,
                                           pb::Function *fn) {
  auto offsets = gather->getAttrOfType<DenseI64ArrayAttr>("cleave.offsets");
  if (!offsets || offsets.size() != 1)
    return gather.emitError() << "op has no planned offsets; run "
                                 "cleave-memory-plan first";
  ParameterOp param = lookupParameter(gather, gather.getNameAttr());
  std::optional<StateShards> shards =
      param ? stateShards(param) : std::nullopt;
  auto chunk = paramTensor.find(gather.getName());
  if (!shards || chunk == paramTensor.end())
    return gather.emitError() << "parameter @" << gather.getName()
                              << " has no planned chunk";
  std::string name = onnxNodeName(gather.getLoc());
  Type element = param.getType().cast<RankedTensorType>().getElementType();
  // The padded space is the activation the plan counts, written by the
  // all-gather, so that the runtime measures what the plan predicts; the
  // whole parameter that kernels read is a view of its start, and a free
  // of it frees the padded space.
  FailureOr<int> padded =
      addTensor(RankedTensorType::get({shards->padded()}, element), offsets[0],
                pb::ACTIVATIONS, gather.getName().str() + " (gathered, padded)",
                gather);
  if (failed(padded))
    return failure();
  FailureOr<int> whole =
      addTensor(gather.getType(), offsets[0], pb::VIEW, name, gather);
  if (failed(whole))
    return failure();
  freedAs[*whole] = *padded;
  FailureOr<int> group = groupIndex(shards->axis, std::nullopt, gather);
  if (failed(group))
    return failure();
  int input = chunk->second;
  if (auto perHost = gather->getAttrOfType<IntegerAttr>(kGatherPerHostAttr)) {
    // Hierarchical (sdp_hierarchical_allgather): the k ranks of this
    // host's block of the group gather into that block of the padded
    // space, then one rank per host gathers the blocks.
    int64_t k = perHost.getInt();
    int64_t at = mesh.getCoordinate(rank, shards->axis);
    int64_t first = at - at % k;
    SmallVector<int64_t> host, across;
    for (int64_t i = 0; i < k; ++i)
      host.push_back(first + i);
    for (int64_t c = at % k; c < shards->ranks; c += k)
      across.push_back(c);
    FailureOr<int> inHost =
        groupIndex(shards->axis, ArrayRef<int64_t>(host), gather, "host");
    FailureOr<int> acrossHosts = groupIndex(
        shards->axis, ArrayRef<int64_t>(across), gather, "across-hosts");
    int64_t chunkBytes = shards->chunk * elementBytes(element);
    FailureOr<int> block = addTensor(
        RankedTensorType::get({k * shards->chunk}, element),
        offsets[0] + first * chunkBytes, pb::VIEW,
        gather.getName().str() + " (host block)", gather);
    if (failed(inHost) || failed(acrossHosts) || failed(block))
      return failure();
    pb::Collective *c = fn->add_body()->mutable_collective();
    c->set_kind(pb::ALL_GATHER);
    c->set_group(*inHost);
    c->add_inputs(input);
    c->add_outputs(*block);
    input = *block;
    group = acrossHosts;
    // With a cleave.gather_next_hop (cleave-prefetch-gathers) only the
    // first hop starts here; the next hop waits for it and starts the
    // second.
    std::optional<int64_t> event = gather.getEvent();
    if (event && llvm::any_of(gather->getUsers(), [](Operation *user) {
          return isa<GatherNextHopOp>(user);
        })) {
      c->set_event(startedEvent(firstHopEvents, *event));
      secondHops[*event] = {*group, input, *padded};
      tensorOf[gather.getResult()] = *whole;
      return success();
    }
  }
  pb::Collective *c = fn->add_body()->mutable_collective();
  c->set_kind(pb::ALL_GATHER);
  c->set_group(*group);
  c->add_inputs(input);
  c->add_outputs(*padded);
  // Started only (cleave-prefetch-gathers): its cleave.wait_param waits.
  if (std::optional<int64_t> event = gather.getEvent())
    c->set_event(startedEvent(gatherEvents, *event));
  tensorOf[gather.getResult()] = *whole;
  return success();
}

/// A bucket's gradient all-reduce (cleave.all_reduce_grads and its start)
/// into `c`: in place on the parameters' gradient tensors.
LogicalResult RankProgram::emitBucket(pb::Collective *c, ArrayAttr params,
                                      StringRef groupName,
                                      std::optional<ArrayRef<int64_t>> members,
                                      StringRef reduce, Operation *op) {
  c->set_kind(pb::ALL_REDUCE);
  FailureOr<int> group = groupIndex(groupName, members, op);
  if (failed(group))
    return failure();
  c->set_group(*group);
  c->set_reduce(reduce == "sum" ? pb::SUM : pb::MEAN);
  for (Attribute name : params) {
    auto it = gradTensor.find(name.cast<FlatSymbolRefAttr>().getValue());
    if (it == gradTensor.end())
      return op->emitError()
             << "parameter " << name << " has no planned gradient";
    c->add_inputs(it->second);
    c->add_outputs(it->second);
  }
  return success();
}

/// A ZeRO-1 bucket into `c`, in place: each parameter's padded gradient
/// reduce-scattered into this rank's chunk of it, or (`gather`) each
/// parameter's chunk all-gathered into its padded buffer.
LogicalResult RankProgram::emitSplitBucket(pb::Collective *c, ArrayAttr params,
                                           StringRef groupName, bool gather,
                                           Operation *op) {
  c->set_kind(gather ? pb::ALL_GATHER : pb::REDUCE_SCATTER);
  FailureOr<int> group = groupIndex(groupName, std::nullopt, op);
  if (failed(group))
    return failure();
  c->set_group(*group);
  for (Attribute name : params) {
    auto it = splitViews.find(name.cast<FlatSymbolRefAttr>().getValue());
    if (it == splitViews.end() || (!gather && it->second.gradFlat < 0) ||
        (gather && it->second.paramFlat < 0))
      return op->emitError() << "parameter " << name
                             << " has no planned, split "
                             << (gather ? "buffer" : "gradient");
    const SplitViews &v = it->second;
    c->add_inputs(gather ? v.paramChunk : v.gradFlat);
    c->add_outputs(gather ? v.paramFlat : v.gradChunk);
  }
  return success();
}

/// Free what `op` read last, and its results nobody reads.
void RankProgram::addFrees(Operation &op, pb::Function *fn,
                           const llvm::DenseSet<Value> &freeable,
                           llvm::DenseMap<Value, Operation *> &lastUser) {
  llvm::SmallPtrSet<Value, 4> done;
  for (Value v : op.getOperands())
    if (freeable.contains(v) && lastUser.lookup(v) == &op &&
        done.insert(v).second)
      fn->add_body()->mutable_free()->set_tensor(storageOf(tensorOf.lookup(v)));
  for (Value result : op.getResults())
    if (!lastUser.count(result))
      fn->add_body()->mutable_free()->set_tensor(
          storageOf(tensorOf.lookup(result)));
}
