// What --cleave-partition-tensor refuses, each naming the op and its ONNX
// node: a split propagation stopped at (here an MLP width of 6 that 4 ranks
// cannot split: the row-parallel seed is refused), and a function result
// left split.
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

cleave.parameter @up : tensor<8x8xf32>
cleave.parameter @down : tensor<8x8xf32>
func.func @forward(%x: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %up = cleave.get_param @up : tensor<8x8xf32>
  %h = cleave.matmul %x, %up {transpose_rhs} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %down = cleave.get_param @down : tensor<8x8xf32>
  %y = cleave.matmul %h, %down {transpose_rhs} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %r = cleave.add %x, %y : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  // CHECK: error: a function result is split over the tensor axis; the partition returns whole values only
  return %r, %h : tensor<2x8xf32>, tensor<2x8xf32>
}
