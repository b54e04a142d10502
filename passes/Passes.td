//===- Passes.td - every Cleave pass -----------------------*- tablegen -*-===//
//
// One declaration per pass, with its options and a description that
// `cleave-opt --help` shows.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PASSES_TD
#define CLEAVE_PASSES_TD

include "mlir/Pass/PassBase.td"

def VerifyImported : Pass<"cleave-verify-imported", "ModuleOp"> {
  let summary = "checks the contract of the import phase";
  let description = [{
    After import, a module holds `cleave.parameter` symbols and one or more
    `func.func` whose ops are all cleave or func ops over statically shaped
    tensors, each located by the ONNX node it came from. Later phases rely
    on that; this pass says which op breaks it.

    ```mlir
    // Passes:
    func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
      %0 = cleave.exp %x : tensor<2x8xf32> loc("/Exp")
      return %0 : tensor<2x8xf32>
    }
    // Fails: "tensor<?x8xf32> is not statically shaped"
    ```

    With `require-loss` (cleave-compile sets it unless `--forward-only`),
    a function must also return a scalar float: the loss autodiff starts
    from. A model returning only `tensor<2x3xf32>` would otherwise train
    nothing.
  }];
  let options = [
    Option<"requireNames", "require-names", "bool", /*default=*/"false",
           "require every cleave op to carry an ONNX node name location">,
    Option<"requireLoss", "require-loss", "bool", /*default=*/"false",
           "require a model to train: each function returns a scalar float "
           "loss (a model without one would silently compile forward only)">,
  ];
}

def InputRoles : Pass<"cleave-input-roles", "ModuleOp"> {
  let summary = "names the model's token ids and targets (cleave.role)";
  let description = [{
    The runtime feeds each microbatch's token ids and targets to the
    arguments marked `cleave.role = "tokens"` and `cleave.role = "targets"`.
    They are the forward function's first two integer `[batch, seq]`
    arguments (DESIGN.md); this pass marks them once, so the partition
    (whose stages keep the marks of the arguments they read), the plan and
    the emitter read the role instead of guessing again. An argument that
    already has a role keeps it. The targets must have the token ids'
    shape.

    ```mlir
    func.func @forward(%ids: tensor<4x64xi64> {cleave.role = "tokens"},
                       %labels: tensor<4x64xi64> {cleave.role = "targets"}) -> tensor<f32>
    ```
  }];
}

def PlaceRanks : Pass<"cleave-place-ranks", "ModuleOp"> {
  let summary = "declares the device mesh: which rank holds which coordinates";
  let description = [{
    Puts `cleave.mesh` on the module: the axes `data`, `pipeline` and
    `tensor` with their degrees, in the order the `placement` strategy
    gives them. The first axis varies slowest in the rank number, so
    `cluster` (SMP's default: the ranks of one pipeline replica are
    neighbours) orders them data, pipeline, tensor, and `spread` (a
    replica's stages far apart, its data-parallel peers neighbours)
    tensor, pipeline, data; any order of the letters `D`, `P` and `T` is
    accepted too. Every later pass and the emitter derive ranks and
    communicator groups from this attribute, so placement is decided here
    only.

    ```mlir
    module attributes {cleave.mesh = #cleave.mesh<["data"=2, "pipeline"=4, "tensor"=1]>} {}
    ```
  }];
  let options = [
    Option<"data", "data", "int64_t", /*default=*/"1", "data-parallel degree">,
    Option<"pipeline", "pipeline", "int64_t", /*default=*/"1",
           "pipeline-parallel degree (ranks, not virtual stages)">,
    Option<"tensor", "tensor", "int64_t", /*default=*/"1",
           "tensor-parallel degree">,
    Option<"placement", "placement", "std::string", /*default=*/"\"cluster\"",
           "cluster, spread or an order of D, P and T (slowest first)">,
    Option<"shardedData", "sharded-data", "int64_t", /*default=*/"1",
           "MiCS: with 1 < this < data, the data axis becomes the axes "
           "data_replica (data / this groups) and sharded_data (this many "
           "consecutive data ranks), which the name data then covers">,
  ];
}

def Fuse : Pass<"cleave-fuse", "ModuleOp"> {
  let summary = "raises exported op chains to fused ops (attention, rotary, layer_norm, rms_norm, gelu, silu)";
  let description = [{
    `torch.onnx.export` spells LayerNorm (before opset 17: mean, centre,
    mean of squares, epsilon, sqrt, divide, then the scale and bias),
    RMSNorm, GELU (exact and tanh) and SiLU as
    chains of elementwise ops, rotary embeddings (rotate-half) as slices, a
    negation, a concat and products, and attention as two products around a
    softmax (a constant causal mask becomes `causal`; another mask is kept,
    unless it is computed from a parameter that is not `cleave.frozen`:
    `cleave.attention` has no gradient for its mask, so such a chain stays
    unfused and its gradients reach the parameter).
    This pass replaces each such chain with the
    dialect's op, which a backend runs as one fused kernel and later passes
    treat as a unit. A matrix product of a transposed 2-D operand (a
    linear layer's `[out, in]` weight) reads it with `transpose_lhs` /
    `transpose_rhs` instead of copying it. Chains are matched exactly (constants included); a
    chain that differs in any way is left as it is.

    ```mlir
    // Before:
    %s = cleave.sigmoid %x : tensor<2x8x192xf32>
    %y = cleave.mul %x, %s : (tensor<2x8x192xf32>, tensor<2x8x192xf32>) -> tensor<2x8x192xf32>
    // After:
    %y = cleave.silu %x : tensor<2x8x192xf32>
    ```
  }];
}

def PadVocabulary : Pass<"cleave-pad-vocabulary", "ModuleOp"> {
  let summary = "pads a vocabulary the tensor-parallel degree does not divide";
  let description = [{
    Megatron-LM's `--make-vocab-size-divisible-by`: a vocabulary of V rows
    that the tensor-parallel degree T does not divide (GPT-2's 50,257) is
    padded with zero rows to the next multiple of T, so that the embedding
    is vocab-parallel, the head column-parallel and the cross-entropy
    Megatron's vocab-parallel one, instead of all three whole on every
    rank. A parameter is a vocabulary when it is the table of an embedding
    of the model's input ids or the weight (`transpose_rhs`) of a product
    whose result reaches a softmax cross-entropy as its classes, through
    reshapes, casts, and slices and transposes that keep the classes last.
    The padded logits pass through the same ops; before the loss, the
    padded classes get `-inf` added, so that they take no probability and
    no gradient. Training is then the unpadded model's: the padding rows
    are zero, get zero gradients and stay zero under AdamW's decay.

    The parameter keeps its logical shape in `cleave.unpadded_shape`;
    `value`, params.bin, checkpoints and `--save-params` hold only the
    real rows, and ZeRO's state and parameter ranges count only those
    (docs/tensor-parallel.md, "Vocabulary padding"). A vocabulary read any
    other way is left as it is, with a remark naming the op: propagation
    then keeps it replicated.

    ```mlir
    // tensor=2: GPT-2 with a vocabulary of 257
    cleave.parameter @wte.weight {cleave.unpadded_shape = array<i64: 257, 64>} : tensor<258x64xf32>
    %l = cleave.matmul %h, %w {transpose_rhs} : (tensor<2x32x64xf32>, tensor<258x64xf32>) -> tensor<2x32x258xf32>
    %m = cleave.add %r, %inf : (tensor<64x258xf32>, tensor<258xf32>) -> tensor<64x258xf32>
    %loss = cleave.softmax_cross_entropy %m, %t ...
    ```
  }];
  let options = [
    Option<"tensor", "tensor", "int64_t", /*default=*/"0",
           "tensor-parallel degree (0: the size of the mesh's tensor "
           "axis); 1 leaves the module unchanged">,
  ];
}

def PropagateShardings : Pass<"cleave-propagate-shardings", "ModuleOp"> {
  let summary = "decides the tensor-parallel split of every value (Megatron-LM's, found from the graph)";
  let description = [{
    Tensor parallelism as GSPMD and openxla/shardy decide it: a few
    shardings are seeded where the graph's structure (not its names) shows
    Megatron-LM's split, and the sharding rules of the ops
    (ir/ShardingRules.cpp) carry them through the graph in both directions
    until nothing changes. Seeds, in this order, each only where the
    values are still undecided: (1) a product whose result returns to the
    residual stream (possibly through a bias add, reshapes and transposes)
    is row-parallel: its weight's contracted dimension is split and its
    result is a partial sum; (2) attention is split by heads; (3) a
    product of a norm's output with a weight is column-parallel (the
    weight's output features split: an MLP's up projection, SwiGLU's gate
    and up, a head over the vocabulary); (4) an embedding is
    vocab-parallel. Shardings already on parameters are kept and seed
    first. Propagating from the row-parallel products back through
    attention splits a fused QKV projection by heads as a blocked sharding
    (`3 blocks {"tensor"}`), and key/value projections of grouped-query
    attention over sub-axes when the degree exceeds their heads.

    Every parameter and op result that ends up split or partial gets
    `cleave.sharding`; everything else is replicated. Where a split value
    meets an op that needs it whole (a dimension the op must not split,
    an op without a rule), that operand is gathered and the op gets
    `cleave.sharding_stop` with the reason, also given as a remark. Two
    different splits of one dimension meeting at an op are an error
    naming its ONNX node. The pass decides only: local shapes and
    collectives are the partition step's (docs/tensor-parallel.md).

    ```mlir
    // After, with tensor=2 (GPT-2's MLP):
    cleave.parameter @"h.0.mlp.c_fc.weight" {cleave.sharding = #cleave.sharding<[{"tensor"}, {} ]>} : tensor<256x64xf32>
    cleave.parameter @"h.0.mlp.c_proj.weight" {cleave.sharding = #cleave.sharding<[{}, {"tensor"} ]>} : tensor<64x256xf32>
    %36 = cleave.matmul %34, %35 {cleave.sharding = #cleave.sharding<[{}, {}, {"tensor"} ]>, transpose_rhs} ...
    %41 = cleave.matmul %39, %40 {cleave.sharding = #cleave.sharding<[{}, {}, {} ], partial = ["tensor" ]>, transpose_rhs} ...
    ```
  }];
  let options = [
    Option<"tensor", "tensor", "int64_t", /*default=*/"0",
           "tensor-parallel degree (0: the size of the mesh's tensor "
           "axis); 1 leaves the module unchanged">,
    Option<"vocab", "vocab", "bool", /*default=*/"true",
           "seed the vocabulary splits (3: column-parallel products of a "
           "norm's output, 4: vocab-parallel embeddings); false keeps "
           "embeddings and heads replicated">,
    Option<"heads", "heads", "bool", /*default=*/"false",
           "attention heads the degree cannot split are an error naming "
           "spec key tensor_parallel_degree (cleave-compile's check) "
           "instead of a replicated attention">,
  ];
}

def PartitionTensor : Pass<"cleave-partition-tensor", "ModuleOp"> {
  let summary = "the local program of a tensor-parallel rank, with Megatron's f and g";
  let description = [{
    Turns the decisions of `cleave-propagate-shardings` into the program
    that every rank of the mesh's `tensor` axis runs (the same program for
    all of them; docs/tensor-parallel.md). Each value's type becomes its
    local type, its type divided by its `cleave.sharding` (a blocked
    dimension by the split, not the block count); a slice's start and
    limit along a split dimension are divided by the split, and a
    reshape's or broadcast's result type is the local one. Where
    shardings meet, the collectives are explicit ops that `cleave-autodiff`
    differentiates: `cleave.tp_reduce` (g: all-reduce sum forward,
    gradient identity) on a partial value before the op that needs it
    whole (after a row-parallel product), `cleave.tp_copy` (f: identity
    forward, gradient all-reduced) on a replicated input of an op whose
    result is split (before a column-parallel product). A split parameter
    gets its local type, its full type in `cleave.full_type` and keeps its
    `cleave.sharding`, from which the emitter writes each rank's slice.
    The vocabulary: an embedding whose table is split on its rows looks
    up the rank's rows (the ids shifted by the rank's offset, from
    `cleave.axis_index`; the others masked to zero) and its partial sum is
    completed by g (ids equal to a padding_idx take a second lookup with
    the local padding_idx, so the row gets no gradient on the one rank
    holding it); a cross-entropy over split classes becomes Megatron's
    vocab-parallel one (the max over the group, not differentiated; the
    group's sum of exp and the target's logit completed by g). The
    shardings of op results are removed (the types say them now). What is
    not partitioned yet is an error naming the op and its ONNX node: an op
    where propagation stopped (a degree that does not divide the heads or
    a width, or a split value to gather), a split over a sub-axis
    (grouped-query attention with more tensor ranks than key/value
    heads), an elementwise op that needs the rank's slice of a whole
    operand, a split constant, a
    split function argument or result. Without a `tensor` axis of more
    than one rank the module is unchanged.

    ```mlir
    // Before (tensor=2), GPT-2's MLP:
    %f0 = cleave.matmul %h2, %wfc {cleave.sharding = #cleave.sharding<[{}, {}, {"tensor"} ]>, transpose_rhs} : (tensor<2x4x8xf32>, tensor<32x8xf32>) -> tensor<2x4x32xf32>
    ...
    %m0 = cleave.matmul %f2, %wp {cleave.sharding = #cleave.sharding<[{}, {}, {} ], partial = ["tensor" ]>, transpose_rhs} : (tensor<2x4x32xf32>, tensor<8x32xf32>) -> tensor<2x4x8xf32>
    %m = cleave.add %bp, %m0 : (tensor<8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    // After:
    %f = cleave.tp_copy %h2 {axes = ["tensor"]} : tensor<2x4x8xf32>
    %f0 = cleave.matmul %f, %wfc {transpose_rhs} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
    ...
    %m0 = cleave.matmul %f2, %wp {transpose_rhs} : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
    %g = cleave.tp_reduce %m0 {axes = ["tensor"]} : tensor<2x4x8xf32>
    %m = cleave.add %bp, %g : (tensor<8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    ```
  }];
}

