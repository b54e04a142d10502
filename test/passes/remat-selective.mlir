// Tests of --cleave-remat=strategy=selective: an unfused attention core
// (the scores' product, its scale and the softmax) is recomputed in the
// backward from the saved queries and keys; its probabilities, the
// [batch, heads, seq, seq] tensor, are no longer saved. A fused
// cleave.attention needs nothing: its backward recomputes them already.
// RUN: cleave-opt %s --cleave-autodiff --cleave-fuse-loss-grad --cleave-remat=strategy=selective | FileCheck %s --check-prefix=SELECTIVE

cleave.parameter @wq : tensor<8x8xf32>
func.func @forward(%x: tensor<2x4x8xf32>, %t: tensor<2x4xi64>) -> (tensor<f32> {cleave.onnx_name = "loss"}) {
    %wq = cleave.get_param @wq : tensor<8x8xf32> loc("wq")
    %q = cleave.matmul %x, %wq : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("/attn/q/MatMul")
    %s = cleave.matmul %q, %q {transpose_rhs} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x4xf32> loc("/attn/MatMul")
    %c = cleave.constant dense<0.5> : tensor<f32> loc("/attn/scale")
    %m = cleave.mul %s, %c : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32> loc("/attn/Mul")
    %p = cleave.softmax %m {axis = 2 : i64} : tensor<2x4x4xf32> loc("/attn/Softmax")
    %o = cleave.matmul %p, %q : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> loc("/attn/MatMul_1")
    %l2 = cleave.reshape %o : tensor<2x4x8xf32> -> tensor<8x8xf32> loc("/flat")
    %t2 = cleave.reshape %t : tensor<2x4xi64> -> tensor<8xi64> loc("/flat_t")
    %loss = cleave.softmax_cross_entropy %l2, %t2 {reduction = #cleave.reduction<mean>} : (tensor<8x8xf32>, tensor<8xi64>) -> tensor<f32> loc("/loss")
    return %loss : tensor<f32>
}
// The attention core (scores' product, scale, softmax) is recomputed from
// the saved queries for the softmax's gradient; its probabilities are no
// longer saved.
// SELECTIVE-LABEL: func.func @forward(
// SELECTIVE: return %loss, %dinput, %1, %3, %arg0 :
// SELECTIVE-LABEL: func.func @forward_backward(
// SELECTIVE: %[[S:.*]] = cleave.matmul %arg1, %arg1 {cleave.recompute, transpose_rhs}
// SELECTIVE-NEXT: %[[M:.*]] = cleave.mul %[[S]], %arg2 {cleave.recompute}
// SELECTIVE-NEXT: %[[P:.*]] = cleave.softmax %[[M]] {axis = 2 : i64, cleave.recompute}
// SELECTIVE: cleave.softmax_grad %[[P]], %{{.*}}
