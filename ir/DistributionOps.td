//===- DistributionOps.td - collectives and transfers ------*- tablegen -*-===//
//
// The ops that move values between ranks: collectives over mesh axes and
// point-to-point transfers between pipeline stages, each with a `*_start`
// form returning an `!cleave.async_token` and `cleave.wait`, so that a pass
// can start a transfer early and wait for it late, overlapping it with
// compute. Groups are mesh axes (`#cleave.mesh` on an enclosing module),
// and shapes are checked against the mesh: an all-gather multiplies the
// gathered dimension by the group's size, a reduce-scatter divides it.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DISTRIBUTION_OPS_TD
#define CLEAVE_DISTRIBUTION_OPS_TD

include "ir/CleaveDialect.td"
include "ir/CleaveTypes.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

// The tensor constraints of ir/CleaveOps.td, which this file does not include
// (its ops would be generated twice).
def Cleave_CommTensor : StaticShapeTensorOf<[AnyType]>;
def Cleave_CommFloatTensor : StaticShapeTensorOf<[AnyFloat]>;

def Cleave_MeshAxes : TypedArrayAttrBase<StrAttr, "mesh axis names">;

// The group's axes and the reduction: the arguments every reducing
// collective shares.
defvar reduceArg = (ins DefaultValuedStrAttr<StrAttr, "sum">:$reduce);

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

