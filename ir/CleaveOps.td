//===- CleaveOps.td - cleave dialect operations ------------*- tablegen -*-===//
//
// Every op of the cleave dialect. Shapes are static; ops whose result shape
// follows from their operands implement InferTypeOpInterface, so the
// frontend builds them without computing shapes and the verifier checks the
// printed result type against the inferred one.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_OPS_TD
#define CLEAVE_OPS_TD

include "ir/CleaveDialect.td"
include "ir/CleaveAttrs.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def Cleave_Tensor : StaticShapeTensorOf<[AnyType]>;
def Cleave_FloatTensor : StaticShapeTensorOf<[AnyFloat]>;
def Cleave_IntTensor : StaticShapeTensorOf<[AnySignlessInteger]>;
def Cleave_BoolTensor : StaticShapeTensorOf<[I1]>;
def Cleave_IndexTensor : StaticShapeTensorOf<[I32, I64]>;
def Cleave_Scalar : 0DTensorOf<[AnyFloat]>;

//===----------------------------------------------------------------------===//
// Parameters and constants
//===----------------------------------------------------------------------===//

def Cleave_ParameterOp : Cleave_Op<"parameter", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "a trainable weight of the model";
  let description = [{
    Declares one trainable parameter by the name of the ONNX initializer it
    came from. `value` holds the initial data; it is absent for a model
    exported with shapes only, whose weights are initialized by the runtime.
    A parameter used in several places (GPT-2's tied embedding and output
    head) is one symbol read by several `cleave.get_param` ops. `init` says
    how the runtime initializes a parameter without `value`: `normal:STD`,
    `zeros` or `ones`.

    The unit attribute `cleave.frozen` marks a parameter that is not trained
    (the spec's `frozen_parameters`, e.g. rotary cos/sin tables that an
    export turned from buffers into initializers): `cleave-autodiff` reads
    it like a constant, so it gets no gradient and no optimizer update, but
    it is loaded and saved (`--save-params`) like any other parameter.

    ```mlir
    cleave.parameter @"transformer.wte.weight" : tensor<256x64xf32>
        = dense_resource<transformer.wte.weight> : tensor<256x64xf32>
    cleave.parameter @"h.0.ln_1.bias" : tensor<64xf32>
    cleave.parameter @cos {cleave.frozen} : tensor<8x4xf32>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<Cleave_Tensor>:$type,
                       OptionalAttr<ElementsAttr>:$value,
                       OptionalAttr<StrAttr>:$init);
  let assemblyFormat = "$sym_name attr-dict `:` $type (`=` $value^)?";
  let hasVerifier = 1;
}

def Cleave_GetParamOp : Cleave_Op<"get_param", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "reads a parameter inside a function";
  let description = [{
    Yields the current value of a `cleave.parameter`. The result type must be
    the parameter's type.

    ```mlir
    %w = cleave.get_param @"transformer.wte.weight" : tensor<256x64xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$name);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def Cleave_ConstantOp : Cleave_Op<"constant", [Pure, ConstantLike,
    AllTypesMatch<["value", "result"]>]> {
  let summary = "a constant tensor";
  let description = [{
    A compile-time constant: masks, position indices, scales, and everything
    the frontend folded from the shape arithmetic of a traced export.

    ```mlir
    %c = cleave.constant dense<0.125> : tensor<f32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// Binary ops broadcast as numpy and ONNX do: shapes are aligned on the
// right, and a dimension of 1 stretches to the other's size.
class Cleave_BroadcastOp<string mnemonic, string what, Type operandType,
                         Type resultType>
    : Cleave_Op<mnemonic, [Pure,
          DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = what;
  let arguments = (ins operandType:$lhs, operandType:$rhs);
  let results = (outs resultType:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
}

class Cleave_ArithOp<string mnemonic, string what, Type type = Cleave_Tensor>
    : Cleave_BroadcastOp<mnemonic, what, type, type> {
  let description = [{
    Elementwise `}] # what # [{` with numpy broadcasting. Both operands have
    the same element type; the result has that type and the broadcast shape.

    ```mlir
    %r = cleave.}] # mnemonic # [{ %a, %b
        : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
    ```
  }];
  let extraClassDefinition = [{
    ::mlir::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *context, ::std::optional<::mlir::Location> loc,
        ::mlir::ValueRange operands, ::mlir::DictionaryAttr attributes,
        ::mlir::RegionRange regions,
        ::llvm::SmallVectorImpl<::mlir::Type> &inferred) {
      return inferBroadcastResult(loc, operands, /*resultElementType=*/{},
                                  inferred);
    }
  }];
}

def Cleave_AddOp : Cleave_ArithOp<"add", "addition">;
def Cleave_SubOp : Cleave_ArithOp<"sub", "subtraction">;
def Cleave_MulOp : Cleave_ArithOp<"mul", "multiplication">;
def Cleave_DivOp : Cleave_ArithOp<"div", "division">;
def Cleave_PowOp : Cleave_ArithOp<"pow", "power">;
def Cleave_MaxOp : Cleave_ArithOp<"max", "maximum">;
def Cleave_MinOp : Cleave_ArithOp<"min", "minimum">;
def Cleave_AndOp : Cleave_ArithOp<"and", "logical and", Cleave_BoolTensor>;
def Cleave_OrOp : Cleave_ArithOp<"or", "logical or", Cleave_BoolTensor>;

class Cleave_CompareOp<string mnemonic, string what>
    : Cleave_BroadcastOp<mnemonic, what, Cleave_Tensor, Cleave_BoolTensor> {
  let description = [{
    Elementwise comparison `}] # what # [{` with numpy broadcasting; the
    result is an `i1` tensor of the broadcast shape.

    ```mlir
    %m = cleave.}] # mnemonic # [{ %a, %b
        : (tensor<8x1xi64>, tensor<8xi64>) -> tensor<8x8xi1>
    ```
  }];
  let extraClassDefinition = [{
    ::mlir::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *context, ::std::optional<::mlir::Location> loc,
        ::mlir::ValueRange operands, ::mlir::DictionaryAttr attributes,
        ::mlir::RegionRange regions,
        ::llvm::SmallVectorImpl<::mlir::Type> &inferred) {
      return inferBroadcastResult(loc, operands,
                                  ::mlir::IntegerType::get(context, 1),
                                  inferred);
    }
  }];
}

def Cleave_EqualOp : Cleave_CompareOp<"equal", "lhs == rhs">;
def Cleave_LessOp : Cleave_CompareOp<"less", "lhs < rhs">;
def Cleave_LessEqualOp : Cleave_CompareOp<"less_equal", "lhs <= rhs">;
def Cleave_GreaterOp : Cleave_CompareOp<"greater", "lhs > rhs">;
def Cleave_GreaterEqualOp : Cleave_CompareOp<"greater_equal", "lhs >= rhs">;

