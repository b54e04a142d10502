// Tests of --cleave-fuse: the chains torch.onnx.export writes for SiLU,
// GELU (tanh and exact), RMSNorm and LayerNorm become one op each; a
// chain with any other constant is left alone.
// RUN: cleave-opt %s --cleave-fuse | FileCheck %s

cleave.parameter @w : tensor<64xf32>
cleave.parameter @b : tensor<64xf32>
cleave.parameter @w32 : tensor<32xf32>

// CHECK-LABEL: func.func @silu
// CHECK-NEXT: %[[Y:.*]] = cleave.silu %arg0 : tensor<2x8x64xf32>
// CHECK-NEXT: return %[[Y]]
func.func @silu(%x: tensor<2x8x64xf32>) -> tensor<2x8x64xf32> {
  %s = cleave.sigmoid %x : tensor<2x8x64xf32>
  %y = cleave.mul %s, %x : (tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  return %y : tensor<2x8x64xf32>
}

// GPT-2's export of tanh GELU.
// CHECK-LABEL: func.func @gelu_tanh
// CHECK-NEXT: %[[Y:.*]] = cleave.gelu %arg0 {approximate = "tanh"} : tensor<2x8x256xf32>
// CHECK-NEXT: return %[[Y]]
func.func @gelu_tanh(%x: tensor<2x8x256xf32>) -> tensor<2x8x256xf32> {
  %0 = cleave.mul %x, %x : (tensor<2x8x256xf32>, tensor<2x8x256xf32>) -> tensor<2x8x256xf32>
  %1 = cleave.mul %x, %0 : (tensor<2x8x256xf32>, tensor<2x8x256xf32>) -> tensor<2x8x256xf32>
  %c0 = cleave.constant dense<4.471500e-02> : tensor<f32>
  %2 = cleave.mul %c0, %1 : (tensor<f32>, tensor<2x8x256xf32>) -> tensor<2x8x256xf32>
  %3 = cleave.add %x, %2 : (tensor<2x8x256xf32>, tensor<2x8x256xf32>) -> tensor<2x8x256xf32>
  %c1 = cleave.constant dense<0.797884583> : tensor<f32>
  %4 = cleave.mul %c1, %3 : (tensor<f32>, tensor<2x8x256xf32>) -> tensor<2x8x256xf32>
  %5 = cleave.tanh %4 : tensor<2x8x256xf32>
  %one = cleave.constant dense<1.000000e+00> : tensor<f32>
  %6 = cleave.add %one, %5 : (tensor<f32>, tensor<2x8x256xf32>) -> tensor<2x8x256xf32>
  %7 = cleave.mul %x, %6 : (tensor<2x8x256xf32>, tensor<2x8x256xf32>) -> tensor<2x8x256xf32>
  %half = cleave.constant dense<5.000000e-01> : tensor<f32>
  %8 = cleave.mul %half, %7 : (tensor<f32>, tensor<2x8x256xf32>) -> tensor<2x8x256xf32>
  return %8 : tensor<2x8x256xf32>
}

// nn.GELU()'s export: x * 0.5 * (1 + erf(x / sqrt(2))).
// CHECK-LABEL: func.func @gelu_exact
// CHECK-NEXT: %[[Y:.*]] = cleave.gelu %arg0 : tensor<4x32xf32>
// CHECK-NEXT: return %[[Y]]
func.func @gelu_exact(%x: tensor<4x32xf32>) -> tensor<4x32xf32> {
  %s2 = cleave.constant dense<1.41421354> : tensor<f32>
  %0 = cleave.div %x, %s2 : (tensor<4x32xf32>, tensor<f32>) -> tensor<4x32xf32>
  %1 = cleave.erf %0 : tensor<4x32xf32>
  %one = cleave.constant dense<1.000000e+00> : tensor<f32>
  %2 = cleave.add %1, %one : (tensor<4x32xf32>, tensor<f32>) -> tensor<4x32xf32>
  %3 = cleave.mul %x, %2 : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %half = cleave.constant dense<5.000000e-01> : tensor<f32>
  %4 = cleave.mul %3, %half : (tensor<4x32xf32>, tensor<f32>) -> tensor<4x32xf32>
  return %4 : tensor<4x32xf32>
}

// A Llama RMSNorm: x * (1 / sqrt(mean(x^2) + eps)) * w.
// CHECK-LABEL: func.func @rms_norm
// CHECK-NEXT: %[[W:.*]] = cleave.get_param @w
// CHECK-NEXT: %[[Y:.*]] = cleave.rms_norm %arg0, %[[W]] {axis = 2 : i64, epsilon = 9.99999974E-6 : f32}
// CHECK-NEXT: return %[[Y]]
func.func @rms_norm(%x: tensor<2x8x64xf32>) -> tensor<2x8x64xf32> {
  %two = cleave.constant dense<2.000000e+00> : tensor<f32>
  %0 = cleave.pow %x, %two : (tensor<2x8x64xf32>, tensor<f32>) -> tensor<2x8x64xf32>
  %1 = cleave.reduce_mean %0 {axes = array<i64: 2>} : tensor<2x8x64xf32> -> tensor<2x8x1xf32>
  %eps = cleave.constant dense<9.99999974E-6> : tensor<f32>
  %2 = cleave.add %1, %eps : (tensor<2x8x1xf32>, tensor<f32>) -> tensor<2x8x1xf32>
  %3 = cleave.sqrt %2 : tensor<2x8x1xf32>
  %one = cleave.constant dense<1.000000e+00> : tensor<f32>
  %4 = cleave.div %one, %3 : (tensor<f32>, tensor<2x8x1xf32>) -> tensor<2x8x1xf32>
  %5 = cleave.mul %x, %4 : (tensor<2x8x64xf32>, tensor<2x8x1xf32>) -> tensor<2x8x64xf32>
  %w = cleave.get_param @w : tensor<64xf32>
  %6 = cleave.mul %5, %w : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  return %6 : tensor<2x8x64xf32>
}

// The weight first, as a hand-written RMSNorm module exports it:
// (w * x) * rsqrt(mean(x * x) + eps).
// CHECK-LABEL: func.func @rms_norm_weight_first
// CHECK: cleave.rms_norm %arg0, %{{.*}} {axis = 2 : i64, epsilon = 9.99999997E-7 : f32}
// CHECK-NOT: cleave.rsqrt
func.func @rms_norm_weight_first(%x: tensor<2x8x64xf32>) -> tensor<2x8x64xf32> {
  %0 = cleave.mul %x, %x : (tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  %1 = cleave.reduce_mean %0 {axes = array<i64: 2>} : tensor<2x8x64xf32> -> tensor<2x8x1xf32>
  %eps = cleave.constant dense<9.99999997E-7> : tensor<f32>
  %2 = cleave.add %1, %eps : (tensor<2x8x1xf32>, tensor<f32>) -> tensor<2x8x1xf32>
  %3 = cleave.rsqrt %2 : tensor<2x8x1xf32>
  %w = cleave.get_param @w : tensor<64xf32>
  %4 = cleave.mul %w, %x : (tensor<64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  %5 = cleave.mul %4, %3 : (tensor<2x8x64xf32>, tensor<2x8x1xf32>) -> tensor<2x8x64xf32>
  return %5 : tensor<2x8x64xf32>
}

// torch.onnx.export's LayerNorm before opset 17: (x - mean(x)) /
// sqrt(mean((x - mean(x))^2) + eps), then * w and + b (the bias first, as
// an outside module may write it).
// CHECK-LABEL: func.func @layer_norm
// CHECK-DAG: %[[W:.*]] = cleave.get_param @w
// CHECK-DAG: %[[B:.*]] = cleave.get_param @b
// CHECK: %[[Y:.*]] = cleave.layer_norm %arg0 scale %[[W]] bias %[[B]] {axis = 2 : i64, epsilon = 9.99999974E-6 : f32}
// CHECK-NEXT: return %[[Y]]
func.func @layer_norm(%x: tensor<2x8x64xf32>) -> tensor<2x8x64xf32> {
  %0 = cleave.reduce_mean %x {axes = array<i64: 2>} : tensor<2x8x64xf32> -> tensor<2x8x1xf32>
  %1 = cleave.sub %x, %0 : (tensor<2x8x64xf32>, tensor<2x8x1xf32>) -> tensor<2x8x64xf32>
  %two = cleave.constant dense<2.000000e+00> : tensor<f32>
  %2 = cleave.pow %1, %two : (tensor<2x8x64xf32>, tensor<f32>) -> tensor<2x8x64xf32>
  %3 = cleave.reduce_mean %2 {axes = array<i64: 2>} : tensor<2x8x64xf32> -> tensor<2x8x1xf32>
  %eps = cleave.constant dense<9.99999974E-6> : tensor<f32>
  %4 = cleave.add %3, %eps : (tensor<2x8x1xf32>, tensor<f32>) -> tensor<2x8x1xf32>
  %5 = cleave.sqrt %4 : tensor<2x8x1xf32>
  %6 = cleave.div %1, %5 : (tensor<2x8x64xf32>, tensor<2x8x1xf32>) -> tensor<2x8x64xf32>
  %w = cleave.get_param @w : tensor<64xf32>
  %7 = cleave.mul %6, %w : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  %b = cleave.get_param @b : tensor<64xf32>
  %8 = cleave.add %b, %7 : (tensor<64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  return %8 : tensor<2x8x64xf32>
}

// Without the affine part (elementwise_affine=False), the square as a
// product: a bare layer_norm.
// CHECK-LABEL: func.func @layer_norm_plain
// CHECK-NEXT: %[[Y:.*]] = cleave.layer_norm %arg0 {axis = 1 : i64, epsilon = 9.99999997E-7 : f32}
// CHECK-NEXT: return %[[Y]]
func.func @layer_norm_plain(%x: tensor<4x32xf32>) -> tensor<4x32xf32> {
  %0 = cleave.reduce_mean %x {axes = array<i64: 1>} : tensor<4x32xf32> -> tensor<4x1xf32>
  %1 = cleave.sub %x, %0 : (tensor<4x32xf32>, tensor<4x1xf32>) -> tensor<4x32xf32>
  %2 = cleave.mul %1, %1 : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %3 = cleave.reduce_mean %2 {axes = array<i64: 1>} : tensor<4x32xf32> -> tensor<4x1xf32>
  %eps = cleave.constant dense<9.99999997E-7> : tensor<f32>
  %4 = cleave.add %eps, %3 : (tensor<f32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  %5 = cleave.sqrt %4 : tensor<4x1xf32>
  %6 = cleave.div %1, %5 : (tensor<4x32xf32>, tensor<4x1xf32>) -> tensor<4x32xf32>
  return %6 : tensor<4x32xf32>
}

// Not LayerNorm: the variance squares x, not x - mean(x). A norm whose
// output is also returned keeps its scale as a separate product, and a
// per-position (not per-feature) factor is not a scale.
// CHECK-LABEL: func.func @layer_norm_left_alone
// CHECK-NOT: cleave.layer_norm %arg0
// CHECK: %[[N:.*]] = cleave.layer_norm %arg1 {axis = 1 : i64
// CHECK: cleave.mul %[[N]], %arg2
// CHECK: %[[M:.*]] = cleave.layer_norm %arg1 {axis = 1 : i64
// CHECK: cleave.mul %[[M]], %{{.*}} : (tensor<4x32xf32>, tensor<32xf32>)
func.func @layer_norm_left_alone(%x: tensor<4x32xf32>, %y: tensor<4x32xf32>, %p: tensor<4x1xf32>) -> (tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x32xf32>) {
  %eps = cleave.constant dense<9.99999997E-7> : tensor<f32>
  %0 = cleave.reduce_mean %x {axes = array<i64: 1>} : tensor<4x32xf32> -> tensor<4x1xf32>
  %1 = cleave.sub %x, %0 : (tensor<4x32xf32>, tensor<4x1xf32>) -> tensor<4x32xf32>
  %2 = cleave.mul %x, %x : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %3 = cleave.reduce_mean %2 {axes = array<i64: 1>} : tensor<4x32xf32> -> tensor<4x1xf32>
  %4 = cleave.add %3, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %5 = cleave.sqrt %4 : tensor<4x1xf32>
  %6 = cleave.div %1, %5 : (tensor<4x32xf32>, tensor<4x1xf32>) -> tensor<4x32xf32>
  %10 = cleave.reduce_mean %y {axes = array<i64: 1>} : tensor<4x32xf32> -> tensor<4x1xf32>
  %11 = cleave.sub %y, %10 : (tensor<4x32xf32>, tensor<4x1xf32>) -> tensor<4x32xf32>
  %12 = cleave.mul %11, %11 : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %13 = cleave.reduce_mean %12 {axes = array<i64: 1>} : tensor<4x32xf32> -> tensor<4x1xf32>
  %14 = cleave.add %13, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %15 = cleave.sqrt %14 : tensor<4x1xf32>
  %16 = cleave.div %11, %15 : (tensor<4x32xf32>, tensor<4x1xf32>) -> tensor<4x32xf32>
  %17 = cleave.mul %16, %p : (tensor<4x32xf32>, tensor<4x1xf32>) -> tensor<4x32xf32>
  %20 = cleave.reduce_mean %y {axes = array<i64: 1>} : tensor<4x32xf32> -> tensor<4x1xf32>
  %21 = cleave.sub %y, %20 : (tensor<4x32xf32>, tensor<4x1xf32>) -> tensor<4x32xf32>
  %22 = cleave.mul %21, %21 : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %23 = cleave.reduce_mean %22 {axes = array<i64: 1>} : tensor<4x32xf32> -> tensor<4x1xf32>
  %24 = cleave.add %23, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %25 = cleave.sqrt %24 : tensor<4x1xf32>
  %26 = cleave.div %21, %25 : (tensor<4x32xf32>, tensor<4x1xf32>) -> tensor<4x32xf32>
  %w = cleave.get_param @w32 : tensor<32xf32>
  %27 = cleave.mul %26, %w : (tensor<4x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
  return %6, %17, %26, %27 : tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x32xf32>
}

// Not GELU: 0.6 instead of 0.5. Not RMSNorm: the mean is over axis 1.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: cleave.gelu
// CHECK-NOT: cleave.rms_norm
// CHECK: return
func.func @left_alone(%x: tensor<4x32xf32>, %y: tensor<2x8x64xf32>) -> (tensor<4x32xf32>, tensor<2x8x64xf32>) {
  %s2 = cleave.constant dense<1.41421354> : tensor<f32>
  %0 = cleave.div %x, %s2 : (tensor<4x32xf32>, tensor<f32>) -> tensor<4x32xf32>
  %1 = cleave.erf %0 : tensor<4x32xf32>
  %one = cleave.constant dense<1.000000e+00> : tensor<f32>
  %2 = cleave.add %1, %one : (tensor<4x32xf32>, tensor<f32>) -> tensor<4x32xf32>
  %3 = cleave.mul %x, %2 : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %c = cleave.constant dense<6.000000e-01> : tensor<f32>
  %4 = cleave.mul %3, %c : (tensor<4x32xf32>, tensor<f32>) -> tensor<4x32xf32>
  %two = cleave.constant dense<2.000000e+00> : tensor<f32>
  %5 = cleave.pow %y, %two : (tensor<2x8x64xf32>, tensor<f32>) -> tensor<2x8x64xf32>
  %6 = cleave.reduce_mean %5 {axes = array<i64: 1>} : tensor<2x8x64xf32> -> tensor<2x1x64xf32>
  %eps = cleave.constant dense<9.99999974E-6> : tensor<f32>
  %7 = cleave.add %6, %eps : (tensor<2x1x64xf32>, tensor<f32>) -> tensor<2x1x64xf32>
  %8 = cleave.rsqrt %7 : tensor<2x1x64xf32>
  %9 = cleave.mul %y, %8 : (tensor<2x8x64xf32>, tensor<2x1x64xf32>) -> tensor<2x8x64xf32>
  %w = cleave.get_param @w : tensor<64xf32>
  %10 = cleave.mul %9, %w : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  return %4, %10 : tensor<4x32xf32>, tensor<2x8x64xf32>
}

// GPT-2's attention: k goes from [B, T, H, D] to [B, H, D, T] in one
// transpose; the causal mask is a constant used by select(mask, -inf, s).
// CHECK-LABEL: func.func @attention_causal
// CHECK: %[[K:.*]] = cleave.transpose %arg1 {perm = array<i64: 0, 2, 1, 3>} : tensor<1x4x2x8xf32> -> tensor<1x2x4x8xf32>
// CHECK: %[[O:.*]] = cleave.attention %arg0, %[[K]], %arg2 {causal, scale = 2.500000e-01 : f32}
// CHECK-NOT: cleave.softmax
// CHECK: return %[[O]]
func.func @attention_causal(%q: tensor<1x2x4x8xf32>, %kx: tensor<1x4x2x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %kt = cleave.transpose %kx {perm = array<i64: 0, 2, 3, 1>} : tensor<1x4x2x8xf32> -> tensor<1x2x8x4xf32>
  %s = cleave.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %c = cleave.constant dense<2.500000e-01> : tensor<f32>
  %s1 = cleave.mul %s, %c : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %mask = cleave.constant dense<[[false, true, true, true], [false, false, true, true], [false, false, false, true], [false, false, false, false]]> : tensor<4x4xi1>
  %ninf = cleave.constant dense<0xFF800000> : tensor<f32>
  %s2 = cleave.select %mask, %ninf, %s1 : (tensor<4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = cleave.softmax %s2 {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = cleave.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// An additive mask that is not causal stays a mask; a divisor is a scale.
// CHECK-LABEL: func.func @attention_additive
// CHECK: cleave.attention %arg0, %arg1, %arg2 mask %arg3 {scale = 5.000000e-01 : f32}
func.func @attention_additive(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>, %m: tensor<4x4xf32>) -> tensor<1x2x4x8xf32> {
  %kt = cleave.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<1x2x4x8xf32> -> tensor<1x2x8x4xf32>
  %s = cleave.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %c = cleave.constant dense<2.000000e+00> : tensor<f32>
  %s1 = cleave.div %s, %c : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %s2 = cleave.add %s1, %m : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = cleave.softmax %s2 {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = cleave.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// A float mask read from a parameter: trained, it stays add + softmax
// (cleave.attention has no gradient for its mask); frozen (a buffer the
// export made an initializer), it becomes the attention's mask.
cleave.parameter @bias : tensor<4x4xf32>
cleave.parameter @frozen_mask {cleave.frozen} : tensor<4x4xf32>
// CHECK-LABEL: func.func @attention_trained_mask
// CHECK-NOT: cleave.attention
// CHECK: cleave.softmax
func.func @attention_trained_mask(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %kt = cleave.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<1x2x4x8xf32> -> tensor<1x2x8x4xf32>
  %s = cleave.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %m = cleave.get_param @bias : tensor<4x4xf32>
  %s2 = cleave.add %s, %m : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = cleave.softmax %s2 {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = cleave.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}
// CHECK-LABEL: func.func @attention_frozen_mask
// CHECK: %[[M:.*]] = cleave.get_param @frozen_mask
// CHECK: cleave.attention %arg0, %arg1, %arg2 mask %[[M]] {scale = 1.000000e+00 : f32}
func.func @attention_frozen_mask(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %kt = cleave.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<1x2x4x8xf32> -> tensor<1x2x8x4xf32>
  %s = cleave.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %m = cleave.get_param @frozen_mask : tensor<4x4xf32>
  %s2 = cleave.add %s, %m : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = cleave.softmax %s2 {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = cleave.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// The probabilities are returned too: nothing to fuse.
// CHECK-LABEL: func.func @attention_probs_used
// CHECK-NOT: cleave.attention
// CHECK: cleave.softmax
func.func @attention_probs_used(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>) {
  %kt = cleave.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<1x2x4x8xf32> -> tensor<1x2x8x4xf32>
  %s = cleave.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %p = cleave.softmax %s {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = cleave.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o, %p : tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>
}

// Llama's rotary embedding: x * cos + concat(-x[..., 8:], x[..., :8]) * sin.
// CHECK-LABEL: func.func @rotary
// CHECK-NEXT: %[[Y:.*]] = cleave.rotary %arg0, %arg1, %arg2 : (tensor<1x4x32x16xf32>, tensor<32x16xf32>, tensor<32x16xf32>) -> tensor<1x4x32x16xf32>
// CHECK-NEXT: return %[[Y]]
func.func @rotary(%x: tensor<1x4x32x16xf32>, %cos: tensor<32x16xf32>, %sin: tensor<32x16xf32>) -> tensor<1x4x32x16xf32> {
  %0 = cleave.mul %x, %cos : (tensor<1x4x32x16xf32>, tensor<32x16xf32>) -> tensor<1x4x32x16xf32>
  %1 = cleave.slice %x {limit = array<i64: 1, 4, 32, 16>, start = array<i64: 0, 0, 0, 8>, step = array<i64: 1, 1, 1, 1>} : tensor<1x4x32x16xf32> -> tensor<1x4x32x8xf32>
  %2 = cleave.neg %1 : tensor<1x4x32x8xf32>
  %3 = cleave.slice %x {limit = array<i64: 1, 4, 32, 8>, start = array<i64: 0, 0, 0, 0>, step = array<i64: 1, 1, 1, 1>} : tensor<1x4x32x16xf32> -> tensor<1x4x32x8xf32>
  %4 = cleave.concat %2, %3 {axis = 3 : i64} : (tensor<1x4x32x8xf32>, tensor<1x4x32x8xf32>) -> tensor<1x4x32x16xf32>
  %5 = cleave.mul %4, %sin : (tensor<1x4x32x16xf32>, tensor<32x16xf32>) -> tensor<1x4x32x16xf32>
  %6 = cleave.add %0, %5 : (tensor<1x4x32x16xf32>, tensor<1x4x32x16xf32>) -> tensor<1x4x32x16xf32>
  return %6 : tensor<1x4x32x16xf32>
}

// The halves swapped the other way round is not rotate_half: left alone.
// CHECK-LABEL: func.func @not_rotary
// CHECK-NOT: cleave.rotary
// CHECK: return
func.func @not_rotary(%x: tensor<1x4x32x16xf32>, %cos: tensor<32x16xf32>, %sin: tensor<32x16xf32>) -> tensor<1x4x32x16xf32> {
  %0 = cleave.mul %x, %cos : (tensor<1x4x32x16xf32>, tensor<32x16xf32>) -> tensor<1x4x32x16xf32>
  %1 = cleave.slice %x {limit = array<i64: 1, 4, 32, 8>, start = array<i64: 0, 0, 0, 0>, step = array<i64: 1, 1, 1, 1>} : tensor<1x4x32x16xf32> -> tensor<1x4x32x8xf32>
  %2 = cleave.neg %1 : tensor<1x4x32x8xf32>
  %3 = cleave.slice %x {limit = array<i64: 1, 4, 32, 16>, start = array<i64: 0, 0, 0, 8>, step = array<i64: 1, 1, 1, 1>} : tensor<1x4x32x16xf32> -> tensor<1x4x32x8xf32>
  %4 = cleave.concat %2, %3 {axis = 3 : i64} : (tensor<1x4x32x8xf32>, tensor<1x4x32x8xf32>) -> tensor<1x4x32x16xf32>
  %5 = cleave.mul %4, %sin : (tensor<1x4x32x16xf32>, tensor<32x16xf32>) -> tensor<1x4x32x16xf32>
  %6 = cleave.add %0, %5 : (tensor<1x4x32x16xf32>, tensor<1x4x32x16xf32>) -> tensor<1x4x32x16xf32>
  return %6 : tensor<1x4x32x16xf32>
}
