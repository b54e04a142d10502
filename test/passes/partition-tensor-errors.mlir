// What --cleave-partition-tensor refuses, each naming the op and its ONNX
// node: a split propagation stopped at because the degree does not divide
// a width (an MLP width of 6 that 4 ranks cannot split: the row-parallel
// seed is refused), and a split it does not gather where an op needs the
// value whole (partition-tensor-gathers.mlir has the ones it gathers).
// RUN: not cleave-opt %s --split-input-file --cleave-propagate-shardings=tensor=4 --cleave-partition-tensor 2>&1 | FileCheck %s

cleave.parameter @up : tensor<6x8xf32>
cleave.parameter @down : tensor<8x6xf32>
func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %up = cleave.get_param @up : tensor<6x8xf32>
  %h = cleave.matmul %x, %up {transpose_rhs} : (tensor<2x8xf32>, tensor<6x8xf32>) -> tensor<2x6xf32>
  %a = cleave.gelu %h {approximate = "tanh"} : tensor<2x6xf32>
  %down = cleave.get_param @down : tensor<8x6xf32>
  // CHECK: remark: loc("mlp/down"): tensor-parallel split stops at cleave.matmul 'mlp/down': row-parallel split refused
  // CHECK: error: loc("mlp/down"): cleave.matmul (ONNX node 'mlp/down'): the tensor-parallel split stops here (row-parallel split refused: its dimension of 6 is not divisible by tensor=4; the weight is replicated); spec key 'tensor_parallel_degree' must divide the model's attention heads and MLP width: give a smaller power of two, or 1
  %y = cleave.matmul %a, %down {transpose_rhs} : (tensor<2x6xf32>, tensor<8x6xf32>) -> tensor<2x8xf32> loc("mlp/down")
  %r = cleave.add %x, %y : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %r : tensor<2x8xf32>
}

// -----

// A softmax over the rows of a weight split in 3 blocks (as a fused QKV
// weight is): the partition gathers only a dimension split over the whole
// axis in one block, so it refuses, naming the op.
module attributes {cleave.mesh = #cleave.mesh<["tensor"=4]>} {
  cleave.parameter @qkv {cleave.sharding = #cleave.sharding<[3 blocks {"tensor"}, {} ]>} : tensor<24x8xf32>
  func.func @forward(%x: tensor<2x8xf32>) -> tensor<24x8xf32> {
    %w = cleave.get_param @qkv : tensor<24x8xf32>
    // CHECK: error: loc("odd/softmax"): cleave.softmax (ONNX node 'odd/softmax'): the tensor-parallel split stops here (operand 0 is gathered: dimension 0 must stay whole in {{.*}}) and the partition does not gather what the op needs whole: it gathers a value split along one dimension over the whole tensor axis only; a smaller 'tensor_parallel_degree' or 1 avoids it
    %s = cleave.softmax %w {axis = 0 : i64} : tensor<24x8xf32> loc("odd/softmax")
    return %s : tensor<24x8xf32>
  }
}