def Cleave_SelectOp : Cleave_Op<"select", [Pure,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "elementwise choice (ONNX Where)";
  let description = [{
    `cond ? on_true : on_false` elementwise, all three broadcast together.
    This is how causal masks appear after import.

    ```mlir
    %s = cleave.select %mask, %scores, %neg_inf
        : (tensor<1x1x8x8xi1>, tensor<2x4x8x8xf32>, tensor<f32>)
        -> tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins Cleave_BoolTensor:$cond, Cleave_Tensor:$on_true,
                       Cleave_Tensor:$on_false);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat =
      "$cond `,` $on_true `,` $on_false attr-dict `:` functional-type(operands, results)";
}

class Cleave_UnaryOp<string mnemonic, string formula, Type type = Cleave_FloatTensor>
    : Cleave_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = "elementwise " # formula;
  let description = [{
    Computes `}] # formula # [{` for every element.

    ```mlir
    %y = cleave.}] # mnemonic # [{ %x : tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins type:$x);
  let results = (outs type:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}

def Cleave_NegOp : Cleave_UnaryOp<"neg", "-x", Cleave_Tensor>;
def Cleave_AbsOp : Cleave_UnaryOp<"abs", "|x|", Cleave_Tensor>;
def Cleave_ReluOp : Cleave_UnaryOp<"relu", "max(x, 0)", Cleave_Tensor>;
def Cleave_NotOp : Cleave_UnaryOp<"not", "logical not", Cleave_BoolTensor>;
def Cleave_ExpOp : Cleave_UnaryOp<"exp", "e^x">;
def Cleave_LogOp : Cleave_UnaryOp<"log", "ln(x)">;
def Cleave_SqrtOp : Cleave_UnaryOp<"sqrt", "sqrt(x)">;
def Cleave_RsqrtOp : Cleave_UnaryOp<"rsqrt", "1 / sqrt(x)">;
def Cleave_ReciprocalOp : Cleave_UnaryOp<"reciprocal", "1 / x">;
def Cleave_TanhOp : Cleave_UnaryOp<"tanh", "tanh(x)">;
def Cleave_ErfOp : Cleave_UnaryOp<"erf", "erf(x)">;
def Cleave_SigmoidOp : Cleave_UnaryOp<"sigmoid", "1 / (1 + e^-x)">;
def Cleave_SiluOp : Cleave_UnaryOp<"silu", "x * sigmoid(x)">;
def Cleave_SinOp : Cleave_UnaryOp<"sin", "sin(x)">;
def Cleave_CosOp : Cleave_UnaryOp<"cos", "cos(x)">;

def Cleave_GeluOp : Cleave_Op<"gelu", [Pure, SameOperandsAndResultType]> {
  let summary = "Gaussian error linear unit";
  let description = [{
    `x * Phi(x)`, exactly (`approximate = "none"`, via erf) or with GPT-2's
    tanh approximation (`approximate = "tanh"`).

    ```mlir
    %y = cleave.gelu %x {approximate = "tanh"} : tensor<2x8x256xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$x,
                       DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
  let hasVerifier = 1;
}

def Cleave_DropoutOp : Cleave_Op<"dropout",
                                  [Pure, SameOperandsAndResultType]> {
  let summary = "training-mode dropout with a layout-independent random mask";
  let description = [{
    ONNX Dropout in training mode: each element is kept with probability
    `1 - ratio` and scaled by `1 / (1 - ratio)`, or set to zero. The mask is
    not an operand: the runtime draws it from a counter-based stream keyed
    by (seed, `stream` (the ONNX node's name), training step) and counted by
    the element's index in the step's GLOBAL tensor: the sample's index in
    the global batch times the elements per sample, plus the element's
    row-major index within the sample in the full (unsplit) tensor. So the
    mask of an element is the same whatever the layout (docs/dropout.md).

    `x` holds samples along dimension 0 (rows of equal count per sample).
    After cleave-partition-tensor or cleave-sequence-parallel a split `x`
    is the rank's slice of a tensor of `full_shape`, cut by `split` (a
    sharding over the mesh): the emitter turns them into this rank's
    offsets. Absent, `x` is whole.

    The same op is its own gradient (dx = dy * mask / (1 - ratio)): the
    backward runs it on dy with the same attributes, which draws the same
    mask again, as does a recomputation (activation checkpointing).

    ```mlir
    %y = cleave.dropout %x {ratio = 1.000000e-01 : f64,
                            stream = "/attn/Dropout"} : tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$x, F64Attr:$ratio, StrAttr:$stream,
                       OptionalAttr<DenseI64ArrayAttr>:$full_shape,
                       OptionalAttr<Cleave_ShardingAttr>:$split);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
  let hasVerifier = 1;
}

def Cleave_CastOp : Cleave_Op<"cast", [Pure, SameOperandsAndResultShape]> {
  let summary = "element type conversion";
  let description = [{
    Converts every element to the result's element type, as ONNX Cast does
    (floats to integers truncate toward zero; anything nonzero is true).

    ```mlir
    %f = cleave.cast %mask : tensor<8x8xi1> -> tensor<8x8xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$x);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
}

//===----------------------------------------------------------------------===//
// Matrix products, reductions, normalizations
//===----------------------------------------------------------------------===//

def Cleave_MatmulOp : Cleave_Op<"matmul", [Pure,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "batched matrix product";
  let description = [{
    `lhs[..., M, K] x rhs[..., K, N] -> [..., M, N]`. Both operands have rank
    two or more; leading (batch) dimensions broadcast as numpy's `matmul`.
    This is the op tensor parallelism splits along `N` (column parallel) or
    `K` (row parallel). `transpose_lhs` / `transpose_rhs` read that operand
    as its transpose over the last two dimensions (`lhs: [..., K, M]`,
    `rhs: [..., N, K]`), which is how the backward pass and a weight stored
    as `[out, in]` use a product without a transpose kernel.

    ```mlir
    %y = cleave.matmul %x, %w
        : (tensor<2x8x64xf32>, tensor<64x192xf32>) -> tensor<2x8x192xf32>
    %dw = cleave.matmul %x, %dy {transpose_lhs}
        : (tensor<16x64xf32>, tensor<16x192xf32>) -> tensor<64x192xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$lhs, Cleave_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
}

class Cleave_ReduceOp<string mnemonic, string what>
    : Cleave_Op<mnemonic, [Pure, DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = what # " over the given axes";
  let description = [{
    Reduces `x` over `axes` (sorted, non-negative, unique). With `keepdims`
    the reduced dimensions stay as size 1.

    ```mlir
    %m = cleave.}] # mnemonic # [{ %x {axes = array<i64: 2>, keepdims = true}
        : tensor<2x8x64xf32> -> tensor<2x8x1xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$x, DenseI64ArrayAttr:$axes,
                       DefaultValuedAttr<BoolAttr, "true">:$keepdims);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let extraClassDefinition = [{
    ::mlir::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *context, ::std::optional<::mlir::Location> loc,
        ::mlir::ValueRange operands, ::mlir::DictionaryAttr attributes,
        ::mlir::RegionRange regions,
        ::llvm::SmallVectorImpl<::mlir::Type> &inferred) {
      Adaptor adaptor(operands, attributes);
      return inferReduceResult(loc, adaptor.getX(), adaptor.getAxes(),
                               adaptor.getKeepdims(), inferred);
    }
  }];
}

def Cleave_ReduceSumOp : Cleave_ReduceOp<"reduce_sum", "sum">;
def Cleave_ReduceMeanOp : Cleave_ReduceOp<"reduce_mean", "mean">;
def Cleave_ReduceMaxOp : Cleave_ReduceOp<"reduce_max", "maximum">;
def Cleave_ReduceMinOp : Cleave_ReduceOp<"reduce_min", "minimum">;

