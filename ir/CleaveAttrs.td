//===- CleaveAttrs.td - cleave dialect attributes ----------*- tablegen -*-===//
//
// Attributes of the cleave dialect: the loss reduction, and the words of
// distribution (docs/distribution-ir.md): the device mesh, the sharding of
// a value over it, and the memory space a value lives in.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_ATTRS_TD
#define CLEAVE_ATTRS_TD

include "ir/CleaveDialect.td"
include "mlir/IR/EnumAttr.td"

def Cleave_LossReductionEnum : I32EnumAttr<"LossReduction",
    "how a loss is reduced over its samples", [
      I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"sum", 1>,
      I32EnumAttrCase<"mean", 2>]> {
  let cppNamespace = "::mlir::cleave";
  let genSpecializedAttr = 0;
}

def Cleave_LossReductionAttr
    : EnumAttr<Cleave_Dialect, Cleave_LossReductionEnum, "reduction"> {
  let assemblyFormat = "`<` $value `>`";
}

//===----------------------------------------------------------------------===//
// Distribution
//===----------------------------------------------------------------------===//

def Cleave_MeshAttr : AttrDef<Cleave_Dialect, "Mesh"> {
  let mnemonic = "mesh";
  let summary = "the device mesh: named axes with their sizes";
  let description = [{
    The ranks of a job seen as an n-dimensional array whose axes are named
    by the kind of parallelism that spans them, declared once on the
    top-level module as `cleave.mesh`. The product of the sizes is the
    world size; the first axis is the slowest-varying in the rank number.
    Communicator groups are sets of these axes, never strings: a collective
    over `["data"]` runs among the ranks that differ only in their `data`
    coordinate.

    Conventional names (ir/AttrNames.h): `data` (replicas),
    `sharded_data` (the group model states are sharded over, ZeRO/MiCS),
    `pipeline` (stages) and `tensor` (tensor parallelism). Sizes of 1 are
    allowed and kept, so a value's sharding can name an axis whatever the
    layout.

    ```mlir
    module attributes {cleave.mesh = #cleave.mesh<["data"=2, "pipeline"=4, "tensor"=1]>} {}
    ```
  }];
  let parameters = (ins
      ArrayRefParameter<"::mlir::StringAttr", "axis names">:$axisNames,
      ArrayRefParameter<"int64_t", "axis sizes">:$axisSizes);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The size of `axis`, or std::nullopt when the mesh has no such axis.
    std::optional<int64_t> getAxisSize(::llvm::StringRef axis) const;
    /// The number of ranks: the product of the axis sizes.
    int64_t getNumRanks() const;
    /// The coordinate of `rank` on `axis` (0 for an axis the mesh lacks).
    int64_t getCoordinate(int64_t rank, ::llvm::StringRef axis) const;
    /// The rank whose coordinate on `axis` is `coordinate` and whose other
    /// coordinates are those of `rank`.
    int64_t withCoordinate(int64_t rank, ::llvm::StringRef axis,
                           int64_t coordinate) const;
  }];
}