def Cleave_AllGatherOp : Cleave_Op<"all_gather"> {
  let summary = "concatenates the group's slices of a tensor along a dimension";
  let description = [{
    Every rank of the group spanned by `axes` contributes `input`, its slice
    of a tensor split along `dim`; each gets the whole tensor, the slices
    concatenated in the order of the ranks' coordinates on `axes` (major to
    minor, as in a `#cleave.sharding`). The result's `dim` is the input's
    times the group's size. This is how a sharded parameter is assembled
    before the ops that read it (ZeRO-3, MiCS) and how sequence-parallel
    activations enter a tensor-parallel region.

    ```mlir
    %w = cleave.all_gather %shard {axes = ["sharded_data"], dim = 0 : i64}
        : tensor<64x256xf32> -> tensor<256x256xf32>
    ```
  }];
  let arguments = (ins Cleave_CommTensor:$input, Cleave_MeshAxes:$axes, I64Attr:$dim);
  let results = (outs Cleave_CommTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Cleave_AllGatherStartOp : Cleave_Op<"all_gather_start"> {
  let summary = "starts a `cleave.all_gather`";
  let description = [{
    The asynchronous form of `cleave.all_gather`: the token's value type is
    the gathered tensor, which `cleave.wait` yields. A pass issues the start
    before the compute that precedes the gathered tensor's first use.

    ```mlir
    %t = cleave.all_gather_start %shard {axes = ["sharded_data"], dim = 0 : i64}
        : tensor<64x256xf32> -> !cleave.async_token<tensor<256x256xf32>>
    %w = cleave.wait %t : !cleave.async_token<tensor<256x256xf32>>
    ```
  }];
  let arguments = (ins Cleave_CommTensor:$input, Cleave_MeshAxes:$axes, I64Attr:$dim);
  let results = (outs Cleave_AsyncTokenType:$token);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` qualified(type($token))";
  let hasVerifier = 1;
}

def Cleave_ReduceScatterOp : Cleave_Op<"reduce_scatter"> {
  let summary = "reduces a tensor over the group, each rank keeping one slice";
  let description = [{
    Every rank of the group spanned by `axes` contributes a whole `input`;
    the elementwise `reduce` (`sum`, `mean` or `max`) over the group is
    split along `dim` and each rank keeps the slice at its coordinate on
    `axes`. The result's `dim` is the input's divided by the group's size
    (it must divide). ZeRO reduce-scatters gradients instead of
    all-reducing them; a row-parallel product's partial sum becomes a
    sequence-parallel activation this way.

    ```mlir
    %g = cleave.reduce_scatter %grad {axes = ["sharded_data"], dim = 0 : i64, reduce = "mean"}
        : tensor<256x256xf32> -> tensor<64x256xf32>
    ```
  }];
  let arguments = !con((ins Cleave_CommFloatTensor:$input, Cleave_MeshAxes:$axes,
                            I64Attr:$dim), reduceArg);
  let results = (outs Cleave_CommFloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Cleave_ReduceScatterStartOp : Cleave_Op<"reduce_scatter_start"> {
  let summary = "starts a `cleave.reduce_scatter`";
  let description = [{
    The asynchronous form of `cleave.reduce_scatter`, started as soon as
    the gradient is complete so that it overlaps the rest of the backward.

    ```mlir
    %t = cleave.reduce_scatter_start %grad {axes = ["sharded_data"], dim = 0 : i64}
        : tensor<256x256xf32> -> !cleave.async_token<tensor<64x256xf32>>
    ```
  }];
  let arguments = !con((ins Cleave_CommFloatTensor:$input, Cleave_MeshAxes:$axes,
                            I64Attr:$dim), reduceArg);
  let results = (outs Cleave_AsyncTokenType:$token);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` qualified(type($token))";
  let hasVerifier = 1;
}

def Cleave_AllReduceStartOp : Cleave_Op<"all_reduce_start"> {
  let summary = "starts an all-reduce of a tensor over mesh axes";
  let description = [{
    Every rank of the group spanned by `axes` contributes `input`; after
    `cleave.wait` each holds the elementwise `reduce` (`sum`, `mean` or
    `max`) over the group, of the input's type. This is the value form of
    the data-parallel gradient all-reduce that `cleave.all_reduce_grads`
    does on buffers today; started when a gradient is complete, waited for
    before the optimizer reads it, it overlaps the rest of the backward.
    (The synchronous `cleave.all_reduce` names its group with one axis
    name; it is checked against the mesh when the module has one.)

    ```mlir
    %t = cleave.all_reduce_start %dw {axes = ["data"], reduce = "mean"}
        : tensor<64x64xf32> -> !cleave.async_token<tensor<64x64xf32>>
    %g = cleave.wait %t : !cleave.async_token<tensor<64x64xf32>>
    ```
  }];
  let arguments = !con((ins Cleave_CommFloatTensor:$input, Cleave_MeshAxes:$axes),
                       reduceArg);
  let results = (outs Cleave_AsyncTokenType:$token);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` qualified(type($token))";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Tensor parallelism (docs/tensor-parallel.md)
//===----------------------------------------------------------------------===//

def Cleave_AxisIndexOp : Cleave_Op<"axis_index"> {
  let summary = "this rank's coordinate on a mesh axis";
  let description = [{
    A rank-0 `i64` tensor holding the coordinate of the rank that runs the
    program on mesh axis `axis` (MLIR mesh's `process_linear_index` of one
    axis). The tensor-parallel partition builds one program for every
    tensor rank; the values that differ between them (the vocabulary
    offset of a vocab-parallel embedding, the class range of a
    vocab-parallel cross-entropy) are computed from it.

    ```mlir
    %r = cleave.axis_index {axis = "tensor"} : tensor<i64>
    ```
  }];
  let arguments = (ins StrAttr:$axis);
  let results = (outs 0DTensorOf<[I64]>:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Cleave_TpCopyOp : Cleave_Op<"tp_copy", [SameOperandsAndResultType]> {
  let summary = "Megatron's f: the identity, whose gradient is summed over axes";
  let description = [{
    Marks the replicated input of a tensor-parallel region (the norm's
    output before a column-parallel product). Forward it is the identity;
    its gradient rule all-reduces (sums) the gradient over the group
    spanned by `axes` (`cleave.tp_reduce`), since each rank's region
    contributed the gradient of its own slice of the work. It is the
    conjugate of `cleave.tp_reduce` (Megatron-LM's `f` and `g`,
    Shoeybi et al. 2019).

    ```mlir
    %h1 = cleave.tp_copy %h {axes = ["tensor"]} : tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins Cleave_CommFloatTensor:$input, Cleave_MeshAxes:$axes);
  let results = (outs Cleave_CommFloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Cleave_TpReduceOp : Cleave_Op<"tp_reduce", [SameOperandsAndResultType]> {
  let summary = "Megatron's g: an all-reduce sum whose gradient is the identity";
  let description = [{
    Completes a partial sum over the group spanned by `axes`: every rank
    contributes `input`, its partial value (a row-parallel product), and
    gets the sum. Its gradient rule is the identity: the gradient of a
    replicated value is the gradient of each rank's partial contribution.
    The runtime runs it as the all-reduce of `cleave.all_reduce`.

    ```mlir
    %y = cleave.tp_reduce %partial {axes = ["tensor"]} : tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins Cleave_CommFloatTensor:$input, Cleave_MeshAxes:$axes);
  let results = (outs Cleave_CommFloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Cleave_SpAllGatherOp : Cleave_Op<"sp_all_gather"> {
  let summary = "enters a tensor-parallel region from sequence parallelism";
  let description = [{
    Sequence parallelism (Korthikanti et al. 2022; Megatron-LM's
    `gather_from_sequence_parallel_region`): every rank of the group spanned
    by `axes` holds its part of the sequence along `dim`; each gets the
    whole sequence, the parts concatenated in the order of the ranks'
    coordinates. It replaces Megatron's f before a column-parallel region,
    and like f its gradient is summed over the group, but each rank keeps
    only its part of the sum: the gradient rule is
    `cleave.sp_reduce_scatter` along the same `dim`. The runtime gathers
    flat buffers, so the partition brings the sequence to `dim` 0 with a
    transpose first when it is not there already.

    With `split_grad` the users compute replicated values instead (an op
    that needs the whole sequence and is not tensor-parallel, such as a
    flatten of batch and sequence before a loss), whose gradient is the
    same on every rank: the gradient is then the rank's part of it, taken
    without communication (Megatron-LM's
    `tensor_parallel_output_grad=False`). It gathers over one axis.

    ```mlir
    %h = cleave.sp_all_gather %x {axes = ["tensor"], dim = 0 : i64}
        : tensor<4x2x64xf32> -> tensor<8x2x64xf32>
    %r = cleave.sp_all_gather %x {axes = ["tensor"], dim = 0 : i64, split_grad}
        : tensor<4x2x64xf32> -> tensor<8x2x64xf32>
    ```
  }];
  let arguments = (ins Cleave_CommFloatTensor:$input, Cleave_MeshAxes:$axes,
                       I64Attr:$dim, UnitAttr:$split_grad);
  let results = (outs Cleave_CommFloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Cleave_SpReduceScatterOp : Cleave_Op<"sp_reduce_scatter"> {
  let summary = "leaves a tensor-parallel region into sequence parallelism";
  let description = [{
    Sequence parallelism (Megatron-LM's
    `reduce_scatter_to_sequence_parallel_region`): every rank of the group
    spanned by `axes` contributes its partial sum (a row-parallel product's
    result); the sum over the group is split along `dim` and each rank keeps
    the part at its coordinate. It replaces Megatron's g (an all-reduce)
    after a row-parallel region, and like g's its gradient is not summed:
    the gradient rule is `cleave.sp_all_gather` along the same `dim` (each
    rank's partial contribution needs the gradient of the whole sequence).

    ```mlir
    %y = cleave.sp_reduce_scatter %partial {axes = ["tensor"], dim = 0 : i64}
        : tensor<8x2x64xf32> -> tensor<4x2x64xf32>
    ```
  }];
  let arguments = (ins Cleave_CommFloatTensor:$input, Cleave_MeshAxes:$axes,
                       I64Attr:$dim);
  let results = (outs Cleave_CommFloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Point to point
//===----------------------------------------------------------------------===//

// The peer of a transfer: its coordinate on `axis`, every other coordinate
// the same as the sender's; `tag` pairs a send with its receive.
defvar peerArgs = (ins StrAttr:$axis, I64Attr:$peer, I64Attr:$tag);

def Cleave_SendOp : Cleave_Op<"send"> {
  let summary = "sends a tensor to the rank at another coordinate of one axis";
  let description = [{
    Sends `input` to the rank whose coordinate on mesh axis `axis` is
    `peer` and whose other coordinates are this rank's: the next pipeline
    stage of the same data-parallel replica. The receiver's `cleave.recv`
    names this rank as its peer and the same `tag` and type.

    ```mlir
    cleave.send %h {axis = "pipeline", peer = 1 : i64, tag = 0 : i64} : tensor<2x4x8xf32>
    ```
  }];
  let arguments = !con((ins Cleave_CommTensor:$input), peerArgs);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Cleave_SendStartOp : Cleave_Op<"send_start"> {
  let summary = "starts a `cleave.send`";
  let description = [{
    The asynchronous form of `cleave.send`; its token has no value, and
    `input` must not be overwritten before `cleave.wait` returns.

    ```mlir
    %t = cleave.send_start %h {axis = "pipeline", peer = 1 : i64, tag = 0 : i64}
        : tensor<2x4x8xf32> -> !cleave.async_token
    cleave.wait %t : !cleave.async_token
    ```
  }];
  let arguments = !con((ins Cleave_CommTensor:$input), peerArgs);
  let results = (outs Cleave_AsyncTokenType:$token);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` qualified(type($token))";
  let hasVerifier = 1;
}

def Cleave_RecvOp : Cleave_Op<"recv"> {
  let summary = "receives a tensor from the rank at another coordinate of one axis";
  let description = [{
    Receives the tensor that the rank at coordinate `peer` on `axis` sends
    with the same `tag`: the previous stage's activations in forward, the
    next stage's gradient in backward.

    ```mlir
    %h = cleave.recv {axis = "pipeline", peer = 0 : i64, tag = 0 : i64} : tensor<2x4x8xf32>
    ```
  }];
  let arguments = peerArgs;
  let results = (outs Cleave_CommTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Cleave_RecvStartOp : Cleave_Op<"recv_start"> {
  let summary = "starts a `cleave.recv`";
  let description = [{
    The asynchronous form of `cleave.recv`: posted early (before the compute
    of the previous microbatch), waited for where the value is needed.

    ```mlir
    %t = cleave.recv_start {axis = "pipeline", peer = 0 : i64, tag = 0 : i64}
        : !cleave.async_token<tensor<2x4x8xf32>>
    %h = cleave.wait %t : !cleave.async_token<tensor<2x4x8xf32>>
    ```
  }];
  let arguments = peerArgs;
  let results = (outs Cleave_AsyncTokenType:$token);
  let assemblyFormat = "attr-dict `:` qualified(type($token))";
  let hasVerifier = 1;
}

def Cleave_WaitOp : Cleave_Op<"wait",
    [DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "waits for a started transfer and yields what it delivers";
  let description = [{
    Blocks until the transfer `token` stands for is complete; yields its
    value (the token's value type) unless it was a send. Each token is
    waited for exactly once.

    ```mlir
    %g = cleave.wait %t : !cleave.async_token<tensor<64x64xf32>>
    cleave.wait %s : !cleave.async_token
    ```
  }];
  let arguments = (ins Cleave_AsyncTokenType:$token);
  let results = (outs Optional<Cleave_CommTensor>:$result);
  let assemblyFormat = "$token attr-dict `:` qualified(type($token))";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Between memory spaces (activation offload)
//===----------------------------------------------------------------------===//

def Cleave_OffloadOp : Cleave_Op<"offload", [SameOperandsAndResultType]> {
  let summary = "copies a device value to host memory";
  let description = [{
    The result is a copy of `input` in host memory: it carries
    `cleave.memory_space = #cleave.memory_space<host>`, so the memory plan
    gives it space in the host arena, and the device value may die after
    its last forward reader. `cleave-offload-activations` puts one after
    each checkpoint a forward keeps for its backward; the runtime copies
    device to host (on CUDA on a copy stream). Only `cleave.fetch` reads a
    host value.

    ```mlir
    %h = cleave.offload %x {cleave.memory_space = #cleave.memory_space<host>} : tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Cleave_CommTensor:$input);
  let results = (outs Cleave_CommTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Cleave_FetchOp : Cleave_Op<"fetch", [SameOperandsAndResultType]> {
  let summary = "copies a host value back to device memory";
  let description = [{
    The result is a device copy of `input`, a host value (a
    `cleave.offload`'s result, or a backward function's argument saved
    from one, marked `cleave.memory_space = #cleave.memory_space<host>`).
    `cleave-offload-activations` places it `horizon` segments ahead of the
    backward that reads it, so the copy overlaps the segments' compute.

    ```mlir
    func.func @f_backward(%h: tensor<2x8xf32> {cleave.saved_from = 1 : i64, cleave.memory_space = #cleave.memory_space<host>}) {
      %x = cleave.fetch %h : tensor<2x8xf32>
      ...
    }
    ```
  }];
  let arguments = (ins Cleave_CommTensor:$input);
  let results = (outs Cleave_CommTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

#endif // CLEAVE_DISTRIBUTION_OPS_TD