def Cleave_CumsumOp : Cleave_Op<"cumsum", [Pure, SameOperandsAndResultType]> {
  let summary = "cumulative sum along one axis (ONNX CumSum)";
  let description = [{
    `result[.., i, ..] = x[.., 0, ..] + ... + x[.., i, ..]` along `axis`
    (non-negative, less than the rank). With `exclusive` the sum leaves out
    `x[.., i, ..]` itself (the first result is 0); with `reverse` it runs
    from the end (`x[.., i, ..] + ... + x[.., n-1, ..]`). Integer sums wrap;
    floating-point sums are accumulated in double on the CPU and in float
    on CUDA. OPT computes its positions from the attention mask with it.

    ```mlir
    %p = cleave.cumsum %mask {axis = 1 : i64} : tensor<2x8xi64>
    %q = cleave.cumsum %x {axis = 0 : i64, exclusive = true, reverse = true}
        : tensor<4x3xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$x, I64Attr:$axis,
                       DefaultValuedAttr<BoolAttr, "false">:$exclusive,
                       DefaultValuedAttr<BoolAttr, "false">:$reverse);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
  let hasVerifier = 1;
}

class Cleave_SoftmaxLikeOp<string mnemonic, string what>
    : Cleave_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = what # " along one axis";
  let description = [{
    `}] # what # [{` of `x` along `axis` (non-negative, less than the rank).

    ```mlir
    %p = cleave.}] # mnemonic # [{ %scores {axis = 3 : i64} : tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$x, I64Attr:$axis);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
  let hasVerifier = 1;
}

def Cleave_SoftmaxOp : Cleave_SoftmaxLikeOp<"softmax", "softmax">;
def Cleave_LogSoftmaxOp : Cleave_SoftmaxLikeOp<"log_softmax", "log-softmax">;

def Cleave_LayerNormOp : Cleave_Op<"layer_norm", [Pure, AttrSizedOperandSegments]> {
  let summary = "layer normalization";
  let description = [{
    Normalizes `x` over the dimensions from `axis` to the last (mean and
    variance, `epsilon` added to the variance), then scales and shifts by
    the optional `scale` and `bias`, whose shape is `x.shape[axis:]`.

    ```mlir
    %y = cleave.layer_norm %x scale %g bias %b {axis = 2 : i64, epsilon = 1.0e-05 : f32}
        : (tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$x,
                       Optional<Cleave_FloatTensor>:$scale,
                       Optional<Cleave_FloatTensor>:$bias,
                       I64Attr:$axis, F32Attr:$epsilon);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = [{
    $x (`scale` $scale^)? (`bias` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Cleave_RmsNormOp : Cleave_Op<"rms_norm", [Pure]> {
  let summary = "root-mean-square normalization";
  let description = [{
    `x * rsqrt(mean(x^2 over axis..last) + epsilon) * scale`, Llama's RMSNorm;
    `scale` has shape `x.shape[axis:]`.

    ```mlir
    %y = cleave.rms_norm %x, %g {axis = 2 : i64, epsilon = 1.0e-05 : f32}
        : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$x, Cleave_FloatTensor:$scale,
                       I64Attr:$axis, F32Attr:$epsilon);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat =
      "$x `,` $scale attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Cleave_RotaryOp : Cleave_Op<"rotary", [Pure]> {
  let summary = "rotary position embedding, rotate-half form";
  let description = [{
    `x * cos + rotate_half(x) * sin` with
    `rotate_half(x) = concat(-x[..., D/2:], x[..., :D/2])` along the last
    axis: Llama's (and GPT-NeoX's) rotary embedding. `x: [..., T, D]` with
    `D` even; `cos` and `sin: [T, D]`, shared by every leading index.

    ```mlir
    %y = cleave.rotary %q, %cos, %sin
        : (tensor<2x4x8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8x16xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$x, Cleave_FloatTensor:$cos,
                       Cleave_FloatTensor:$sin);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat =
      "$x `,` $cos `,` $sin attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Cleave_AttentionOp : Cleave_Op<"attention", [Pure]> {
  let summary = "scaled dot-product attention";
  let description = [{
    `softmax(q k^T * scale [+ mask]) v` per batch and head, with
    `q: [B, H, Tq, D]`, `k, v: [B, Hkv, Tk, D]` where `H` is a multiple of
    `Hkv` (grouped-query attention repeats each key/value head `H / Hkv`
    times). `causal` masks position `j > i`. An optional `mask` broadcastable
    to `[B, H, Tq, Tk]` is either `i1` (true keeps) or additive float of
    any width (the kernels add it in f32: an f32 mask on bf16 scores is
    what autocast computes).

    ```mlir
    %o = cleave.attention %q, %k, %v {causal, scale = 0.125 : f32}
        : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>)
        -> tensor<2x4x8x16xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$q, Cleave_FloatTensor:$k,
                       Cleave_FloatTensor:$v, Optional<Cleave_Tensor>:$mask,
                       F32Attr:$scale, UnitAttr:$causal);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`mask` $mask^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Lookups and losses
//===----------------------------------------------------------------------===//

def Cleave_EmbeddingOp : Cleave_Op<"embedding", [Pure,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "embedding table lookup";
  let description = [{
    Rows of `table: [V, D]` picked by integer `ids` (any shape), giving
    `[ids..., D]`. Kept apart from `gather` so tensor parallelism can split
    the vocabulary and the backward pass can scatter-add into the table.

    `padding_idx` (optional, in `[0, V)`) is PyTorch's
    `nn.Embedding(..., padding_idx=k)`: the lookup is unchanged, but row `k`
    gets no gradient from it (the `embedding_grad` of this op carries the
    same attribute). ONNX cannot say it; the importer takes it from the
    model's `cleave.padding_idx` metadata. It is a row of the whole table.

    ```mlir
    %e = cleave.embedding %wte, %idx
        : (tensor<256x64xf32>, tensor<2x8xi64>) -> tensor<2x8x64xf32>
    %p = cleave.embedding %wte, %idx {padding_idx = 0 : i64}
        : (tensor<256x64xf32>, tensor<2x8xi64>) -> tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$table, Cleave_IndexTensor:$ids,
                       OptionalAttr<I64Attr>:$padding_idx);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat =
      "$table `,` $ids attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Cleave_GatherOp : Cleave_Op<"gather", [Pure,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "ONNX Gather along one axis";
  let description = [{
    `data.shape[:axis] + indices.shape + data.shape[axis+1:]`, taking
    `data[..., indices[j], ...]`; negative indices count from the end.

    ```mlir
    %g = cleave.gather %x, %i {axis = 1 : i64}
        : (tensor<2x8x64xf32>, tensor<3xi64>) -> tensor<2x3x64xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$data, Cleave_IndexTensor:$indices,
                       I64Attr:$axis);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat =
      "$data `,` $indices attr-dict `:` functional-type(operands, results)";
}

def Cleave_GatherElementsOp : Cleave_Op<"gather_elements", [Pure,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "ONNX GatherElements: picks elements along one axis";
  let description = [{
    `result[i..] = data[i.. with its axis coordinate replaced by
    indices[i..]]`: `indices` has `data`'s rank, and no larger a size than
    `data` in the other dimensions; the result has the shape of `indices`
    and the element type of `data`. Negative indices count from the end.

    ```mlir
    %g = cleave.gather_elements %cos, %pos {axis = 2 : i64}
        : (tensor<1x1x16x8xf32>, tensor<2x1x8x8xi64>) -> tensor<2x1x8x8xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$data, Cleave_IndexTensor:$indices,
                       I64Attr:$axis);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat =
      "$data `,` $indices attr-dict `:` functional-type(operands, results)";
}

def Cleave_ScatterNdOp : Cleave_Op<"scatter_nd", [Pure,
    AllTypesMatch<["data", "result"]>]> {
  let summary = "ONNX ScatterND: writes slices at index tuples";
  let description = [{
    A copy of `data` (rank r) in which, for each index tuple `t` of
    `indices` (its last dimension k <= r; shape `[..., k]`), the slice
    `data[t]` (of shape `data.shape[k:]`) becomes `updates[...]` (shape
    `indices.shape[:-1] + data.shape[k:]`), or is combined with it by
    `reduction`: `none` (the value written; tuples should not repeat),
    `add`, `mul`, `max` or `min` (applied in the order of the tuples).
    Negative indices count from the end.

    ```mlir
    %m = cleave.scatter_nd %mask, %where, %fill {reduction = "none"}
        : (tensor<2x8xf32>, tensor<3x2xi64>, tensor<3xf32>) -> tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$data, Cleave_IndexTensor:$indices,
                       Cleave_Tensor:$updates,
                       DefaultValuedAttr<StrAttr, "\"none\"">:$reduction);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat =
      "$data `,` $indices `,` $updates attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Cleave_GatherNdOp : Cleave_Op<"gather_nd", [Pure,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "reads the slices at index tuples (ONNX GatherND, batch_dims 0)";
  let description = [{
    For each index tuple `t` of `indices` (shape `[..., k]`, k <= the rank
    of `data`), the slice `data[t]`: the result has shape
    `indices.shape[:-1] + data.shape[k:]`. Negative indices count from the
    end. The gradient of `cleave.scatter_nd`'s updates.

    ```mlir
    %u = cleave.gather_nd %dy, %where
        : (tensor<2x8xf32>, tensor<3x2xi64>) -> tensor<3xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$data, Cleave_IndexTensor:$indices);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat =
      "$data `,` $indices attr-dict `:` functional-type(operands, results)";
}

class Cleave_LossOp<string mnemonic, string what> : Cleave_Op<mnemonic, [Pure,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = what;
  let arguments = (ins Cleave_FloatTensor:$input, Cleave_IndexTensor:$target,
                       Cleave_LossReductionAttr:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat =
      "$input `,` $target attr-dict `:` functional-type(operands, results)";
  let extraClassDefinition = [{
    ::mlir::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *context, ::std::optional<::mlir::Location> loc,
        ::mlir::ValueRange operands, ::mlir::DictionaryAttr attributes,
        ::mlir::RegionRange regions,
        ::llvm::SmallVectorImpl<::mlir::Type> &inferred) {
      Adaptor adaptor(operands, attributes);
      return inferLossResult(loc, adaptor.getInput(), adaptor.getTarget(),
                             adaptor.getReduction(), inferred);
    }
  }];
}

def Cleave_SoftmaxCrossEntropyOp
    : Cleave_LossOp<"softmax_cross_entropy", "softmax cross-entropy loss"> {
  let description = [{
    ONNX SoftmaxCrossEntropyLoss (and PyTorch's `F.cross_entropy`) without
    class weights: `input: [N, C, d...]` logits, `target: [N, d...]` class
    ids. `reduction = mean` averages over the targets not equal to
    `ignore_index`; `none` keeps `[N, d...]`. A backend fuses it with the
    head's matrix product.

    ```mlir
    %loss = cleave.softmax_cross_entropy %logits, %t {reduction = #cleave.reduction<mean>}
        : (tensor<16x256xf32>, tensor<16xi64>) -> tensor<f32>
    ```
  }];
}

def Cleave_NllLossOp
    : Cleave_LossOp<"nll_loss", "negative log-likelihood loss"> {
  let description = [{
    ONNX NegativeLogLikelihoodLoss without class weights: `-input[n, t[n]]`
    with `input: [N, C, d...]` log-probabilities, reduced like
    `softmax_cross_entropy`.

    ```mlir
    %loss = cleave.nll_loss %logp, %t {reduction = #cleave.reduction<mean>}
        : (tensor<16x256xf32>, tensor<16xi64>) -> tensor<f32>
    ```
  }];
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Cleave_ReshapeOp : Cleave_Op<"reshape", [Pure]> {
  let summary = "same elements, new shape";
  let description = [{
    Row-major reshape; the element count is unchanged.

    ```mlir
    %r = cleave.reshape %x : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$x);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Cleave_TransposeOp : Cleave_Op<"transpose", [Pure,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "permutes dimensions";
  let description = [{
    `result.shape[i] = x.shape[perm[i]]`.

    ```mlir
    %t = cleave.transpose %x {perm = array<i64: 0, 2, 1, 3>}
        : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$x, DenseI64ArrayAttr:$perm);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
}

def Cleave_BroadcastToOp : Cleave_Op<"broadcast_to", [Pure]> {
  let summary = "broadcasts to a larger shape (ONNX Expand)";
  let description = [{
    Numpy-broadcasts `x` to the result's shape, which must be the broadcast
    of the two shapes.

    ```mlir
    %b = cleave.broadcast_to %x : tensor<1x8xf32> -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$x);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
}

def Cleave_SliceOp : Cleave_Op<"slice", [Pure,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "strided slice with one entry per dimension";
  let description = [{
    Takes `x[start[i] : limit[i] : step[i]]` in every dimension, with the
    values normalized by the frontend: `step != 0`; for a positive step
    `0 <= start <= limit <= dim`; for a negative step
    `-1 <= limit <= start < dim`.

    ```mlir
    %s = cleave.slice %qkv {start = array<i64: 0, 0, 64>,
                            limit = array<i64: 2, 8, 128>,
                            step = array<i64: 1, 1, 1>}
        : tensor<2x8x192xf32> -> tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$x, DenseI64ArrayAttr:$start,
                       DenseI64ArrayAttr:$limit, DenseI64ArrayAttr:$step);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
}

def Cleave_ConcatOp : Cleave_Op<"concat", [Pure,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "joins tensors along one axis";
  let description = [{
    All inputs have the same rank, element type and sizes except along
    `axis`.

    ```mlir
    %c = cleave.concat %a, %b {axis = 1 : i64}
        : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Variadic<Cleave_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat =
      "$inputs attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Gradients (cleave-autodiff writes these)
//===----------------------------------------------------------------------===//

class Cleave_ActivationGradOp<string mnemonic, string forward>
    : Cleave_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = "gradient of `cleave." # forward # "`";
  let description = [{
    `dx = dy * d}] # forward # [{(x)/dx`, elementwise, from the forward
    op's input `x` and the gradient `dy` of its result.

    ```mlir
    %dx = cleave.}] # mnemonic # [{ %x, %dy : tensor<2x8x256xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$x, Cleave_FloatTensor:$dy);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "$x `,` $dy attr-dict `:` type($x)";
}

def Cleave_SiluGradOp : Cleave_ActivationGradOp<"silu_grad", "silu">;

def Cleave_GeluGradOp : Cleave_ActivationGradOp<"gelu_grad", "gelu"> {
  let arguments = (ins Cleave_FloatTensor:$x, Cleave_FloatTensor:$dy,
                       DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let hasVerifier = 1;
}

class Cleave_SoftmaxLikeGradOp<string mnemonic, string forward, string formula>
    : Cleave_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = "gradient of `cleave." # forward # "`";
  let description = [{
    From the forward op's result `y` and its gradient `dy`:
    `}] # formula # [{`, the sum along `axis`.

    ```mlir
    %dx = cleave.}] # mnemonic # [{ %y, %dy {axis = 3 : i64} : tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$y, Cleave_FloatTensor:$dy,
                       I64Attr:$axis);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "$y `,` $dy attr-dict `:` type($y)";
  let hasVerifier = 1;
}

def Cleave_SoftmaxGradOp : Cleave_SoftmaxLikeGradOp<"softmax_grad", "softmax",
    "dx = y * (dy - sum(dy * y))">;
def Cleave_LogSoftmaxGradOp : Cleave_SoftmaxLikeGradOp<"log_softmax_grad",
    "log_softmax", "dx = dy - exp(y) * sum(dy)">;

def Cleave_LayerNormGradOp : Cleave_Op<"layer_norm_grad", [Pure]> {
  let summary = "gradient of `cleave.layer_norm`";
  let description = [{
    From the gradient `dy` of a layer norm's result, its input `x` and its
    optional `scale` (absent: 1), gives `dx`, and the gradients of the scale
    and the bias (`x.shape[axis:]`, summed over the leading dimensions; both
    are produced whether or not the forward op had them). Mean and variance
    are recomputed from `x`.

    ```mlir
    %dx, %dg, %db = cleave.layer_norm_grad %dy, %x scale %g {axis = 2 : i64, epsilon = 1.0e-05 : f32}
        : (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<64xf32>)
        -> (tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$dy, Cleave_FloatTensor:$x,
                       Optional<Cleave_FloatTensor>:$scale,
                       I64Attr:$axis, F32Attr:$epsilon);
  let results = (outs Cleave_FloatTensor:$dx, Cleave_FloatTensor:$dscale,
                      Cleave_FloatTensor:$dbias);
  let assemblyFormat = [{
    $dy `,` $x (`scale` $scale^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Cleave_RmsNormGradOp : Cleave_Op<"rms_norm_grad", [Pure]> {
  let summary = "gradient of `cleave.rms_norm`";
  let description = [{
    From the gradient `dy` of an RMS norm's result, its input `x` and its
    `scale`, gives `dx` and `dscale` (`x.shape[axis:]`, summed over the
    leading dimensions). The root mean square is recomputed from `x`.

    ```mlir
    %dx, %dg = cleave.rms_norm_grad %dy, %x, %g {axis = 2 : i64, epsilon = 1.0e-05 : f32}
        : (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<64xf32>)
        -> (tensor<2x8x64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$dy, Cleave_FloatTensor:$x,
                       Cleave_FloatTensor:$scale, I64Attr:$axis,
                       F32Attr:$epsilon);
  let results = (outs Cleave_FloatTensor:$dx, Cleave_FloatTensor:$dscale);
  let assemblyFormat =
      "$dy `,` $x `,` $scale attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Cleave_AttentionGradOp : Cleave_Op<"attention_grad", [Pure]> {
  let summary = "gradient of `cleave.attention`";
  let description = [{
    From the gradient `dy` of an attention's result and its operands (same
    `scale`, `causal` and optional `mask`), gives `dq`, `dk` and `dv`. The
    attention probabilities are recomputed (flash-attention style), never
    stored. With grouped-query attention `dk` and `dv` sum the gradients of
    the query heads that share each key/value head. The mask gets no
    gradient.

    ```mlir
    %dq, %dk, %dv = cleave.attention_grad %dy, %q, %k, %v {causal, scale = 0.125 : f32}
        : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>,
           tensor<2x2x8x16xf32>)
        -> (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>)
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$dy, Cleave_FloatTensor:$q,
                       Cleave_FloatTensor:$k, Cleave_FloatTensor:$v,
                       Optional<Cleave_Tensor>:$mask, F32Attr:$scale,
                       UnitAttr:$causal);
  let results = (outs Cleave_FloatTensor:$dq, Cleave_FloatTensor:$dk,
                      Cleave_FloatTensor:$dv);
  let assemblyFormat = [{
    $dy `,` $q `,` $k `,` $v (`mask` $mask^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Cleave_EmbeddingGradOp : Cleave_Op<"embedding_grad", [Pure]> {
  let summary = "gradient of `cleave.embedding`: scatter-add into the table";
  let description = [{
    `dtable[ids[i], :] += dy[i, :]` for every index `i` of `ids`, into a
    zeroed `[V, D]` table (the result type gives `V`). With `padding_idx`
    (in `[0, V)`, from the `cleave.embedding` it differentiates) that row
    stays zero, as PyTorch's embedding backward leaves it.

    ```mlir
    %dw = cleave.embedding_grad %dy, %idx
        : (tensor<2x8x64xf32>, tensor<2x8xi64>) -> tensor<256x64xf32>
    %dp = cleave.embedding_grad %dy, %idx {padding_idx = 0 : i64}
        : (tensor<2x8x64xf32>, tensor<2x8xi64>) -> tensor<256x64xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$dy, Cleave_IndexTensor:$ids,
                       OptionalAttr<I64Attr>:$padding_idx);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat =
      "$dy `,` $ids attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Cleave_GatherGradOp : Cleave_Op<"gather_grad", [Pure]> {
  let summary = "gradient of `cleave.gather`: scatter-add along one axis";
  let description = [{
    The gradient of `data` (the result type) from the gradient `dy` of a
    gather's result: every slice of `dy` is added to the slice of `data`
    its index picked (negative indices count from the end); the rest is
    zero.

    ```mlir
    %dd = cleave.gather_grad %dy, %i {axis = 1 : i64}
        : (tensor<2x3x64xf32>, tensor<3xi64>) -> tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$dy, Cleave_IndexTensor:$indices,
                       I64Attr:$axis);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat =
      "$dy `,` $indices attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Cleave_GatherElementsGradOp : Cleave_Op<"gather_elements_grad", [Pure]> {
  let summary = "gradient of `cleave.gather_elements`: scatter-add";
  let description = [{
    The gradient of `data` (the result type) from the gradient `dy` of a
    gather_elements result: each element of `dy` is added to the element of
    `data` its index picked, in the order of the indices along the axis
    (so the sum does not depend on threads); the rest is zero.

    ```mlir
    %dd = cleave.gather_elements_grad %dy, %pos {axis = 2 : i64}
        : (tensor<2x1x8x8xf32>, tensor<2x1x8x8xi64>) -> tensor<2x1x16x8xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$dy, Cleave_IndexTensor:$indices,
                       I64Attr:$axis);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat =
      "$dy `,` $indices attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Cleave_SoftmaxCrossEntropyGradOp
    : Cleave_Op<"softmax_cross_entropy_grad", [Pure]> {
  let summary = "gradient of `cleave.softmax_cross_entropy`";
  let description = [{
    From the gradient `dloss` of the loss (a scalar for `mean` and `sum`,
    `[N, d...]` for `none`), the logits `input` and the `target`, gives the
    gradient of the logits: `(softmax(input) - onehot(target)) * dloss`,
    divided by the number of counted targets for `mean`; zero for targets
    equal to `ignore_index`.

    ```mlir
    %dl = cleave.softmax_cross_entropy_grad %dloss, %logits, %t {reduction = #cleave.reduction<mean>}
        : (tensor<f32>, tensor<16x256xf32>, tensor<16xi64>) -> tensor<16x256xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$dloss, Cleave_FloatTensor:$input,
                       Cleave_IndexTensor:$target,
                       Cleave_LossReductionAttr:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat =
      "$dloss `,` $input `,` $target attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Cleave_SoftmaxCrossEntropyFusedOp
    : Cleave_Op<"softmax_cross_entropy_fused", [Pure]> {
  let summary = "`softmax_cross_entropy` and its gradient in one pass";
  let description = [{
    The loss of `cleave.softmax_cross_entropy` and the logits' gradient of
    `cleave.softmax_cross_entropy_grad` from one read of the logits (llm.c's
    fused classifier): per position one max, one sum of exponentials, the
    loss term, and `(softmax(input) - onehot(target)) * dloss` (divided by
    the number of counted targets for `mean`; zero where the target is
    `ignore_index`). `dloss` has the loss's type: the gradient the backward
    starts from, known in the forward (`cleave-fuse-loss-grad` writes this
    op so the forward keeps the gradient for the backward instead of the
    logits). `dinput` has the logits' type; a backend may write it over
    `input` (the memory plan does when the logits die here).

    ```mlir
    %loss, %dl = cleave.softmax_cross_entropy_fused %logits, %t, %seed {reduction = #cleave.reduction<mean>}
        : (tensor<16x256xf32>, tensor<16xi64>, tensor<f32>) -> (tensor<f32>, tensor<16x256xf32>)
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$input, Cleave_IndexTensor:$target,
                       Cleave_FloatTensor:$dloss,
                       Cleave_LossReductionAttr:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Cleave_FloatTensor:$loss, Cleave_FloatTensor:$dinput);
  let assemblyFormat =
      "$input `,` $target `,` $dloss attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Cleave_NllLossGradOp : Cleave_Op<"nll_loss_grad", [Pure]> {
  let summary = "gradient of `cleave.nll_loss`";
  let description = [{
    The gradient of the log-probabilities (the result type, `[N, C, d...]`):
    `-dloss` at each counted target's class, divided by the number of
    counted targets for `mean`; zero elsewhere.

    ```mlir
    %dl = cleave.nll_loss_grad %dloss, %t {reduction = #cleave.reduction<mean>}
        : (tensor<f32>, tensor<16xi64>) -> tensor<16x256xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$dloss, Cleave_IndexTensor:$target,
                       Cleave_LossReductionAttr:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat =
      "$dloss `,` $target attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Cleave_SliceGradOp : Cleave_Op<"slice_grad", [Pure]> {
  let summary = "gradient of `cleave.slice`: the slice placed in zeros";
  let description = [{
    A tensor of the slice's input type (the result type), zero except at
    the positions the slice took (same `start`, `limit`, `step`), which
    hold `dy`.

    ```mlir
    %dx = cleave.slice_grad %dy {start = array<i64: 0, 0, 64>,
                                 limit = array<i64: 2, 8, 128>,
                                 step = array<i64: 1, 1, 1>}
        : tensor<2x8x64xf32> -> tensor<2x8x192xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$dy, DenseI64ArrayAttr:$start,
                       DenseI64ArrayAttr:$limit, DenseI64ArrayAttr:$step);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "$dy attr-dict `:` type($dy) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Training state and the optimizer
//===----------------------------------------------------------------------===//

def Cleave_AccumulateGradOp : Cleave_Op<"accumulate_grad", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "adds a gradient to a parameter's gradient buffer";
  let description = [{
    Every parameter has one gradient buffer of its type, zeroed at the start
    of each step; this op adds `grad` to it. A sharded parameter
    (`cleave.param_axis`) has a buffer of one chunk, and `grad` is this
    rank's chunk of a reduce-scattered gradient. A parameter read in several
    places (a tied embedding and head), or by several microbatches,
    accumulates all of them.

    ```mlir
    cleave.accumulate_grad @"transformer.wte.weight", %dw : tensor<256x64xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$name,
                       Arg<Cleave_FloatTensor, "", [MemRead, MemWrite]>:$grad);
  let assemblyFormat = "$name `,` $grad attr-dict `:` type($grad)";
}

def Cleave_GetGradOp : Cleave_Op<"get_grad", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "reads a parameter's accumulated gradient";
  let description = [{
    The gradient buffer of a `cleave.parameter` (see `cleave.accumulate_grad`),
    read in the optimizer function.

    ```mlir
    %g = cleave.get_grad @"transformer.wte.weight" : tensor<256x64xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$name);
  let results = (outs Res<Cleave_FloatTensor, "", [MemRead]>:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def Cleave_SumSquaresOp : Cleave_Op<"sum_squares", [Pure]> {
  let summary = "sum of the squares of every element of every operand";
  let description = [{
    `sum_i sum_j x_i[j]^2`, accumulated in double precision: the square of
    the global gradient norm that `clip_grad_norm_` clips by.

    ```mlir
    %n2 = cleave.sum_squares %g0, %g1 : (tensor<256x64xf32>, tensor<64xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Variadic<Cleave_FloatTensor>:$inputs);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat =
      "$inputs attr-dict `:` functional-type(operands, results)";
}

defvar Cleave_ScheduleDoc = [{
    `step` holds the 1-based number of this optimizer step. The learning
    rate of step `s` (0-based `i = s - 1`) is `lr * (i + 1) / warmup_steps`
    while `i < warmup_steps`; then, when `decay_steps > warmup_steps`,
    `min_lr + (lr - min_lr) * (1 + cos(pi * p)) / 2` with
    `p = min(1, (i - warmup_steps) / (decay_steps - warmup_steps))`; else
    `lr`. With `sum_squares` (the global sum of squared gradients) and
    `max_norm > 0` the gradient is first multiplied by
    `min(1, max_norm / (sqrt(sum_squares) + 1e-6))`, as `clip_grad_norm_`.
    `weight_decay` applies as given; the compiler gives 0 to parameters of
    fewer than two dimensions.
}];

class Cleave_OptimizerOp<string mnemonic, string what, dag extraArguments,
                         string update, string example>
    : Cleave_Op<mnemonic, [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = what # " update of one parameter, in place";
  let description = update # Cleave_ScheduleDoc # [{

    ```mlir
    }] # example # [{
    ```
  }];
  let arguments = !con((ins FlatSymbolRefAttr:$name, Cleave_FloatTensor:$grad,
                       0DTensorOf<[I64]>:$step,
                       Optional<0DTensorOf<[F32]>>:$sum_squares,
                       F64Attr:$lr, DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
                       DefaultValuedAttr<F64Attr, "0.0">:$max_norm,
                       DefaultValuedAttr<I64Attr, "0">:$warmup_steps,
                       DefaultValuedAttr<I64Attr, "0">:$decay_steps,
                       DefaultValuedAttr<F64Attr, "0.0">:$min_lr),
                       extraArguments);
  let assemblyFormat = [{
    $name `,` $grad `,` $step (`norm` $sum_squares^ `:` type($sum_squares))?
    attr-dict `:` type($grad) `,` type($step)
  }];
  let hasVerifier = 1;
}

def Cleave_AdamWOp : Cleave_OptimizerOp<"adamw", "AdamW",
    (ins DefaultValuedAttr<F64Attr, "0.9">:$beta1,
         DefaultValuedAttr<F64Attr, "0.999">:$beta2,
         DefaultValuedAttr<F64Attr, "1.0e-8">:$eps), [{
    `torch.optim.AdamW`'s update of the parameter from its gradient `grad`,
    with two state tensors of the parameter's type (the first and second
    moments, zero at the start) that the memory plan places:
    `p *= 1 - lr * weight_decay; m = b1 m + (1 - b1) g;
    v = b2 v + (1 - b2) g^2; p -= lr / (1 - b1^s) * m / (sqrt(v) / sqrt(1 - b2^s) + eps)`.
  }], [{cleave.adamw @"h.0.attn.c_attn.weight", %g, %step norm %n2 : tensor<f32>
        {lr = 1.0e-03, beta1 = 0.9, beta2 = 0.95, weight_decay = 0.1, max_norm = 1.0}
        : tensor<64x192xf32>, tensor<i64>}]>;

def Cleave_SgdOp : Cleave_OptimizerOp<"sgd", "SGD with momentum",
    (ins DefaultValuedAttr<F64Attr, "0.0">:$momentum), [{
    `torch.optim.SGD`'s update (no dampening, not Nesterov):
    `g += weight_decay * p`; with momentum, one state tensor `b` (`b = g` at
    step 1, else `b = momentum * b + g`) and `g = b`; `p -= lr * g`.
  }], [{cleave.sgd @"fc.weight", %g, %step {lr = 0.1, momentum = 0.9}
        : tensor<64x64xf32>, tensor<i64>}]>;

//===----------------------------------------------------------------------===//
// Communication
//===----------------------------------------------------------------------===//

def Cleave_AllReduceGradsOp : Cleave_Op<"all_reduce_grads"> {
  let summary = "all-reduces a bucket of gradient buffers in place";
  let description = [{
    Data parallelism: the gradient buffers of the parameters in `params`
    (one bucket, reduced by one collective) are combined over the ranks of
    the mesh's `group` (`"data"`) with `reduce` (`mean`: the gradient of
    the mean loss over the global batch when every rank's backward starts
    from its own microbatches). Every rank then holds the same gradients
    and takes the same optimizer step.

    `group` is a mesh axis. With `members`, only the ranks whose
    coordinates on that axis are listed take part (every other coordinate
    equal to this rank's): a parameter tied across pipeline stages (GPT-2's
    embedding and output projection) sums its gradient over the pipeline
    ranks holding it, `members` being those stages' pipeline coordinates.

    ```mlir
    cleave.all_reduce_grads [@"h.0.mlp.c_fc.weight", @"h.0.mlp.c_fc.bias"]
        {group = "data", reduce = "mean"}
    cleave.all_reduce_grads [@"wte.weight"]
        {group = "pipeline", members = array<i64: 0, 3>, reduce = "sum"}
    ```
  }];
  let arguments = (ins FlatSymbolRefArrayAttr:$params, StrAttr:$group,
                       DefaultValuedStrAttr<StrAttr, "mean">:$reduce,
                       OptionalAttr<DenseI64ArrayAttr>:$members);
  let assemblyFormat = "$params attr-dict";
  let hasVerifier = 1;
}

def Cleave_AllReduceGradsStartOp : Cleave_Op<"all_reduce_grads_start"> {
  let summary = "starts the all-reduce of a bucket of gradient buffers";
  let description = [{
    The asynchronous form of `cleave.all_reduce_grads`, which lets data
    parallelism overlap the reduction with backward (PyTorch DDP's buckets):
    placed in the backward that runs for a step's last microbatch, right
    after the last `cleave.accumulate_grad` into one of the bucket's
    parameters, it starts reducing their gradient buffers in place while
    the backward goes on; the optimizer's `cleave.wait_grads` with the same
    `event` waits for it before the gradients are read.

    The gradients are buffers named by symbols, not SSA values, and the
    start and its wait are in different functions, so they are paired by
    `event` (a positive number, unique in the module) instead of an
    `!cleave.async_token`. The verifier checks the pairing over the module:
    each event is started exactly once, in a function of `cleave.kind`
    `"backward"`, and waited for exactly once, in a function of
    `cleave.kind` `"optimizer"` (which the schedule runs after every
    backward).

    ```mlir
    // In @backward_last_microbatch (cleave-overlap-gradients):
    cleave.accumulate_grad @"ln_f.weight", %dw : tensor<64xf32>
    cleave.all_reduce_grads_start [@"ln_f.bias", @"ln_f.weight"] event 1
        {group = "data", reduce = "mean"}
    // In @optimizer:
    cleave.wait_grads event 1
    ```
  }];
  let arguments = (ins FlatSymbolRefArrayAttr:$params, I64Attr:$event,
                       StrAttr:$group,
                       DefaultValuedStrAttr<StrAttr, "mean">:$reduce);
  let assemblyFormat = "$params `event` $event attr-dict";
  let hasVerifier = 1;
}

def Cleave_WaitGradsOp : Cleave_Op<"wait_grads"> {
  let summary = "waits for a started all-reduce of gradient buffers";
  let description = [{
    Blocks until the `cleave.all_reduce_grads_start` with the same `event`
    is complete: from here on the bucket's gradient buffers hold the
    reduced gradients, as after a `cleave.all_reduce_grads`. It is in the
    optimizer function; see `cleave.all_reduce_grads_start` for how the two
    are paired and checked.

    ```mlir
    cleave.wait_grads event 1
    %g = cleave.get_grad @"ln_f.bias" : tensor<64xf32>
    ```
  }];
  let arguments = (ins I64Attr:$event);
  let assemblyFormat = "`event` $event attr-dict";
  let hasVerifier = 1;
}

def Cleave_ReduceScatterGradsOp : Cleave_Op<"reduce_scatter_grads"> {
  let summary = "reduce-scatters a bucket of gradient buffers in place (ZeRO-1)";
  let description = [{
    Sharded optimizer state (ZeRO-1, spec key `shard_optimizer_state`):
    each parameter in `params` has a `cleave.state_axis` naming the mesh
    axis `group` its optimizer state is split over. Its gradient buffer,
    viewed flat and padded with zeros to `ranks * chunk` elements, is
    reduced over the group with `reduce`, each rank receiving only its own
    chunk (rank `c` on the axis: elements `[c * chunk, (c + 1) * chunk)`),
    in place; `cleave.get_grad_shard` reads it. The other chunks of the
    buffer are left as they were and are not read again this step.

    ```mlir
    cleave.reduce_scatter_grads [@"h.0.mlp.c_fc.weight", @"h.0.mlp.c_fc.bias"]
        {group = "data", reduce = "mean"}
    ```
  }];
  let arguments = (ins FlatSymbolRefArrayAttr:$params, StrAttr:$group,
                       DefaultValuedStrAttr<StrAttr, "mean">:$reduce);
  let assemblyFormat = "$params attr-dict";
  let hasVerifier = 1;
}

def Cleave_ReduceScatterGradsStartOp : Cleave_Op<"reduce_scatter_grads_start"> {
  let summary = "starts the reduce-scatter of a bucket of gradient buffers";
  let description = [{
    The asynchronous form of `cleave.reduce_scatter_grads` (ZeRO-1), placed
    by `cleave-overlap-gradients` exactly as `cleave.all_reduce_grads_start`
    is: in the backward that runs for a step's last microbatch, right after
    the bucket's gradients are complete; the optimizer's `cleave.wait_grads`
    with the same `event` waits for it before a chunk is read. Events are
    paired and checked as for `cleave.all_reduce_grads_start`.

    ```mlir
    cleave.reduce_scatter_grads_start [@"ln_f.bias", @"ln_f.weight"] event 1
        {group = "data", reduce = "mean"}
    ```
  }];
  let arguments = (ins FlatSymbolRefArrayAttr:$params, I64Attr:$event,
                       StrAttr:$group,
                       DefaultValuedStrAttr<StrAttr, "mean">:$reduce);
  let assemblyFormat = "$params `event` $event attr-dict";
  let hasVerifier = 1;
}

def Cleave_GetGradShardOp : Cleave_Op<"get_grad_shard", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "reads this rank's chunk of a reduce-scattered gradient";
  let description = [{
    For a parameter with a `cleave.state_axis` (ZeRO-1): the chunk of its
    flattened, zero-padded gradient buffer that this rank owns after
    `cleave.reduce_scatter_grads`, a 1-D tensor of `chunk` elements. The
    parameter's optimizer update then takes it as its gradient and updates
    only the same chunk of the parameter, with optimizer state of that
    size.

    ```mlir
    %g = cleave.get_grad_shard @"h.0.mlp.c_fc.weight" : tensor<4096xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$name);
  let results = (outs Res<Cleave_FloatTensor, "", [MemRead]>:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def Cleave_AllGatherParamsOp : Cleave_Op<"all_gather_params"> {
  let summary = "all-gathers the updated chunks of a bucket of parameters";
  let description = [{
    After a ZeRO-1 optimizer step each rank has updated only its chunk of
    each parameter in `params` (see `cleave.reduce_scatter_grads`); this
    gathers every rank's chunk of the flattened, padded parameter over the
    mesh axis `group`, in place, so that every rank holds the whole
    updated parameter for the next forward.

    ```mlir
    cleave.all_gather_params [@"h.0.mlp.c_fc.weight", @"h.0.mlp.c_fc.bias"]
        {group = "data"}
    ```

    A parameter with a `cleave.working_type` (ZeRO-1's sharded fp32
    masters) gathers its working copy, in that type, from the chunks
    `cleave.cast_master_chunk` wrote: in the stage's refresh function, at
    the start of each step.
  }];
  let arguments = (ins FlatSymbolRefArrayAttr:$params, StrAttr:$group);
  let assemblyFormat = "$params attr-dict";
  let hasVerifier = 1;
}

def Cleave_CastMasterChunkOp : Cleave_Op<"cast_master_chunk", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "rounds this rank's master chunk into its working copy";
  let description = [{
    ZeRO-1 under mixed precision (`cleave-shard-optimizer-state`,
    `master-copies`): a parameter with a `cleave.working_type` keeps its
    fp32 value (the master weights) only for this rank's chunk of
    `cleave.state_axis`, which the optimizer updates, and the whole
    parameter only in the working type, which the functions read. This op
    rounds the master chunk to the working type into this rank's chunk of
    the working copy (the flat, padded view); a `cleave.all_gather_params`
    over the state axis then completes the copy. Both run in the stage's
    refresh function (`cleave.kind = "refresh"`), first in each step, so
    that the copy is made from whatever the masters hold: initialized,
    loaded from a checkpoint, or updated by the last step.

    ```mlir
    func.func @refresh() attributes {cleave.kind = "refresh"} {
      cleave.cast_master_chunk @"h.0.mlp.c_fc.weight"
      cleave.all_gather_params [@"h.0.mlp.c_fc.weight"] {group = "data"}
      return
    }
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$name);
  let assemblyFormat = "$name attr-dict";
}

def Cleave_GatherParamOp : Cleave_Op<"gather_param", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "all-gathers a sharded parameter into a transient value";
  let description = [{
    Sharded data parallelism (ZeRO-3 / MiCS, spec key
    `sharded_data_parallel_degree`): a parameter with a `cleave.param_axis`
    keeps only its chunk on each rank of that mesh axis (the flat, padded
    chunks of `cleave.state_axis`, which names the same axis). This op
    all-gathers the chunks of the group into the whole parameter, of the
    parameter's type. Unlike `cleave.get_param` its result is an ordinary
    value: the memory plan gives it space (the padded size) from its
    definition to its last use, so a forward reads the gathered weights of
    one layer at a time and the backward gathers them again.

    With an `event` (`cleave-prefetch-gathers`) the op only starts the
    all-gather, placed ahead of the ops before its readers so that the
    transfer overlaps their compute, and the result may be read only after
    the `cleave.wait_param` of it; its space is taken from here on.

    With `cleave.gather_per_host = k` (`cleave-shard-parameters`,
    `processes-per-host`) the program gathers hierarchically: within the k
    ranks of this rank's host block of the group, then across hosts.

    ```mlir
    %w = cleave.gather_param @"h.0.mlp.c_fc.weight" : tensor<64x256xf32>
    %v = cleave.gather_param @"h.0.mlp.c_proj.weight" event 3 : tensor<256x64xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$name, OptionalAttr<I64Attr>:$event);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "$name (`event` $event^)? attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Cleave_WaitParamOp : Cleave_Op<"wait_param"> {
  let summary = "waits for a started gather of a sharded parameter";
  let description = [{
    Completes the all-gather that a `cleave.gather_param` with an `event`
    started: from here on `gathered` holds the whole parameter. It comes
    after that gather and before every other op that reads its result, in
    the same block, and each started gather has exactly one.

    ```mlir
    %v = cleave.gather_param @"h.0.mlp.c_proj.weight" event 3 : tensor<256x64xf32>
    %h = cleave.matmul %x, %u ...          // overlaps the gather
    cleave.wait_param %v : tensor<256x64xf32>
    %y = cleave.matmul %h, %v ...
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$gathered);
  let assemblyFormat = "$gathered attr-dict `:` type($gathered)";
  let hasVerifier = 1;
}

def Cleave_GatherNextHopOp : Cleave_Op<"gather_next_hop"> {
  let summary = "completes a started hierarchical gather's first hop and starts its second";
  let description = [{
    A started hierarchical gather (`cleave.gather_param` with an `event` and
    `cleave.gather_per_host`, SMP's `sdp_hierarchical_allgather`) with this
    op starts only its first hop there, the gather within this rank's host
    block; this op waits for that hop and starts the second, across hosts,
    which the `cleave.wait_param` completes (`cleave-prefetch-gathers`
    places the first hop one gather ahead of the second, so that both
    overlap compute). Without it both hops start at the gather. It comes
    after its gather and before the wait, in the same block, at most one a
    gather.

    ```mlir
    %v = cleave.gather_param @"h.1.mlp.c_fc.weight" event 3 {cleave.gather_per_host = 2 : i64} : tensor<64x256xf32>
    %a = cleave.matmul ...                 // overlaps the first hop
    cleave.gather_next_hop %v : tensor<64x256xf32>
    %b = cleave.matmul ...                 // overlaps the second
    cleave.wait_param %v : tensor<64x256xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$gathered);
  let assemblyFormat = "$gathered attr-dict `:` type($gathered)";
  let hasVerifier = 1;
}

def Cleave_WaitScatterOp : Cleave_Op<"wait_scatter"> {
  let summary = "waits for a started reduce-scatter of a gradient bucket";
  let description = [{
    Sharded data parallelism's gradient buckets (`cleave-bucket-scatters`,
    SMP's `sdp_reduce_bucket_size`): a `cleave.reduce_scatter` with a
    `cleave.event` attribute only starts; this op completes it. It names
    the started op's result and its input, both of which the collective
    uses until here (so both keep their space until here), comes after
    the start and before every other reader of the result, in the same
    block.

    ```mlir
    %c = cleave.reduce_scatter %flat {axes = ["data"], dim = 0 : i64, reduce = "mean", cleave.event = 1 : i64}
        : tensor<96xf32> -> tensor<48xf32>
    ...                                    // the backward goes on
    cleave.wait_scatter %c, %flat : tensor<48xf32>, tensor<96xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$scattered, Cleave_FloatTensor:$input);
  let assemblyFormat =
      "$scattered `,` $input attr-dict `:` type($scattered) `,` type($input)";
  let hasVerifier = 1;
}

def Cleave_AllReduceOp : Cleave_Op<"all_reduce", [SameOperandsAndResultType]> {
  let summary = "combines a tensor over the ranks of a mesh group";
  let description = [{
    Every rank of the mesh's `group` contributes `input`; each gets back
    the elementwise `reduce` (`sum`, `mean` or `max`) over the group.
    The optimizer of a pipeline stage sums its gradients' `sum_squares`
    over the `"pipeline"` group, so that clipping uses the norm of the
    whole model's gradient, as `clip_grad_norm_` on one device.

    ```mlir
    %total = cleave.all_reduce %n2 {group = "pipeline", reduce = "sum"} : tensor<f32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$input, StrAttr:$group,
                       DefaultValuedStrAttr<StrAttr, "sum">:$reduce);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

#endif // CLEAVE_OPS_TD