def Cleave_ShardingAttr : AttrDef<Cleave_Dialect, "Sharding"> {
  let mnemonic = "sharding";
  let summary = "how a value is split over the mesh and what it is a partial sum of";
  let description = [{
    One entry per dimension of the value: the mesh axes that split it,
    major to minor (`{"sharded_data", "tensor"}` splits a dimension over
    both, the `tensor` coordinate varying fastest); `{}` keeps the
    dimension whole. An axis may be named in part, as openxla/shardy's
    sub-axes: the axis seen as factors, major to minor, `"tensor":(2)4`
    is the factor of size 4 after factors of product 2 (its pre-size): on
    an axis of 16 ranks, coordinate `c` has sub-axis coordinate
    `(c / 2) % 4`, in general `(c / (size_of_axis / (pre * size))) %
    size`; the value is replicated over the rest of the axis: with 4 query heads, 2 key/value
    heads and `tensor` = 4, the key/value projection is split over
    `"tensor":(1)2`, each key/value head held by the two ranks whose query
    heads read it. A dimension may be written `3 blocks {"tensor"}`: it is
    3 equal blocks, each split over the axes, and a rank holds its slice
    of every block (a fused QKV weight `[3 * D, D]` split by heads holds
    its rows of q, of k and of v). `partial` lists the axes over which the value is an
    unreduced partial sum: the full value is the sum of the ranks' values
    along those axes (a row-parallel product before its all-reduce, a
    gradient before the data-parallel reduction). An axis is used at most
    once in a sharding; a value is replicated along every axis it does not
    name. Each split dimension must be divisible by the product of its
    axes' sizes: checked where the sharding meets a type and a mesh
    (`cleave.sharding` on a parameter, a function argument or result, or an
    op with one result).

    (TableGen ends this text at a closing brace followed by a square
    bracket, hence the blank before the `]` below; the parser does not
    mind it.)

    ```mlir
    cleave.parameter @"h.0.mlp.c_proj.weight"
        {cleave.sharding = #cleave.sharding<[{"tensor"}, {} ]>} : tensor<256x64xf32>
    cleave.parameter @"h.0.attn.c_attn.weight"
        {cleave.sharding = #cleave.sharding<[3 blocks {"tensor"}, {} ]>} : tensor<192x64xf32>
    cleave.parameter @"layers.0.attention.wk.weight"
        {cleave.sharding = #cleave.sharding<[{"tensor":(1)2}, {} ]>} : tensor<32x64xf32>
    %y = cleave.matmul %x, %w {cleave.sharding = #cleave.sharding<[{}, {}, {} ], partial = ["tensor"]>}
        : (tensor<2x8x64xf32>, tensor<64x64xf32>) -> tensor<2x8x64xf32>
    ```
  }];
  let parameters = (ins
      ArrayRefParameter<"::mlir::ArrayAttr", "axes per dimension">:$dims,
      ArrayRefParameter<"::mlir::StringAttr", "partial-sum axes">:$partial,
      OptionalArrayRefParameter<"int64_t",
          "blocks per dimension (empty: none blocked)">:$blocks);
  let builders = [
    AttrBuilder<(ins "::llvm::ArrayRef<::mlir::ArrayAttr>":$dims,
                     "::llvm::ArrayRef<::mlir::StringAttr>":$partial), [{
      return $_get($_ctxt, dims, partial, ::llvm::ArrayRef<int64_t>());
    }]>
  ];
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The axes splitting dimension `dim`, major to minor (a sub-axis by
    /// its axis's name).
    ::llvm::SmallVector<::llvm::StringRef> getDimAxes(unsigned dim) const;
    /// The axes splitting dimension `dim`, sub-axes with their pre-size
    /// and size (a whole axis has size 0: the mesh's).
    ::llvm::SmallVector<::mlir::cleave::AxisRef> getDimAxisRefs(unsigned dim) const;
    /// The number of equal blocks dimension `dim` is split in (1: none).
    int64_t getDimBlocks(unsigned dim) const;
    /// The element of a dimension's axis list for `ref`.
    static ::mlir::Attribute getAxisRefAttr(::mlir::MLIRContext *ctx,
                                            const ::mlir::cleave::AxisRef &ref);
    /// Whether any dimension is split or the value is partial.
    bool isReplicated() const;
  }];
}

def Cleave_MemorySpaceEnum : I32EnumAttr<"MemorySpace",
    "where a value lives", [
      I32EnumAttrCase<"device", 0>, I32EnumAttrCase<"host", 1>]> {
  let cppNamespace = "::mlir::cleave";
  let genSpecializedAttr = 0;
}

def Cleave_MemorySpaceAttr
    : EnumAttr<Cleave_Dialect, Cleave_MemorySpaceEnum, "memory_space"> {
  let summary = "the memory a value lives in: the accelerator's or the host's";
  let description = [{
    Values live in `device` memory unless they carry
    `cleave.memory_space = #cleave.memory_space<host>`: activation offload
    keeps checkpoints in a host arena and copies them back before their
    backward; the memory plan sizes one arena per space.

    ```mlir
    %saved = cleave.exp %x {cleave.memory_space = #cleave.memory_space<host>} : tensor<2x8xf32>
    ```
  }];
  let assemblyFormat = "`<` $value `>`";
}

#endif // CLEAVE_ATTRS_TD