def SequenceParallel : Pass<"cleave-sequence-parallel", "ModuleOp"> {
  let summary = "Megatron's sequence parallelism on a tensor-parallel program";
  let description = [{
    Korthikanti et al. 2022 (Megatron-LM's `sequence_parallel`), run after
    `cleave-partition-tensor` on its local program (docs/tensor-parallel.md,
    "Sequence parallelism"). The activations between the tensor-parallel
    regions (the residual stream: norms, bias and residual adds, the
    embedding's output) are split on the sequence over the mesh's `tensor`
    axis instead of replicated: a g (`cleave.tp_reduce`) that completes an
    activation `[batch, seq, ...]` (or `[seq, batch, ...]`) whose users all
    compute per token becomes `cleave.sp_reduce_scatter`, and an f
    (`cleave.tp_copy`) of such a split activation becomes
    `cleave.sp_all_gather`, each along the sequence brought to dimension 0
    by a transpose (the runtime's collectives are flat). An op between them
    computes the rank's tokens: its sharding rule must carry the sequence's
    factor from operand to result untouched. Its replicated inputs pass an
    f, so their gradients (the rank's tokens' share) are summed over the
    group: a norm's weight, a bias; one that has the sequence (a position
    embedding) is then gathered at the rank's rows (`cleave.axis_index`).
    An op that reads a split activation but is neither per-token nor an f
    (a flatten of batch and sequence before a loss, an attention left
    whole) reads `cleave.sp_all_gather {split_grad}`: it computes a
    replicated value, so the gather's gradient is the rank's part of a
    gradient every rank holds. The sequence length (the token ids' second
    dimension) must be a multiple of the degree, and no function may
    return a split activation: errors naming the spec key.
    The sequence may also sit merged in a dimension (`outer * seq *
    inner`, e.g. a flattened `[batch*seq, d]` before a product): such a
    layout is followed through per-token ops and reshapes, and its
    collectives run on the dimension viewed as `[outer, seq*inner]`. A
    value that feeds an f over the whole axis and one over a sub-axis
    (grouped-query attention) is gathered once. A dropout in the region
    draws its mask at its elements' places in the full tensor.
    Without a `tensor` axis of more than one rank the module is unchanged.

    ```mlir
    // Before (tensor=2, GPT-2's MLP after cleave-partition-tensor):
    %h2 = cleave.layer_norm %x scale %g2 bias %b2 {axis = 2 : i64} : (...) -> tensor<2x4x8xf32>
    %f = cleave.tp_copy %h2 {axes = ["tensor"]} : tensor<2x4x8xf32>
    ...
    %g = cleave.tp_reduce %m0 {axes = ["tensor"]} : tensor<2x4x8xf32>
    %m = cleave.add %bp, %g : (tensor<8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    // After: the norm and the adds on the rank's 2 of the 4 tokens.
    %h2 = cleave.layer_norm %x scale %g2f bias %b2f {axis = 2 : i64} : (...) -> tensor<2x2x8xf32>
    %t = cleave.transpose %h2 {perm = array<i64: 1, 0, 2>} : tensor<2x2x8xf32> -> tensor<2x2x8xf32>
    %a = cleave.sp_all_gather %t {axes = ["tensor"], dim = 0 : i64} : tensor<2x2x8xf32> -> tensor<4x2x8xf32>
    %f = cleave.transpose %a {perm = array<i64: 1, 0, 2>} : tensor<4x2x8xf32> -> tensor<2x4x8xf32>
    ...
    %t2 = cleave.transpose %m0 {perm = array<i64: 1, 0, 2>} : tensor<2x4x8xf32> -> tensor<4x2x8xf32>
    %s = cleave.sp_reduce_scatter %t2 {axes = ["tensor"], dim = 0 : i64} : tensor<4x2x8xf32> -> tensor<2x2x8xf32>
    %g = cleave.transpose %s {perm = array<i64: 1, 0, 2>} : tensor<2x2x8xf32> -> tensor<2x2x8xf32>
    %bpf = cleave.tp_copy %bp {axes = ["tensor"]} : tensor<8xf32>
    %m = cleave.add %bpf, %g : (tensor<8xf32>, tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
    ```
  }];
}

def SplitTokenReads : Pass<"cleave-split-token-reads", "ModuleOp"> {
  let summary = "tensor-parallel ranks read their part of each microbatch";
  let description = [{
    SMP's `prescaled_batch: false` (docs/spec-keys.md), run on the local
    program of a tensor-parallel rank (after `cleave-partition-tensor`):
    instead of every rank of a tensor-parallel group reading the group's
    samples, each reads its part of every microbatch and the group
    all-gathers them. A token-ids or targets argument (`cleave.role`)
    `[batch, seq]` becomes `[batch / T, seq]` with `cleave.read_parts = T`
    (the emitter gives each rank its part's first sample), and a
    `cleave.all_gather` over the `tensor` axis along dimension 0 rebuilds
    the microbatch for its readers. The ranks train on the same samples in
    the same order, so no number changes. A microbatch the degree does not
    divide is read whole by every rank, with a remark and a note in
    plan.json. Without a `tensor` axis of more than one rank the module is
    unchanged.

    ```mlir
    // Before (tensor = 2):
    func.func @forward(%ids: tensor<4x8xi64> {cleave.role = "tokens"}, ...)
      %e = cleave.embedding %wte, %ids ...
    // After: the rank reads 2 of the 4 samples.
    func.func @forward(%ids: tensor<2x8xi64> {cleave.read_parts = 2 : i64, cleave.role = "tokens"}, ...)
      %all = cleave.all_gather %ids {axes = ["tensor"], dim = 0 : i64} : tensor<2x8xi64> -> tensor<4x8xi64>
      %e = cleave.embedding %wte, %all ...
    ```
  }];
}

def MixedPrecision : Pass<"cleave-mixed-precision", "ModuleOp"> {
  let summary = "bf16 or fp16 compute with fp32 master weights (autocast)";
  let description = [{
    Applies PyTorch autocast's rules to each forward function, ahead of
    time: `cleave.matmul` and `cleave.attention` cast their float operands
    to `dtype` and produce it; losses (`softmax_cross_entropy`,
    `nll_loss`), norms (`layer_norm`, `rms_norm`), `softmax` /
    `log_softmax` and the sum and mean reductions compute in f32; every other op computes in the widest
    float type of its operands. Parameters stay f32: the master weights the
    optimizer updates. Run before `cleave-autodiff`, whose rule for
    `cleave.cast` brings the gradients back to f32.

    With `dynamic-loss-scale`, the module gets a `cleave.loss_scaling`
    dictionary (initial_scale, scale_window, min_scale, delayed_shift):
    `cleave-autodiff` then multiplies the backward's seed by a `loss_scale`
    argument the runtime fills, and the runtime skips a step whose
    gradients overflow (runtime/program.proto, LossScaling).

    ```mlir
    // Before:
    %y = cleave.matmul %x, %w : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    // After (dtype=bf16):
    %0 = cleave.cast %x : tensor<8x64xf32> -> tensor<8x64xbf16>
    %1 = cleave.cast %w : tensor<64x64xf32> -> tensor<64x64xbf16>
    %y = cleave.matmul %0, %1 : (tensor<8x64xbf16>, tensor<64x64xbf16>) -> tensor<8x64xbf16>
    ```
  }];
  let options = [
    Option<"dtype", "dtype", "std::string", /*default=*/"\"bf16\"",
           "the low precision: bf16 or fp16">,
    Option<"dynamicLossScale", "dynamic-loss-scale", "bool",
           /*default=*/"false",
           "scale the loss dynamically (fp16): writes cleave.loss_scaling">,
    Option<"initialScale", "initial-scale", "double", /*default=*/"4294967296.0",
           "the first loss scale (SMP's and Megatron's default: 2^32)">,
    Option<"scaleWindow", "scale-window", "int64_t", /*default=*/"1000",
           "steps without overflow before the scale doubles">,
    Option<"minScale", "min-scale", "double", /*default=*/"1.0",
           "the scale never drops below this">,
    Option<"delayedShift", "delayed-shift", "int64_t", /*default=*/"1",
           "consecutive overflows before the scale halves">,
  ];
}

def Autodiff : Pass<"cleave-autodiff", "ModuleOp"> {
  let summary = "derives the backward function of each loss-returning function";
  let description = [{
    Reverse-mode differentiation over dialect ops. For a function returning
    a scalar float loss, walks its ops backwards from the loss (seeded with
    `1 / microbatches`, since the step's loss is the mean of the
    microbatches' losses), applies each op's gradient rule, sums the
    gradients of values used more than once, and ends in one
    `cleave.accumulate_grad` per parameter read (a parameter read twice,
    such as a tied embedding and head, accumulates both). Only values that
    depend on a parameter get gradients; an op on such a path without a
    rule is an error naming it. A parameter marked `cleave.frozen` (spec key
    `frozen_parameters`: a buffer the export turned into an initializer) is
    read like a constant: nothing depends on it for gradients, it gets no
    `cleave.accumulate_grad`, so cleave-optimizer does not update it.

    ```mlir
    cleave.parameter @cos {cleave.frozen} : tensor<8x4xf32>
    // before: %c = cleave.get_param @cos ... feeds the loss
    // after:  no cleave.accumulate_grad @cos in @forward_backward
    ```

    The backward ops become `@<name>_backward` (`cleave.kind = "backward"`).
    Every forward value it reads is returned by the forward function as an
    extra result marked `cleave.saved`, and is the backward argument whose
    `cleave.saved_from` names that result's index. A function without a
    scalar float result is left alone (it only runs forward). When the
    module has `cleave.loss_scaling` (cleave-mixed-precision), the backward
    function also takes the current loss scale as its last argument
    (`cleave.role = "loss_scale"`) and multiplies the seed by it.

    Pipeline stages: an argument marked `cleave.differentiable` (a stage's
    incoming activations) is differentiated too, and its gradient is a
    result of the backward function (`cleave.grad_of_arg = i`); a result
    marked `cleave.differentiable` (outgoing activations) gets its gradient
    from a backward argument (`cleave.grad_of_result = i`). A function with
    such results is differentiated even without a loss.

    ```mlir
    func.func @forward(%x: tensor<4xf32>) -> (tensor<f32>, tensor<4xf32> {cleave.saved})
        attributes {cleave.backward = @forward_backward, cleave.kind = "forward"}
    func.func @forward_backward(%x: tensor<4xf32> {cleave.saved_from = 1 : i64})
        attributes {cleave.forward = @forward, cleave.kind = "backward"} {
      ...
      cleave.accumulate_grad @w, %dw : tensor<4xf32>
      return
    }
    ```
  }];
  let options = [
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"1",
           "microbatches per step: the loss gradient's seed is 1/microbatches">,
  ];
}

def FuseLossGrad : Pass<"cleave-fuse-loss-grad", "ModuleOp"> {
  let summary = "computes the loss and its logits' gradient together in the forward";
  let description = [{
    llm.c's fused classifier, ahead of time. After `cleave-autodiff` the
    forward saves the logits of `cleave.softmax_cross_entropy` (a
    `[tokens, vocab]` tensor, the largest activation of a language model)
    and the backward starts with `cleave.softmax_cross_entropy_grad` of
    them. The gradient the backward starts from (its seed, `1 /
    microbatches`, times the runtime's loss scale under fp16 loss scaling)
    is known in the forward, so this pass has the forward compute loss and
    gradient in one `cleave.softmax_cross_entropy_fused` and save the
    gradient in the logits' place: the logits die at the loss (the memory
    plan writes the gradient over them), the pass over them happens once,
    and the backward reads the saved gradient where it read the grad op's
    result. The targets stop being saved when nothing
    else in the backward reads them. Under loss scaling the forward gets a
    `loss_scale` argument of its own (`cleave.role = "loss_scale"`: the
    runtime fills every such input with the step's scale).

    The loss is fused only when the backward reads its logits for nothing
    else (else the logits stay saved and fusing would add a tensor) and the
    seed is a constant, or a constant times the `loss_scale` argument;
    otherwise, and in a module without a forward/backward pair, nothing
    changes.

    ```mlir
    // Before:
    func.func @forward(...) -> (tensor<f32>, tensor<8x256xf32> {cleave.saved}, tensor<8xi64> {cleave.saved}) {
      %loss = cleave.softmax_cross_entropy %logits, %t {reduction = #cleave.reduction<mean>} : ...
      return %loss, %logits, %t : ...
    }
    func.func @forward_backward(%logits: tensor<8x256xf32> {cleave.saved_from = 1 : i64}, %t: tensor<8xi64> {cleave.saved_from = 2 : i64}) {
      %seed = cleave.constant dense<5.000000e-01> : tensor<f32>
      %dl = cleave.softmax_cross_entropy_grad %seed, %logits, %t {reduction = #cleave.reduction<mean>} : ...
      ...
    }
    // After:
    func.func @forward(...) -> (tensor<f32>, tensor<8x256xf32> {cleave.saved}) {
      %seed = cleave.constant dense<5.000000e-01> : tensor<f32>
      %loss, %dl = cleave.softmax_cross_entropy_fused %logits, %t, %seed {reduction = #cleave.reduction<mean>} : ...
      return %loss, %dl : ...
    }
    func.func @forward_backward(%dl: tensor<8x256xf32> {cleave.saved_from = 1 : i64}) {
      ...
    }
    ```
  }];
  let options = [
    Option<"withLossScale", "with-loss-scale", "bool", /*default=*/"true",
           "also fuse a seed scaled by the runtime's loss scale (fp16), "
           "giving the forward a loss_scale argument">,
  ];
}

def Remat : Pass<"cleave-remat", "ModuleOp"> {
  let summary = "activation checkpointing: the backward recomputes chosen segments of the forward";
  let description = [{
    After cleave-autodiff a forward function returns every value its
    backward reads (`cleave.saved`). For each segment the strategy chooses,
    this pass stops saving the values defined inside it and clones the
    forward ops that compute them into the backward, just before the first
    op that reads any of them; the clones read what stays saved (the
    segment's inputs, saved again if they were not), parameters (read
    again) and forward constants. The memory plan then sees the segment's
    activations live for one backward segment instead of from the forward to
    the backward; the clones run the same kernels on the same inputs, so a
    step's results are bit-identical. Every clone is marked
    `cleave.recompute`, which the cost model adds to the backward's time.

    Segments are built from the layers of each forward function (each
    pipeline stage's): with `layers`, the ops whose ONNX node names start
    with each prefix; otherwise the pieces between the places where the
    fewest activation bytes cross (the residual stream, as
    cleave-pipeline-partition finds them), joined into one layer where their
    node names share a numbered module (`/h.0/`, `/layers.3/`); pieces
    without one (embedding, head) are no layer, and in a model without
    numbered modules every piece but the first and the last is one.
    `strategy`: `each` (a segment per layer), `group_<k>` (k consecutive
    layers), `contiguous` (all layers of a stage), `selective` (the
    attention core of every layer, from the scores' product to the
    softmax, where it is not a fused `cleave.attention`, whose backward
    already recomputes it), `none`.

    ```mlir
    // Before (strategy=each): the forward saves %h, the backward reads it.
    func.func @forward(%x: tensor<4x8xf32>) -> (tensor<f32>, tensor<4x8xf32> {cleave.saved}, tensor<4x8xf32> {cleave.saved}) {
      %h = cleave.tanh %x : tensor<4x8xf32>
      ...
      return %loss, %x, %h : ...
    }
    func.func @forward_backward(%x: tensor<4x8xf32> {cleave.saved_from = 1 : i64}, %h: tensor<4x8xf32> {cleave.saved_from = 2 : i64}) ...
    // After: %h is computed again where the backward needs it.
    func.func @forward(%x: tensor<4x8xf32>) -> (tensor<f32>, tensor<4x8xf32> {cleave.saved}) { ... }
    func.func @forward_backward(%x: tensor<4x8xf32> {cleave.saved_from = 1 : i64}) {
      ...
      %h = cleave.tanh %x {cleave.recompute} : tensor<4x8xf32>
      %dx = cleave.mul %dy, %h : tensor<4x8xf32>  // (the rule reads %h)
    }
    ```
  }];
  let options = [
    Option<"strategy", "strategy", "std::string", /*default=*/"\"each\"",
           "each, group_<k>, contiguous, selective or none">,
    ListOption<"layers", "layers", "std::string",
               "ONNX node-name prefixes, one a layer (instead of finding "
               "the layers from the graph)">,
  ];
}

def OffloadActivations : Pass<"cleave-offload-activations", "ModuleOp"> {
  let summary = "activation offload: checkpoints to host memory after their forward, fetched back ahead of their backward";
  let description = [{
    Runs after cleave-remat. A checkpoint is a value a forward saves for
    its backward that a recomputed (`cleave.recompute`) op reads: the input
    of a checkpointed segment. Each is copied to host memory by a
    `cleave.offload` right after the forward makes it, and the forward
    saves the host copy (the result and the backward's argument are marked
    `cleave.memory_space = #cleave.memory_space<host>`), so the device
    value dies after its last forward reader. In the backward a
    `cleave.fetch` copies it back `horizon` segments before the backward
    of the segment that reads it starts (a segment's backward starts at
    the first of its recomputed ops; with fewer segments before it, when
    the first segment's backward starts, after the head's backward, whose
    temporaries are the step's peak): the copy overlaps the compute of the
    segments in between, as SMP's `activation_loading_horizon`. The memory plan gives
    the host values a host arena; other saved values stay on the device.

    ```mlir
    // Before (horizon=1): two segments, recomputed from %x0 and %x1.
    func.func @forward(...) -> (..., tensor<4x8xf32> {cleave.saved}, tensor<4x8xf32> {cleave.saved}) {
      ...
      return %loss, %x0, %x1 : ...
    }
    func.func @forward_backward(%x0: tensor<4x8xf32> {cleave.saved_from = 1 : i64}, %x1: ... {cleave.saved_from = 2 : i64}) {
      %a1 = cleave.tanh %x1 {cleave.recompute} ...   // segment 1's backward
      ...
      %a0 = cleave.tanh %x0 {cleave.recompute} ...   // segment 0's backward
    }
    // After: saved in host memory, segment 0's checkpoint fetched while
    // segment 1's backward runs.
    func.func @forward(...) {
      %h0 = cleave.offload %x0 {cleave.memory_space = #cleave.memory_space<host>} : tensor<4x8xf32>
      ...
      return %loss, %h0, %h1 : ...
    }
    func.func @forward_backward(%x0: ... {cleave.memory_space = #cleave.memory_space<host>, cleave.saved_from = 1 : i64}, %x1: ...) {
      ...                                            // the head's backward
      %d1 = cleave.fetch %x1 : tensor<4x8xf32>
      %d0 = cleave.fetch %x0 : tensor<4x8xf32>
      %a1 = cleave.tanh %d1 {cleave.recompute} ...
      ...
      %a0 = cleave.tanh %d0 {cleave.recompute} ...
    }
    ```
  }];
  let options = [
    Option<"horizon", "horizon", "int64_t", /*default=*/"4",
           "segments ahead of its backward that a checkpoint is fetched "
           "(spec activation_loading_horizon; at least 1)">,
  ];
}

def PipelinePartition : Pass<"cleave-pipeline-partition", "ModuleOp"> {
  let summary = "splits the forward function into contiguous pipeline stages";
  let description = [{
    Cuts the forward function's ops (in order) into `stages` contiguous
    pieces and moves each into a nested `module @stage<k>` with
    `cleave.stage = k` and `cleave.stages`, holding a copy of each
    parameter it reads (a parameter read by several stages, such as a tied
    embedding and head, is held by each, marked `cleave.tied_stages`) and
    its own constants. Stage `k`'s function takes the activations that
    cross its first cut as arguments and returns those crossing its last
    cut (`cleave.boundary = i`; float ones are `cleave.differentiable`, so
    cleave-autodiff gives each stage a backward with gradients in and out);
    the model inputs it reads keep their attributes; the last stage returns
    the loss.

    The cuts: with `split-points`, before the first op of each named ONNX
    node. Otherwise only where the fewest activation bytes cross (between
    layers: the residual stream), chosen by dynamic programming to minimize
    the slowest stage's time by the cost model (forward plus backward plus
    sending its activations; `optimize=speed`), or
    `memory-weight * memory + (1 - memory-weight) * time`, each relative to
    the whole model (`optimize=memory`), where a stage's memory counts its
    parameters four times (weights, gradients, two AdamW moments) and the
    activations it makes. More stages than such places is an error.

    ```mlir
    // After (stages=2):
    module @stage0 attributes {cleave.stage = 0, cleave.stages = 2} {
      cleave.parameter @wte {cleave.tied_stages = [0, 1]} : tensor<256x64xf32>
      func.func @forward(%ids: tensor<2x8xi64>) -> (tensor<2x8x64xf32> {cleave.boundary = 0, cleave.differentiable})
    }
    module @stage1 attributes {cleave.stage = 1, cleave.stages = 2} {
      func.func @forward(%h: tensor<2x8x64xf32> {cleave.boundary = 0, cleave.differentiable}, %targets: tensor<2x8xi64>) -> tensor<f32>
    }
    ```
  }];
  let options = [
    Option<"stages", "stages", "int64_t", /*default=*/"1",
           "pipeline stages: pipeline degree x virtual stages per rank">,
    ListOption<"splitPoints", "split-points", "std::string",
               "ONNX node names where stages 1.. begin (manual partition)">,
    Option<"optimize", "optimize", "std::string", /*default=*/"\"speed\"",
           "speed (balance time) or memory (mix memory and time)">,
    Option<"memoryWeight", "memory-weight", "double", /*default=*/"0.8",
           "with optimize=memory: the weight of memory against time">,
    Option<"backend", "backend", "std::string", /*default=*/"\"cpu\"",
           "whose checked-in rates the cost model uses (cpu, h100)">,
    Option<"ratesFile", "rates", "std::string", /*default=*/"\"\"",
           "a rates file written by cleave-calibrate, instead of the defaults">,
    Option<"recompute", "recompute", "bool", /*default=*/"false",
           "activation checkpointing recomputes the layers (between the "
           "first and the last place): cost their forward twice">,
    Option<"recomputeAttention", "recompute-attention", "bool",
           /*default=*/"false",
           "selective activation checkpointing recomputes the attention "
           "cores (product of queries and keys to the softmax): cost their "
           "forward twice">,
    Option<"offloadEvery", "offload-every", "int64_t", /*default=*/"0",
           "activation offload copies the checkpoint at the start of every "
           "offload-every-th layer to host memory and back: cost its bytes "
           "twice at the host link, in the stage of the layer (0: no "
           "offload)">,
  ];
}

def VerifyPartitioned : Pass<"cleave-verify-partitioned", "ModuleOp"> {
  let summary = "checks the contract of the partition phase";
  let description = [{
    After cleave-pipeline-partition the later passes treat each stage module
    as a model of its own and the emitter wires the stages together by
    their `cleave.boundary` arguments and results; this pass checks that
    the partition left nothing for them to guess:

    - every op of the model belongs to exactly one stage: the top-level
      module holds only `module @stage<k>` (and its attributes), stages
      `0 .. n-1` once each, every one with `cleave.stages = n`, and one
      forward function each;
    - every value crossing stages goes through the stage interface: stage
      `k`'s results marked `cleave.boundary = 0, 1, ...` are, in number,
      order and type, stage `k+1`'s arguments so marked; the first stage
      receives none, the last sends none;
    - a parameter held by several stages says so: each copy carries
      `cleave.tied_stages`, exactly the stages that hold it (their gradients
      are summed), and a parameter of one stage does not;
    - with a `cleave.mesh`, the stages are a multiple of its `pipeline` axis
      (virtual stages per rank).

    A module that was not partitioned (no stage modules) is one stage and
    passes.

    ```mlir
    // Fails: "stage 1 receives tensor<2x4x8xf32> as boundary value 0, but
    // stage 0 sends tensor<2x4x16xf32>"
    module @stage0 attributes {cleave.stage = 0 : i64, cleave.stages = 2 : i64} {
      func.func @forward(...) -> (tensor<2x4x16xf32> {cleave.boundary = 0 : i64})
    }
    module @stage1 attributes {cleave.stage = 1 : i64, cleave.stages = 2 : i64} {
      func.func @forward(%h: tensor<2x4x8xf32> {cleave.boundary = 0 : i64}) -> tensor<f32>
    }
    ```
  }];
}

def MergeChunkOptimizers : Pass<"cleave-merge-chunk-optimizers", "ModuleOp"> {
  let summary = "one optimizer per pipeline rank over all its virtual stages";
  let description = [{
    With virtual stages, a pipeline rank holds several stage modules
    (stage `k` runs on rank `k mod P`, P the mesh's `pipeline` axis), each
    with its own `@optimizer`. Run one after the other they would clip by
    partial norms: each chunk's `cleave.all_reduce` of its sum of squares
    over the pipeline adds up only the stages of that chunk. This pass
    makes one optimizer per rank, in the rank's first stage that has one:
    every chunk's work up to its norm's all-reduce, in stage order; the
    chunks' sums of squares added; one all-reduce over the pipeline; then
    every chunk's updates reading the reduced norm. Without clipping the
    bodies are concatenated. The other chunks' optimizer functions are
    erased; their parameters are named across stage modules of the rank
    (`lookupParameter`), and the memory plan, which runs after, places
    their optimizer state in the host stage's arena. Runs on the top-level
    module after the per-stage passes and before the memory plan.

    ```mlir
    module @stage0 { // rank 0, with stage 2
      func.func @optimizer(%step: tensor<i64>) {
        %n0 = cleave.sum_squares %g0 ...
        %n2 = cleave.sum_squares %g2 ...      // stage 2's parameters
        %n = cleave.add %n0, %n2 : ...
        %total = cleave.all_reduce %n {group = "pipeline", reduce = "sum"} : tensor<f32>
        cleave.adamw @w0, %g0, %step, %total ...
        cleave.adamw @w2, %g2, %step, %total ...
    ```
  }];
}

def PipelineSchedule : Pass<"cleave-pipeline-schedule", "ModuleOp"> {
  let summary = "orders each pipeline rank's (stage, forward/backward, microbatch) work";
  let description = [{
    For a module split into stage modules, builds the schedule of `kind`:
    `simple` (GPipe: all forwards, then all backwards), `interleaved`
    (1F1B, SMP's meaning) or `interleaved_virtual` (Megatron's interleaved
    1F1B; stage `s` runs on pipeline rank `s % ranks`). It is checked to be
    free of deadlock by simulation before it is written: the top module
    gets `cleave.schedule`, one array per pipeline rank of
    `[stage, backward, microbatch, slot]` quadruples, and
    `cleave.pipeline` (kind, ranks, microbatches, virtual stages, active
    microbatches, theoretical bubble); each stage module gets
    `cleave.slots` (microbatches in flight there, each with its own copy of
    the activations kept for backward) and its predicted
    `cleave.forward_seconds` / `cleave.backward_seconds` per microbatch from
    the cost model. A stage that autodiff gave no backward (nothing
    differentiable flows through it, e.g. one that only slices the token
    ids or targets) gets only forwards, one slot and no backward time; such
    stages must come before every stage with a backward (an error names
    the pair otherwise).

    A module that is not split (no stage modules) is one stage on one
    pipeline rank: it gets `cleave.schedule` with each microbatch's forward
    then its backward, stage 0 slot 0, and nothing else; `ranks` must be 1.
  }];
  let options = [
    Option<"kind", "kind", "std::string", /*default=*/"\"interleaved\"",
           "simple, interleaved or interleaved_virtual">,
    Option<"ranks", "ranks", "int64_t", /*default=*/"1", "pipeline degree">,
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"1",
           "microbatches per step">,
    Option<"activeMicrobatches", "active-microbatches", "int64_t",
           /*default=*/"0",
           "at most this many microbatches in flight per stage (0: the schedule's own)">,
    Option<"backend", "backend", "std::string", /*default=*/"\"cpu\"",
           "whose checked-in rates predict the stage times (cpu, h100)">,
    Option<"ratesFile", "rates", "std::string", /*default=*/"\"\"",
           "a rates file written by cleave-calibrate, instead of the defaults">,
  ];
}

def Optimizer : Pass<"cleave-optimizer", "ModuleOp"> {
  let summary = "adds the optimizer step (AdamW or SGD, clipping, LR schedule)";
  let description = [{
    Adds `func.func @optimizer(%step: tensor<i64> {cleave.role = "step"})`
    (`cleave.kind = "optimizer"`) that updates every parameter with a
    gradient: `cleave.get_grad`, then `cleave.adamw` or `cleave.sgd` with
    the options below. With `grad-clip > 0` the gradients are first
    measured by one `cleave.sum_squares` (the global norm of
    `clip_grad_norm_`). Weight decay is applied to parameters of two or more
    dimensions only. A module without gradients is left unchanged.

    In a pipeline stage (a module with `cleave.stage` and `cleave.stages`
    > 1, written by cleave-pipeline-partition), the gradients of
    parameters held by several stages (`cleave.tied_stages`, such as a tied
    embedding and head) are first summed over those stages'
    ranks (`cleave.all_reduce_grads {group = "tied:0,3", reduce = "sum"}`),
    and the sum of squares is summed over the `"pipeline"` group
    (`cleave.all_reduce`), a tied parameter counted in its first stage only.
  }];
  let options = [
    Option<"type", "type", "std::string", /*default=*/"\"adamw\"",
           "adamw or sgd">,
    Option<"lr", "lr", "double", /*default=*/"1e-3", "peak learning rate">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "AdamW beta2">,
    Option<"eps", "eps", "double", /*default=*/"1e-8", "AdamW epsilon">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.0",
           "decoupled (AdamW) or L2 (SGD) weight decay">,
    Option<"gradClip", "grad-clip", "double", /*default=*/"0.0",
           "global gradient norm to clip to (0: off)">,
    Option<"momentum", "momentum", "double", /*default=*/"0.0",
           "SGD momentum">,
    Option<"warmupSteps", "warmup-steps", "int64_t", /*default=*/"0",
           "steps of linear learning-rate warm-up">,
    Option<"decaySteps", "decay-steps", "int64_t", /*default=*/"0",
           "step at which the cosine decay reaches min-lr (0: no decay)">,
    Option<"minLr", "min-lr", "double", /*default=*/"0.0",
           "learning rate at the end of the cosine decay">,
  ];
}

def ShardOptimizerState : Pass<"cleave-shard-optimizer-state", "ModuleOp"> {
  let summary = "splits optimizer state over the data-parallel ranks (ZeRO-1)";
  let description = [{
    ZeRO stage 1 (Rajbhandari et al. 2020; SMP's `shard_optimizer_state`),
    in place of `cleave-data-parallel`: every trained parameter gets
    `cleave.state_axis = "<axis>"`, so its gradient and parameter buffers
    are viewed flat, padded with zeros to a multiple of the axis' ranks and
    split into one chunk per rank. The `@optimizer` function then
    reduce-scatters the gradients over the axis (mean, in buckets of about
    `bucket-bytes`, first, as `cleave-data-parallel` all-reduces them, so
    that `cleave-overlap-gradients` can start them in the backward; a tied
    parameter's pipeline sum then adds whole buffers, each rank reading its
    reduced chunk) instead of all-reducing
    them, reads each rank's chunk with `cleave.get_grad_shard`, sums the
    chunks' squares over the axis for clipping, updates only its chunk of
    each parameter (optimizer state of one chunk: 1/ranks of the state),
    and ends by all-gathering the updated chunks.

    ```mlir
    func.func @optimizer(%step: tensor<i64> {cleave.role = "step"}) {
      cleave.reduce_scatter_grads [@"ln_f.bias", ...] {group = "data", reduce = "mean"}
      %g = cleave.get_grad_shard @"ln_f.bias" : tensor<32xf32>
      %n = cleave.sum_squares %g, ... : (...) -> tensor<f32>
      %N = cleave.all_reduce %n {group = "data", reduce = "sum"} : tensor<f32>
      cleave.adamw @"ln_f.bias", %g, %step norm %N : tensor<f32> {...} : tensor<32xf32>, tensor<i64>
      ...
      cleave.all_gather_params [@"ln_f.bias", ...] {group = "data"}
    ```

    With `master-copies` (ZeRO-1 under bf16 / fp16, after
    `cleave-mixed-precision`), the fp32 master weights are split too: a
    trained parameter that every function reads only through a cast to one
    16-bit float type gets `cleave.working_type` = that type, and its reads
    become `cleave.get_param`s of that type (the casts go). A rank then
    keeps the whole parameter in 16 bits (2 bytes a parameter instead of
    4) and its fp32 value only for its chunk, which the optimizer updates;
    gradients stay fp32 (PyTorch autocast's and Megatron's fp32 gradient
    accumulation). The optimizer no longer gathers these parameters: a
    function `@refresh_params` (`cleave.kind = "refresh"`), which the
    schedule runs first in each step, rounds each master chunk into the
    working copy (`cleave.cast_master_chunk`) and all-gathers the copies,
    so that initialization and checkpoints deal in the masters alone.
    Parameters also read in fp32 (a tied embedding's lookup, norms,
    biases added in fp32) keep their whole fp32 value, as without the
    option.

    ```mlir
    cleave.parameter @w {cleave.state_axis = "data", cleave.working_type = bf16} : tensor<64x256xf32>
    func.func @forward(...) {
      %w = cleave.get_param @w : tensor<64x256xbf16>
      ...
    func.func @refresh_params() attributes {cleave.kind = "refresh"} {
      cleave.cast_master_chunk @w
      cleave.all_gather_params [@w] {group = "data"}
      return
    }
    ```
  }];
  let options = [
    Option<"axis", "axis", "std::string", /*default=*/"\"data\"",
           "the mesh axis the optimizer state is split over">,
    Option<"masterCopies", "master-copies", "bool", /*default=*/"false",
           "split the fp32 master weights too: parameters read only in a "
           "16-bit type keep a whole working copy in it and fp32 only for "
           "their chunk">,
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"26214400",
           "gradient bytes per reduce-scatter and all-gather">,
    Option<"replicaAxis", "replica-axis", "std::string", /*default=*/"\"\"",
           "MiCS's second hop: each rank's reduced chunks are then averaged "
           "over this mesh axis (the groups that replicate the split)">,
  ];
}

def ShardParameters : Pass<"cleave-shard-parameters", "ModuleOp"> {
  let summary = "shards parameters themselves over the ranks that split their state (ZeRO-3)";
  let description = [{
    Sharded data parallelism (ZeRO-3; SMP's `sharded_data_parallel_degree`,
    MiCS), after `cleave-shard-optimizer-state` has split every trained
    parameter's gradient and optimizer state over `cleave.state_axis`: each
    such parameter of at least `threshold` elements also keeps only its
    chunk of the parameter (`cleave.param_axis`, the same axis). Every
    `cleave.get_param` of it in a forward or backward function becomes one
    `cleave.gather_param` before each op that reads it, so that the
    gathered whole lives only while that op reads it (a tied embedding
    read first and last in the forward is gathered twice rather than held
    through every layer; the backward gathers again: autodiff reads
    parameters afresh, it does not save them). The optimizer updates the chunk and no longer all-gathers
    it. Smaller parameters stay whole on every rank (SMP's
    `sdp_param_persistence_threshold`), their state split as in ZeRO-1.

    With `processes-per-host` (SMP's `sdp_hierarchical_allgather`, on when
    the spec gives `processes_per_host`), when every sharding group lies on
    several hosts, the same number `k` of consecutive coordinates of the
    axis on each, every gather gets `cleave.gather_per_host = k`: the
    emitted program all-gathers within the host first (k ranks, the fast
    link) into the host's block of the whole, then across hosts (one rank
    per host), giving the same bytes as one all-gather. A group within one
    host, or one rank per host, gathers flat.

    ```mlir
    // before
    %w = cleave.get_param @"h.0.mlp.c_fc.weight" : tensor<64x256xf32>
    %h = cleave.layer_norm ...
    %y = cleave.matmul %h, %w ...
    ...
    cleave.all_gather_params [@"h.0.mlp.c_fc.weight", @"ln_f.bias"] {group = "data"}
    // after
    cleave.parameter @"h.0.mlp.c_fc.weight" {cleave.param_axis = "data", cleave.state_axis = "data"} ...
    %h = cleave.layer_norm ...
    %w = cleave.gather_param @"h.0.mlp.c_fc.weight" : tensor<64x256xf32>
    %y = cleave.matmul %h, %w ...
    ...
    cleave.all_gather_params [@"ln_f.bias"] {group = "data"}
    ```
  }];
  let options = [
    Option<"threshold", "threshold", "int64_t", /*default=*/"1000000",
           "parameters with fewer elements stay whole on every rank">,
    Option<"processesPerHost", "processes-per-host", "int64_t",
           /*default=*/"0",
           "ranks per host; when a sharding group spans several hosts with "
           "as many of its ranks on each, its gathers are hierarchical "
           "(SMP's sdp_hierarchical_allgather): 0 gathers flat">,
  ];
}

def PrefetchGathers : Pass<"cleave-prefetch-gathers", "ModuleOp"> {
  let summary = "starts sharded parameters' gathers early, overlapping compute (ZeRO-3 prefetch)";
  let description = [{
    `cleave-shard-parameters` gathers a sharded parameter just before the op
    that reads it, so every gather waits for the network while nothing
    computes. This pass turns each gather of a forward or backward function
    into a start and a wait: the start (`cleave.gather_param` with an
    `event`) goes `depth` gathers ahead, where the gather `depth` places
    before it in the block was (the first `depth` at the block's start), and
    a `cleave.wait_param` goes just before the first reader, so the
    transfer overlaps the compute of the layers in between (DeepSpeed's and
    FSDP's prefetch). SMP's `sdp_max_live_parameters` is `max-live`: a
    gather starts no earlier than where the padded elements of the gathered
    parameters live at once, its own included, stay within it (later and
    later up to its own place, where it stays synchronous); 0 prefetches
    nothing. A started gather's space is taken from its start, so the
    memory plan, after this pass, counts the earlier starts exactly.
    A hierarchical gather (`sdp_hierarchical_allgather`: inside the host,
    then across hosts) starts its second hop where a flat gather would
    start, and its first hop one gather earlier when compute lies between
    and `max-live` allows (`cleave.gather_next_hop` waits for the first hop
    and starts the second; docs/zero.md).

    ```mlir
    // before
    %u = cleave.gather_param @"h.0.mlp.c_fc.weight" : tensor<64x256xf32>
    %h = cleave.matmul %x, %u ...
    %v = cleave.gather_param @"h.0.mlp.c_proj.weight" : tensor<256x64xf32>
    %y = cleave.matmul %h, %v ...
    // after (depth 1)
    %u = cleave.gather_param @"h.0.mlp.c_fc.weight" : tensor<64x256xf32>
    %v = cleave.gather_param @"h.0.mlp.c_proj.weight" event 1 : tensor<256x64xf32>
    %h = cleave.matmul %x, %u ...
    cleave.wait_param %v : tensor<256x64xf32>
    %y = cleave.matmul %h, %v ...
    ```
  }];
  let options = [
    Option<"depth", "depth", "int64_t", /*default=*/"1",
           "gathers started this many gathers ahead of their own place">,
    Option<"maxLive", "max-live", "int64_t", /*default=*/"1000000000",
           "padded elements of gathered parameters live at once "
           "(SMP's sdp_max_live_parameters)">,
  ];
}

def BucketScatters : Pass<"cleave-bucket-scatters", "ModuleOp"> {
  let summary = "reduce-scatters sharded parameters' gradients in buckets, started during backward";
  let description = [{
    `cleave-shard-parameters` reduce-scatters each microbatch gradient of a
    sharded parameter on its own, synchronously, right after it is made.
    This pass joins consecutive ones (same group and reduction) into
    buckets of at most `bucket-elements` padded elements (SMP's
    `sdp_reduce_bucket_size`; one larger gradient alone; 0 leaves them as
    they are): each padded gradient viewed as [ranks, chunk], joined along
    the chunks and flattened, so that rank r's block of the one
    reduce-scatter is its chunks in order, sliced apart for the
    `cleave.accumulate_grad`s. The collective only starts (a
    `cleave.event` attribute) once the bucket's last gradient is made, and
    a `cleave.wait_scatter` waits for it where the next bucket starts (the
    last one at the function's end), so it travels while the backward
    computes. Before the memory plan, which keeps the joined input and the
    result from the start to the wait.

    ```mlir
    // before
    %c1 = cleave.reduce_scatter %f1 {axes = ["data"], dim = 0 : i64, reduce = "mean"} : tensor<64xf32> -> tensor<32xf32>
    cleave.accumulate_grad @w2, %c1 : tensor<32xf32>
    ...
    %c2 = cleave.reduce_scatter %f2 {...} : tensor<32xf32> -> tensor<16xf32>
    cleave.accumulate_grad @w1, %c2 : tensor<16xf32>
    return
    // after (one bucket)
    %r1 = cleave.reshape %f1 : tensor<64xf32> -> tensor<2x32xf32>
    %r2 = cleave.reshape %f2 : tensor<32xf32> -> tensor<2x16xf32>
    %j = cleave.concat %r1, %r2 {axis = 1 : i64} : (...) -> tensor<2x48xf32>
    %f = cleave.reshape %j : tensor<2x48xf32> -> tensor<96xf32>
    %c = cleave.reduce_scatter %f {axes = ["data"], dim = 0 : i64, reduce = "mean", cleave.event = 1 : i64} : tensor<96xf32> -> tensor<48xf32>
    cleave.wait_scatter %c, %f : tensor<48xf32>, tensor<96xf32>
    %s1 = cleave.slice %c {start = array<i64: 0>, limit = array<i64: 32>, step = array<i64: 1>} : tensor<48xf32> -> tensor<32xf32>
    cleave.accumulate_grad @w2, %s1 : tensor<32xf32>
    %s2 = cleave.slice %c {start = array<i64: 32>, ...} : tensor<48xf32> -> tensor<16xf32>
    cleave.accumulate_grad @w1, %s2 : tensor<16xf32>
    return
    ```
  }];
  let options = [
    Option<"bucketElements", "bucket-elements", "int64_t",
           /*default=*/"500000000",
           "padded gradient elements per reduce-scatter (SMP's "
           "sdp_reduce_bucket_size; 0: one per parameter, synchronous)">,
  ];
}

def DataParallel : Pass<"cleave-data-parallel", "ModuleOp"> {
  let summary = "averages gradients over the data-parallel ranks (DDP)";
  let description = [{
    With `degree > 1`, starts the `@optimizer` function with
    `cleave.all_reduce_grads` ops over the mesh's `"data"` group: the
    gradient buffers of the trained parameters, in buckets of about
    `bucket-bytes`, last parameters first (the order backward finishes
    them), averaged (`reduce = "mean"`). Each rank's backward starts from
    the mean over its own microbatches, so the average over ranks is the
    gradient of the mean loss over the global batch.

    ```mlir
    func.func @optimizer(%step: tensor<i64> {cleave.role = "step"}) {
      cleave.all_reduce_grads [@"ln_f.bias", @"ln_f.weight", ...] {group = "data", reduce = "mean"}
      %g = cleave.get_grad @"ln_f.bias" : tensor<64xf32>
      ...
    ```
  }];
  let options = [
    Option<"degree", "degree", "int64_t", /*default=*/"1",
           "data-parallel ranks">,
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"26214400",
           "gradient bytes per all-reduce (PyTorch DDP's 25 MiB)">,
  ];
}

def MemoryPlan : Pass<"cleave-memory-plan", "ModuleOp"> {
  let summary = "static offsets for every tensor in one arena per memory space";
  let description = [{
    Plans the memory of each function from the liveness of its values over
    the function's order: parameters, constants and the function's inputs
    stay live for the whole step; every other value lives from its
    definition to its last use and reuses freed space (first fit, aligned).

    Writes the plan into the IR: `cleave.offset` on each parameter and
    function argument, `cleave.offsets` (one per result) on each op that
    allocates, and on the function a `cleave.memory` dictionary with the
    arena's size and the predicted peak bytes by category (parameters,
    constants, io, activations; gradients, optimizer state and workspace
    are zero until training adds them). `cleave.get_param` reads the
    parameter's own storage and allocates nothing. The gradient of
    `cleave.softmax_cross_entropy_fused` takes the space of its logits when
    they die there (written in place, as llm.c's fused classifier does).

    ```mlir
    func.func @forward(%x: tensor<2x8xf32> {cleave.offset = 0 : i64}) -> tensor<2x8xf32>
        attributes {cleave.memory = {activations = 64 : i64, arena_bytes = 128 : i64, ...}} {
      %0 = cleave.exp %x {cleave.offsets = array<i64: 64>} : tensor<2x8xf32>
      return %0 : tensor<2x8xf32>
    }
    ```
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", /*default=*/"64",
           "byte alignment of every tensor's offset">,
  ];
}

def StageTransfers : Pass<"cleave-stage-transfers", "ModuleOp"> {
  let summary = "turns pipeline stage boundaries into cleave.send and cleave.recv";
  let description = [{
    After partitioning, a stage's forward function receives the previous
    stage's activations as `cleave.boundary` arguments and returns its own
    as `cleave.boundary` results; its backward receives the gradients of
    those results (`cleave.grad_of_result`) and returns the gradients of
    those arguments (`cleave.grad_of_arg`). This pass makes each crossing
    an op: a `cleave.recv` at the top of the function for each received
    value and a `cleave.send` before the return for each sent one, over
    the mesh's `pipeline` axis (stage `k` runs on pipeline rank `k mod P`;
    its neighbours are the ranks of stages `k - 1` and `k + 1`), and drops
    the boundary from the function's signature. Tags pair each send with
    its receive: `(2k << 8) | b` for the forward activation `b` that stage
    `k` sends, `((2k + 1) << 8) | b` for the gradient of it that stage
    `k + 1` sends back. Runs after cleave-memory-plan (a received value
    keeps its planned slot offset, on the op as `cleave.offsets`), on the
    top-level module holding the stage modules.

    ```mlir
    // stage 1's forward, before
    func.func @forward(%h: tensor<2x8x64xf32> {cleave.boundary = 0 : i64, ...}, ...)
    // after
    func.func @forward(...) {
      %h = cleave.recv {axis = "pipeline", peer = 0 : i64, tag = 0 : i64} : tensor<2x8x64xf32>
    ```
  }];
}

def VerifyPerRank : Pass<"cleave-verify-per-rank", "ModuleOp"> {
  let summary = "checks the contract of the per-rank form the emitter translates";
  let description = [{
    The phase boundary before emission: after cleave-stage-transfers (and
    cleave-memory-plan) the module must say everything the emitter writes,
    so that it translates and decides nothing. This pass checks:

    - the module has a `cleave.mesh`, and a pipeline's stage count is a
      multiple of its `pipeline` axis;
    - every value has a local shape: function arguments and results and
      op results are statically shaped tensors (or transfer tokens), and a
      `cleave.memory_space`, where one is given, is the value's;
    - every cross-rank dependency is an op: no function argument or result
      is still a stage boundary (`cleave.boundary`, `cleave.grad_of_result`,
      `cleave.grad_of_arg`), and every `cleave.send` has exactly one
      `cleave.recv` on the peer's stage (the neighbouring stage, on the
      pipeline rank the send names, with the same tag and type), and every
      receive its send (the last microbatch's copy of a backward, which
      runs instead of it, is not counted twice);
    - every value an op reads is defined in the same function (nothing
      crosses functions except through the forward's saved results).

    ```mlir
    // Fails: "stage 0 sends tag 0 to pipeline rank 1, but no stage on
    // pipeline rank 1 receives it"
    module @stage0 attributes {cleave.stage = 0 : i64, cleave.stages = 2 : i64} {
      func.func @forward(...) { cleave.send %h {axis = "pipeline", peer = 1 : i64, tag = 0 : i64} ... }
    }
    ```
  }];
}

def OverlapGradients : Pass<"cleave-overlap-gradients", "ModuleOp"> {
  let summary = "starts the data-parallel all-reduces in the last backward";
  let description = [{
    Overlaps the data-parallel gradient all-reduces (the
    `cleave.all_reduce_grads` buckets over `"data"` that
    cleave-data-parallel puts at the optimizer's start) with backward, as
    PyTorch's DDP does: a bucket can be reduced as soon as the step's last
    microbatch has accumulated its gradients, not only once the whole
    backward is done.

    The backward runs once per microbatch and only its last run completes
    the gradients, so the pass copies the backward function into a variant
    for the last microbatch (`cleave.last_microbatch` on the backward names
    it; `cleave.last_microbatch_of` on it names the backward). In the copy,
    right after the `cleave.accumulate_grad` that completes a bucket (the
    last one into any of its parameters), a `cleave.all_reduce_grads_start`
    starts the bucket's reduction; in the optimizer, the bucket's
    `cleave.all_reduce_grads` becomes a `cleave.wait_grads` on the same
    event. Events are numbered from 1 in the order the copy starts them. A
    bucket whose gradients the backward does not all accumulate stays as
    it was; a module without buckets over `"data"` (one data-parallel
    rank) is left unchanged.

    Run it after cleave-memory-plan: the copy is the same computation in
    the same storage, so its ops keep their original's planned offsets
    (the start and wait allocate nothing). On a pipeline it runs on the
    top-level module and takes each pipeline rank's stage modules together
    (stage k on rank k mod the mesh's `pipeline` size): with virtual
    stages the rank's one optimizer (cleave-merge-chunk-optimizers) waits
    for buckets that another of its stages' backward starts, and events
    are numbered per rank. cleave-emit-program runs the copy for the last
    microbatch's step.

    ```mlir
    // before
    func.func @forward_backward(...) attributes {cleave.kind = "backward", ...} {
      cleave.accumulate_grad @b, %db : tensor<8xf32>
      %dw = cleave.matmul ...
      cleave.accumulate_grad @w, %dw : tensor<4x8xf32>
      return
    }
    func.func @optimizer(...) attributes {cleave.kind = "optimizer"} {
      cleave.all_reduce_grads [@b] {group = "data"}
      cleave.all_reduce_grads [@w] {group = "data"}
      ...
    // after
    func.func @forward_backward(...) attributes {
        cleave.kind = "backward",
        cleave.last_microbatch = @forward_backward_last_microbatch, ...}
    func.func @forward_backward_last_microbatch(...) attributes {
        cleave.kind = "backward",
        cleave.last_microbatch_of = @forward_backward, ...} {
      cleave.accumulate_grad @b, %db : tensor<8xf32>
      cleave.all_reduce_grads_start [@b] event 1 {group = "data"}
      %dw = cleave.matmul ...
      cleave.accumulate_grad @w, %dw : tensor<4x8xf32>
      cleave.all_reduce_grads_start [@w] event 2 {group = "data"}
      return
    }
    func.func @optimizer(...) attributes {cleave.kind = "optimizer"} {
      cleave.wait_grads event 1
      cleave.wait_grads event 2
      ...
    ```
  }];
}

// The layout the plan analysis needs where the module does not carry it
// (passes/PlanAnalysis.h's PlanLayout), declared once for every pass that
// reads the plan.
defvar PlanLayoutOptions = [
  Option<"globalBatch", "global-batch", "int64_t", /*default=*/"0",
         "samples per step (0: the batch of the function's inputs)">,
  Option<"microbatches", "microbatches", "int64_t", /*default=*/"1",
         "microbatches per step">,
  Option<"dataDegree", "data-degree", "int64_t", /*default=*/"1",
         "data-parallel ranks: one rank-<r>.pb each, reading samples "
         "[r*B/D, (r+1)*B/D) of each step">,
  Option<"placement", "placement", "std::string", /*default=*/"\"cluster\"",
         "how mesh axes map to ranks: cluster (= DPT), spread (= TPD), or "
         "an order of D, P, T from the slowest-varying axis to the fastest">,
  Option<"backend", "backend", "std::string", /*default=*/"\"cpu\"",
         "whose checked-in rates predict the step time (cpu, h100)">,
  Option<"ratesFile", "rates", "std::string", /*default=*/"\"\"",
         "rates from cleave-calibrate instead of the backend's">,
];

def EmitProgram : Pass<"cleave-emit-program", "ModuleOp"> {
  let summary = "writes the per-rank program (runtime/program.proto)";
  let description = [{
    Translates a planned module (after `cleave-memory-plan`) into the
    runtime's program: `rank-<r>.pb` and the parameters' initial values in
    `params.bin`, in `output-dir`. Each cleave op becomes a kernel
    instruction naming its ONNX node; each value's last use is followed by a
    `free`; the schedule runs `@forward` once per microbatch. The first two
    integer arguments are the token ids and targets, a scalar float result
    is the loss. The module itself is left unchanged.

    A module split into pipeline stages (nested `module @stage<k>`, each
    planned, with `cleave.schedule` from cleave-pipeline-schedule) gives
    one program per rank of the module's `cleave.mesh` (cleave-place-ranks;
    without one, a single rank). A rank holds the stages `s` with `s % P` = its
    pipeline rank, each in its own buffer, with its forward and backward
    functions repeated per activation slot. `cleave.send` and `cleave.recv`
    (cleave-stage-transfers) become the runtime's non-blocking sends and
    blocking receives, their peers the ranks at those coordinates of the
    mesh; a collective's group is the ranks along its mesh axis (or the
    listed `members` of it). The schedule is the rank's order from
    `cleave.schedule`, then the optimizer. `plan.json` is the plan analysis
    (passes/PlanAnalysis.h, docs/plan.md) as JSON, in one shape for every
    layout; `report=true` renders it as report.html.
  }];
  let options = !listconcat([
    Option<"outputDir", "output-dir", "std::string", /*default=*/"\"\"",
           "folder to write rank-0.pb and params.bin into (required)">,
    Option<"seed", "seed", "int64_t", /*default=*/"0",
           "seed of generated parameter initial values">,
    Option<"device", "device", "std::string", /*default=*/"\"cpu\"",
           "the backend the programs are for (cpu or cuda): Program.device, "
           "which cleave-run runs them on unless told otherwise">,
    Option<"report", "report", "bool", /*default=*/"false",
           "also write report.html: the plan as a page (partition, memory "
           "per rank, pipeline timeline)">,
  ], PlanLayoutOptions);
}

def CheckMemoryFit : Pass<"cleave-check-memory-fit", "ModuleOp"> {
  let summary = "fails when a rank's predicted peak exceeds the device memory";
  let description = [{
    The spec key `device_memory_gib`: reads the plan analysis
    (passes/PlanAnalysis.h) of a planned module and, when any rank's
    predicted peak is above `device-memory-gib`, fails naming the worst
    rank (the largest peak), its largest category and the spec key that
    would reduce it, before anything is written. The module is left
    unchanged; `device-memory-gib=0` checks nothing. When that part is a
    model state (parameters, gradients, optimizer state) of a data-parallel
    layout without a pipeline, the fix named is the smallest
    `sharded_data_parallel_degree` dividing the data-parallel degree whose
    plan would fit (this plan with the three split as sharding splits them,
    and a gathered parameter with its flattened gradient on top when none
    is gathered yet), or the ranks sharding would need when none does, with
    SMP's rule of thumb in a note (one more 8-GPU host in the sharding group
    per 3B parameters).

    ```
    error: spec key 'device_memory_gib': rank 1 needs 1.50 MiB (its plan),
    more than the 0.001 GiB of the device; its largest part is activations
    (1.20 MiB): lower 'batch_size' or raise 'microbatches' (or
    'pipeline_parallel_degree')
    ```
  }];
  let options = !listconcat([
    Option<"deviceMemoryGib", "device-memory-gib", "double", /*default=*/"0",
           "memory of one device in GiB (0: no limit)">,
    Option<"bucketElements", "bucket-elements", "int64_t", /*default=*/"0",
           "the sharding advice: gradient elements per reduce-scatter "
           "bucket the named degree would use (sdp_reduce_bucket_size)">,
  ], PlanLayoutOptions);
}

#endif // CLEAVE_PASSES_TD
