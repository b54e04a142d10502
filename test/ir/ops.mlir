// Round-trip of every cleave op: parse, print, parse again, print again.
// RUN: cleave-opt %s | cleave-opt | FileCheck %s

// Parameters with and without an initial value; dotted ONNX initializer
// names are ordinary symbol names.
// CHECK: cleave.parameter @wte : tensor<16x8xf32> = dense<5.000000e-01> : tensor<16x8xf32>
// CHECK: cleave.parameter @h.0.ln_1.bias : tensor<8xf32>{{$}}
cleave.parameter @"wte" : tensor<16x8xf32> = dense<0.5> : tensor<16x8xf32>
cleave.parameter @"h.0.ln_1.bias" : tensor<8xf32>

// CHECK-LABEL: func.func @parameters_and_constants
func.func @parameters_and_constants() -> (tensor<16x8xf32>, tensor<8xf32>, tensor<2xi64>, tensor<f32>) {
  // CHECK: cleave.get_param @wte : tensor<16x8xf32>
  %w = cleave.get_param @wte : tensor<16x8xf32>
  // CHECK: cleave.get_param @h.0.ln_1.bias : tensor<8xf32>
  %b = cleave.get_param @"h.0.ln_1.bias" : tensor<8xf32>
  // CHECK: cleave.constant dense<[1, 2]> : tensor<2xi64>
  %c = cleave.constant dense<[1, 2]> : tensor<2xi64>
  // CHECK: cleave.constant dense<1.250000e-01> : tensor<f32>
  %s = cleave.constant dense<0.125> : tensor<f32>
  return %w, %b, %c, %s : tensor<16x8xf32>, tensor<8xf32>, tensor<2xi64>, tensor<f32>
}

// CHECK-LABEL: func.func @arithmetic
func.func @arithmetic(%a: tensor<2x8x64xf32>, %b: tensor<64xf32>, %s: tensor<f32>,
                      %p: tensor<4x1xi1>, %q: tensor<3xi1>) {
  // CHECK: cleave.add %{{.*}}, %{{.*}} : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  %0 = cleave.add %a, %b : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  // CHECK: cleave.sub %{{.*}}, %{{.*}} : (tensor<64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  %1 = cleave.sub %b, %a : (tensor<64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  // CHECK: cleave.mul %{{.*}}, %{{.*}} : (tensor<2x8x64xf32>, tensor<f32>) -> tensor<2x8x64xf32>
  %2 = cleave.mul %a, %s : (tensor<2x8x64xf32>, tensor<f32>) -> tensor<2x8x64xf32>
  // CHECK: cleave.div %{{.*}}, %{{.*}} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %3 = cleave.div %s, %s : (tensor<f32>, tensor<f32>) -> tensor<f32>
  // CHECK: cleave.pow %{{.*}}, %{{.*}} : (tensor<2x8x64xf32>, tensor<f32>) -> tensor<2x8x64xf32>
  %4 = cleave.pow %a, %s : (tensor<2x8x64xf32>, tensor<f32>) -> tensor<2x8x64xf32>
  // CHECK: cleave.max %{{.*}}, %{{.*}} : (tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  %5 = cleave.max %a, %a : (tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  // CHECK: cleave.min %{{.*}}, %{{.*}} : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  %6 = cleave.min %b, %b : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  // Both operands stretch: 4x1 and 3 give 4x3.
  // CHECK: cleave.and %{{.*}}, %{{.*}} : (tensor<4x1xi1>, tensor<3xi1>) -> tensor<4x3xi1>
  %7 = cleave.and %p, %q : (tensor<4x1xi1>, tensor<3xi1>) -> tensor<4x3xi1>
  // CHECK: cleave.or %{{.*}}, %{{.*}} : (tensor<3xi1>, tensor<4x1xi1>) -> tensor<4x3xi1>
  %8 = cleave.or %q, %p : (tensor<3xi1>, tensor<4x1xi1>) -> tensor<4x3xi1>
  return
}

// CHECK-LABEL: func.func @comparisons
func.func @comparisons(%a: tensor<8x1xi64>, %b: tensor<8xi64>, %x: tensor<2x8xf32>, %y: tensor<f32>) {
  // CHECK: cleave.equal %{{.*}}, %{{.*}} : (tensor<8x1xi64>, tensor<8xi64>) -> tensor<8x8xi1>
  %0 = cleave.equal %a, %b : (tensor<8x1xi64>, tensor<8xi64>) -> tensor<8x8xi1>
  // CHECK: cleave.less %{{.*}}, %{{.*}} : (tensor<8xi64>, tensor<8x1xi64>) -> tensor<8x8xi1>
  %1 = cleave.less %b, %a : (tensor<8xi64>, tensor<8x1xi64>) -> tensor<8x8xi1>
  // CHECK: cleave.less_equal %{{.*}}, %{{.*}} : (tensor<8x1xi64>, tensor<8xi64>) -> tensor<8x8xi1>
  %2 = cleave.less_equal %a, %b : (tensor<8x1xi64>, tensor<8xi64>) -> tensor<8x8xi1>
  // CHECK: cleave.greater %{{.*}}, %{{.*}} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xi1>
  %3 = cleave.greater %x, %y : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xi1>
  // CHECK: cleave.greater_equal %{{.*}}, %{{.*}} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xi1>
  %4 = cleave.greater_equal %x, %x : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xi1>
  return
}

// The causal-mask pattern: condition, values and fill all broadcast.
// CHECK-LABEL: func.func @select
func.func @select(%mask: tensor<1x1x8x8xi1>, %scores: tensor<2x4x8x8xf32>, %fill: tensor<f32>,
                  %c: tensor<i1>, %row: tensor<8xf32>, %col: tensor<4x1xf32>) {
  // CHECK: cleave.select %{{.*}}, %{{.*}}, %{{.*}} : (tensor<1x1x8x8xi1>, tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  %0 = cleave.select %mask, %scores, %fill
      : (tensor<1x1x8x8xi1>, tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  // CHECK: cleave.select %{{.*}}, %{{.*}}, %{{.*}} : (tensor<i1>, tensor<8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %1 = cleave.select %c, %row, %col : (tensor<i1>, tensor<8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return
}

// CHECK-LABEL: func.func @unary
func.func @unary(%x: tensor<2x8xf32>, %i: tensor<4xi64>, %m: tensor<8x8xi1>, %h: tensor<3xf16>) {
  // CHECK: cleave.neg %{{.*}} : tensor<4xi64>
  %0 = cleave.neg %i : tensor<4xi64>
  // CHECK: cleave.abs %{{.*}} : tensor<4xi64>
  %1 = cleave.abs %i : tensor<4xi64>
  // CHECK: cleave.relu %{{.*}} : tensor<2x8xf32>
  %2 = cleave.relu %x : tensor<2x8xf32>
  // CHECK: cleave.not %{{.*}} : tensor<8x8xi1>
  %3 = cleave.not %m : tensor<8x8xi1>
  // CHECK: cleave.exp %{{.*}} : tensor<2x8xf32>
  %4 = cleave.exp %x : tensor<2x8xf32>
  // CHECK: cleave.log %{{.*}} : tensor<2x8xf32>
  %5 = cleave.log %x : tensor<2x8xf32>
  // CHECK: cleave.sqrt %{{.*}} : tensor<2x8xf32>
  %6 = cleave.sqrt %x : tensor<2x8xf32>
  // CHECK: cleave.rsqrt %{{.*}} : tensor<2x8xf32>
  %7 = cleave.rsqrt %x : tensor<2x8xf32>
  // CHECK: cleave.reciprocal %{{.*}} : tensor<2x8xf32>
  %8 = cleave.reciprocal %x : tensor<2x8xf32>
  // CHECK: cleave.tanh %{{.*}} : tensor<2x8xf32>
  %9 = cleave.tanh %x : tensor<2x8xf32>
  // CHECK: cleave.erf %{{.*}} : tensor<2x8xf32>
  %10 = cleave.erf %x : tensor<2x8xf32>
  // CHECK: cleave.sigmoid %{{.*}} : tensor<2x8xf32>
  %11 = cleave.sigmoid %x : tensor<2x8xf32>
  // CHECK: cleave.silu %{{.*}} : tensor<2x8xf32>
  %12 = cleave.silu %x : tensor<2x8xf32>
  // CHECK: cleave.sin %{{.*}} : tensor<3xf16>
  %13 = cleave.sin %h : tensor<3xf16>
  // CHECK: cleave.cos %{{.*}} : tensor<3xf16>
  %14 = cleave.cos %h : tensor<3xf16>
  return
}

// The default (exact) approximation is not printed.
// CHECK-LABEL: func.func @gelu
func.func @gelu(%x: tensor<2x8x256xf32>) {
  // CHECK: cleave.gelu %{{.*}} : tensor<2x8x256xf32>
  %0 = cleave.gelu %x : tensor<2x8x256xf32>
  // CHECK: cleave.gelu %{{.*}} : tensor<2x8x256xf32>
  %1 = cleave.gelu %x {approximate = "none"} : tensor<2x8x256xf32>
  // CHECK: cleave.gelu %{{.*}} {approximate = "tanh"} : tensor<2x8x256xf32>
  %2 = cleave.gelu %x {approximate = "tanh"} : tensor<2x8x256xf32>
  return
}

// A dropout, and a rank's slice of one (its heads split over "tensor").
// CHECK-LABEL: func.func @dropout
func.func @dropout(%x: tensor<2x8x64xf32>, %p: tensor<2x2x8x8xf32>) {
  // CHECK: cleave.dropout %{{.*}} {ratio = 1.000000e-01 : f64, stream = "/drop/Dropout"} : tensor<2x8x64xf32>
  %0 = cleave.dropout %x {ratio = 0.1 : f64, stream = "/drop/Dropout"} : tensor<2x8x64xf32>
  // CHECK: cleave.dropout %{{.*}} {full_shape = array<i64: 2, 4, 8, 8>, ratio = 1.000000e-01 : f64, split = #cleave.sharding<[{}, {"tensor"}, {}, {}]>, stream = "/attn/Dropout"} : tensor<2x2x8x8xf32>
  %1 = cleave.dropout %p {ratio = 0.1 : f64, stream = "/attn/Dropout", full_shape = array<i64: 2, 4, 8, 8>, split = #cleave.sharding<[{}, {"tensor"}, {}, {}]>} : tensor<2x2x8x8xf32>
  return
}

// CHECK-LABEL: func.func @cast
func.func @cast(%m: tensor<8x8xi1>, %x: tensor<4xf32>) {
  // CHECK: cleave.cast %{{.*}} : tensor<8x8xi1> -> tensor<8x8xf32>
  %0 = cleave.cast %m : tensor<8x8xi1> -> tensor<8x8xf32>
  // CHECK: cleave.cast %{{.*}} : tensor<4xf32> -> tensor<4xi64>
  %1 = cleave.cast %x : tensor<4xf32> -> tensor<4xi64>
  return
}

// CHECK-LABEL: func.func @matmul
func.func @matmul(%x: tensor<2x8x64xf32>, %w: tensor<64x192xf32>, %a: tensor<8x16xf16>,
                  %b: tensor<16x4xf16>, %q: tensor<2x1x8x16xf32>, %k: tensor<4x16x8xf32>) {
  // CHECK: cleave.matmul %{{.*}}, %{{.*}} : (tensor<2x8x64xf32>, tensor<64x192xf32>) -> tensor<2x8x192xf32>
  %0 = cleave.matmul %x, %w : (tensor<2x8x64xf32>, tensor<64x192xf32>) -> tensor<2x8x192xf32>
  // CHECK: cleave.matmul %{{.*}}, %{{.*}} : (tensor<8x16xf16>, tensor<16x4xf16>) -> tensor<8x4xf16>
  %1 = cleave.matmul %a, %b : (tensor<8x16xf16>, tensor<16x4xf16>) -> tensor<8x4xf16>
  // Batch dimensions 2x1 and 4 broadcast to 2x4.
  // CHECK: cleave.matmul %{{.*}}, %{{.*}} : (tensor<2x1x8x16xf32>, tensor<4x16x8xf32>) -> tensor<2x4x8x8xf32>
  %2 = cleave.matmul %q, %k : (tensor<2x1x8x16xf32>, tensor<4x16x8xf32>) -> tensor<2x4x8x8xf32>
  return
}

// keepdims defaults to true and is then not printed.
// CHECK-LABEL: func.func @reductions
func.func @reductions(%x: tensor<2x8x64xf32>, %i: tensor<4x6xi64>) {
  // CHECK: cleave.reduce_sum %{{.*}} {axes = array<i64: 2>} : tensor<2x8x64xf32> -> tensor<2x8x1xf32>
  %0 = cleave.reduce_sum %x {axes = array<i64: 2>} : tensor<2x8x64xf32> -> tensor<2x8x1xf32>
  // CHECK: cleave.reduce_mean %{{.*}} {axes = array<i64: 2>} : tensor<2x8x64xf32> -> tensor<2x8x1xf32>
  %1 = cleave.reduce_mean %x {axes = array<i64: 2>, keepdims = true} : tensor<2x8x64xf32> -> tensor<2x8x1xf32>
  // CHECK: cleave.reduce_max %{{.*}} {axes = array<i64: 0, 2>, keepdims = false} : tensor<2x8x64xf32> -> tensor<8xf32>
  %2 = cleave.reduce_max %x {axes = array<i64: 0, 2>, keepdims = false} : tensor<2x8x64xf32> -> tensor<8xf32>
  // CHECK: cleave.reduce_min %{{.*}} {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x6xi64> -> tensor<i64>
  %3 = cleave.reduce_min %i {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x6xi64> -> tensor<i64>
  // No axes: nothing is reduced.
  // CHECK: cleave.reduce_sum %{{.*}} {axes = array<i64>} : tensor<4x6xi64> -> tensor<4x6xi64>
  %4 = cleave.reduce_sum %i {axes = array<i64>} : tensor<4x6xi64> -> tensor<4x6xi64>
  return
}

// CHECK-LABEL: func.func @softmax
func.func @softmax(%s: tensor<2x4x8x8xf32>) {
  // CHECK: cleave.softmax %{{.*}} {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %0 = cleave.softmax %s {axis = 3 : i64} : tensor<2x4x8x8xf32>
  // CHECK: cleave.log_softmax %{{.*}} {axis = 0 : i64} : tensor<2x4x8x8xf32>
  %1 = cleave.log_softmax %s {axis = 0 : i64} : tensor<2x4x8x8xf32>
  return
}

// CHECK-LABEL: func.func @cumsum
func.func @cumsum(%m: tensor<2x8xi64>, %x: tensor<4x3xf32>) {
  // CHECK: cleave.cumsum %{{.*}} {axis = 1 : i64} : tensor<2x8xi64>
  %0 = cleave.cumsum %m {axis = 1 : i64} : tensor<2x8xi64>
  // CHECK: cleave.cumsum %{{.*}} {axis = 0 : i64, exclusive = true, reverse = true} : tensor<4x3xf32>
  %1 = cleave.cumsum %x {axis = 0 : i64, exclusive = true, reverse = true} : tensor<4x3xf32>
  return
}

// CHECK-LABEL: func.func @indexing
func.func @indexing(%x: tensor<3x4xf32>, %i: tensor<2x4xi64>, %t: tensor<2x1xi64>,
                    %u: tensor<2x4xf32>) {
  // CHECK: cleave.gather_elements %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<3x4xf32>, tensor<2x4xi64>) -> tensor<2x4xf32>
  %0 = cleave.gather_elements %x, %i {axis = 0 : i64} : (tensor<3x4xf32>, tensor<2x4xi64>) -> tensor<2x4xf32>
  // CHECK: cleave.gather_elements_grad %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<2x4xf32>, tensor<2x4xi64>) -> tensor<3x4xf32>
  %1 = cleave.gather_elements_grad %0, %i {axis = 0 : i64} : (tensor<2x4xf32>, tensor<2x4xi64>) -> tensor<3x4xf32>
  // CHECK: cleave.scatter_nd %{{.*}}, %{{.*}}, %{{.*}} {reduction = "add"} : (tensor<3x4xf32>, tensor<2x1xi64>, tensor<2x4xf32>) -> tensor<3x4xf32>
  %2 = cleave.scatter_nd %x, %t, %u {reduction = "add"} : (tensor<3x4xf32>, tensor<2x1xi64>, tensor<2x4xf32>) -> tensor<3x4xf32>
  // CHECK: cleave.gather_nd %{{.*}}, %{{.*}} : (tensor<3x4xf32>, tensor<2x1xi64>) -> tensor<2x4xf32>
  %3 = cleave.gather_nd %x, %t : (tensor<3x4xf32>, tensor<2x1xi64>) -> tensor<2x4xf32>
  return
}

// CHECK-LABEL: func.func @norms
func.func @norms(%x: tensor<2x8x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>,
                 %g2: tensor<8x64xf32>) {
  // CHECK: cleave.layer_norm %{{[^,]*}} {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  %0 = cleave.layer_norm %x {axis = 2 : i64, epsilon = 1.0e-05 : f32}
      : (tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  // CHECK: cleave.layer_norm %{{[^ ]*}} scale %{{[^ ]*}} {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  %1 = cleave.layer_norm %x scale %g {axis = 2 : i64, epsilon = 1.0e-05 : f32}
      : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  // CHECK: cleave.layer_norm %{{.*}} scale %{{.*}} bias %{{.*}} {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  %2 = cleave.layer_norm %x scale %g bias %b {axis = 2 : i64, epsilon = 1.0e-05 : f32}
      : (tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  // Normalizing over the last two dimensions.
  // CHECK: cleave.layer_norm %{{[^ ]*}} scale %{{[^ ]*}} {axis = 1 : i64, epsilon = 1.000000e-03 : f32} : (tensor<2x8x64xf32>, tensor<8x64xf32>) -> tensor<2x8x64xf32>
  %3 = cleave.layer_norm %x scale %g2 {axis = 1 : i64, epsilon = 1.0e-03 : f32}
      : (tensor<2x8x64xf32>, tensor<8x64xf32>) -> tensor<2x8x64xf32>
  // CHECK: cleave.rms_norm %{{.*}}, %{{.*}} {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  %4 = cleave.rms_norm %x, %g {axis = 2 : i64, epsilon = 1.0e-05 : f32}
      : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  return
}

// CHECK-LABEL: func.func @attention
func.func @attention(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>,
                     %kv: tensor<2x2x10x16xf32>, %keep: tensor<1x1x8x8xi1>, %bias: tensor<2x1x1x10xf32>) {
  // CHECK: cleave.attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 2.500000e-01 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %0 = cleave.attention %q, %k, %v {scale = 0.25 : f32}
      : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  // CHECK: cleave.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 2.500000e-01 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %1 = cleave.attention %q, %k, %v {causal, scale = 0.25 : f32}
      : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  // A boolean mask broadcast over batch and heads, with causal.
  // CHECK: cleave.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} {causal, scale = 2.500000e-01 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<1x1x8x8xi1>) -> tensor<2x4x8x16xf32>
  %2 = cleave.attention %q, %k, %v mask %keep {causal, scale = 0.25 : f32}
      : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<1x1x8x8xi1>)
      -> tensor<2x4x8x16xf32>
  // Grouped-query attention (4 query heads over 2 key/value heads), a
  // longer key sequence, and an additive float mask.
  // CHECK: cleave.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} {scale = 2.500000e-01 : f32} : (tensor<2x4x8x16xf32>, tensor<2x2x10x16xf32>, tensor<2x2x10x16xf32>, tensor<2x1x1x10xf32>) -> tensor<2x4x8x16xf32>
  %3 = cleave.attention %q, %kv, %kv mask %bias {scale = 0.25 : f32}
      : (tensor<2x4x8x16xf32>, tensor<2x2x10x16xf32>, tensor<2x2x10x16xf32>, tensor<2x1x1x10xf32>)
      -> tensor<2x4x8x16xf32>
  return
}

// CHECK-LABEL: func.func @lookups
func.func @lookups(%wte: tensor<256x64xf32>, %idx: tensor<2x8xi64>, %pos: tensor<8xi32>,
                   %x: tensor<2x8x64xf32>, %i: tensor<3xi64>, %j: tensor<i64>) {
  // CHECK: cleave.embedding %{{.*}}, %{{.*}} : (tensor<256x64xf32>, tensor<2x8xi64>) -> tensor<2x8x64xf32>
  %0 = cleave.embedding %wte, %idx : (tensor<256x64xf32>, tensor<2x8xi64>) -> tensor<2x8x64xf32>
  // CHECK: cleave.embedding %{{.*}}, %{{.*}} : (tensor<256x64xf32>, tensor<8xi32>) -> tensor<8x64xf32>
  %1 = cleave.embedding %wte, %pos : (tensor<256x64xf32>, tensor<8xi32>) -> tensor<8x64xf32>
  // nn.Embedding's padding_idx, on the lookup and on its gradient.
  // CHECK: cleave.embedding %{{.*}}, %{{.*}} {padding_idx = 255 : i64} : (tensor<256x64xf32>, tensor<2x8xi64>) -> tensor<2x8x64xf32>
  %p = cleave.embedding %wte, %idx {padding_idx = 255 : i64} : (tensor<256x64xf32>, tensor<2x8xi64>) -> tensor<2x8x64xf32>
  // CHECK: cleave.embedding_grad %{{.*}}, %{{.*}} {padding_idx = 0 : i64} : (tensor<2x8x64xf32>, tensor<2x8xi64>) -> tensor<256x64xf32>
  %dp = cleave.embedding_grad %p, %idx {padding_idx = 0 : i64} : (tensor<2x8x64xf32>, tensor<2x8xi64>) -> tensor<256x64xf32>
  // CHECK: cleave.gather %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<2x8x64xf32>, tensor<3xi64>) -> tensor<2x3x64xf32>
  %2 = cleave.gather %x, %i {axis = 1 : i64} : (tensor<2x8x64xf32>, tensor<3xi64>) -> tensor<2x3x64xf32>
  // A scalar index drops the dimension.
  // CHECK: cleave.gather %{{.*}}, %{{.*}} {axis = 2 : i64} : (tensor<2x8x64xf32>, tensor<i64>) -> tensor<2x8xf32>
  %3 = cleave.gather %x, %j {axis = 2 : i64} : (tensor<2x8x64xf32>, tensor<i64>) -> tensor<2x8xf32>
  return
}

// CHECK-LABEL: func.func @losses
func.func @losses(%logits: tensor<16x256xf32>, %t: tensor<16xi64>,
                  %seq: tensor<2x256x8xf32>, %ts: tensor<2x8xi32>) {
  // CHECK: cleave.softmax_cross_entropy %{{.*}}, %{{.*}} {reduction = #cleave.reduction<mean>} : (tensor<16x256xf32>, tensor<16xi64>) -> tensor<f32>
  %0 = cleave.softmax_cross_entropy %logits, %t {reduction = #cleave.reduction<mean>}
      : (tensor<16x256xf32>, tensor<16xi64>) -> tensor<f32>
  // CHECK: cleave.softmax_cross_entropy %{{.*}}, %{{.*}} {reduction = #cleave.reduction<sum>} : (tensor<16x256xf32>, tensor<16xi64>) -> tensor<f32>
  %1 = cleave.softmax_cross_entropy %logits, %t {reduction = #cleave.reduction<sum>}
      : (tensor<16x256xf32>, tensor<16xi64>) -> tensor<f32>
  // CHECK: cleave.softmax_cross_entropy %{{.*}}, %{{.*}} {reduction = #cleave.reduction<none>} : (tensor<16x256xf32>, tensor<16xi64>) -> tensor<16xf32>
  %2 = cleave.softmax_cross_entropy %logits, %t {reduction = #cleave.reduction<none>}
      : (tensor<16x256xf32>, tensor<16xi64>) -> tensor<16xf32>
  // Extra dimensions d... and ignore_index.
  // CHECK: cleave.softmax_cross_entropy %{{.*}}, %{{.*}} {ignore_index = -100 : i64, reduction = #cleave.reduction<none>} : (tensor<2x256x8xf32>, tensor<2x8xi32>) -> tensor<2x8xf32>
  %3 = cleave.softmax_cross_entropy %seq, %ts {ignore_index = -100 : i64, reduction = #cleave.reduction<none>}
      : (tensor<2x256x8xf32>, tensor<2x8xi32>) -> tensor<2x8xf32>
  // CHECK: cleave.nll_loss %{{.*}}, %{{.*}} {reduction = #cleave.reduction<mean>} : (tensor<16x256xf32>, tensor<16xi64>) -> tensor<f32>
  %4 = cleave.nll_loss %logits, %t {reduction = #cleave.reduction<mean>}
      : (tensor<16x256xf32>, tensor<16xi64>) -> tensor<f32>
  // The loss and its gradient in one op (cleave-fuse-loss-grad).
  // CHECK: %{{.*}}, %{{.*}} = cleave.softmax_cross_entropy_fused %{{.*}}, %{{.*}}, %{{.*}} {ignore_index = -100 : i64, reduction = #cleave.reduction<mean>} : (tensor<16x256xf32>, tensor<16xi64>, tensor<f32>) -> (tensor<f32>, tensor<16x256xf32>)
  %seed = cleave.constant dense<0.5> : tensor<f32>
  %fl, %fd = cleave.softmax_cross_entropy_fused %logits, %t, %seed {ignore_index = -100 : i64, reduction = #cleave.reduction<mean>}
      : (tensor<16x256xf32>, tensor<16xi64>, tensor<f32>) -> (tensor<f32>, tensor<16x256xf32>)
  // CHECK: cleave.nll_loss %{{.*}}, %{{.*}} {ignore_index = 0 : i64, reduction = #cleave.reduction<none>} : (tensor<2x256x8xf32>, tensor<2x8xi32>) -> tensor<2x8xf32>
  %5 = cleave.nll_loss %seq, %ts {reduction = #cleave.reduction<none>, ignore_index = 0 : i64}
      : (tensor<2x256x8xf32>, tensor<2x8xi32>) -> tensor<2x8xf32>
  return
}

// CHECK-LABEL: func.func @reshape_transpose_broadcast
func.func @reshape_transpose_broadcast(%x: tensor<2x8x64xf32>, %r: tensor<1x8xf32>, %s: tensor<f32>) {
  // CHECK: cleave.reshape %{{.*}} : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
  %0 = cleave.reshape %x : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
  // CHECK: cleave.transpose %{{.*}} {perm = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %1 = cleave.transpose %0 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  // CHECK: cleave.reshape %{{.*}} : tensor<f32> -> tensor<1x1xf32>
  %2 = cleave.reshape %s : tensor<f32> -> tensor<1x1xf32>
  // CHECK: cleave.broadcast_to %{{.*}} : tensor<1x8xf32> -> tensor<4x8xf32>
  %3 = cleave.broadcast_to %r : tensor<1x8xf32> -> tensor<4x8xf32>
  // CHECK: cleave.broadcast_to %{{.*}} : tensor<1x8xf32> -> tensor<3x4x8xf32>
  %4 = cleave.broadcast_to %r : tensor<1x8xf32> -> tensor<3x4x8xf32>
  // CHECK: cleave.broadcast_to %{{.*}} : tensor<f32> -> tensor<2x3xf32>
  %5 = cleave.broadcast_to %s : tensor<f32> -> tensor<2x3xf32>
  return
}

// CHECK-LABEL: func.func @slice
func.func @slice(%qkv: tensor<2x8x192xf32>, %x: tensor<10xf32>) {
  // CHECK: cleave.slice %{{.*}} {limit = array<i64: 2, 8, 128>, start = array<i64: 0, 0, 64>, step = array<i64: 1, 1, 1>} : tensor<2x8x192xf32> -> tensor<2x8x64xf32>
  %0 = cleave.slice %qkv {start = array<i64: 0, 0, 64>, limit = array<i64: 2, 8, 128>,
                          step = array<i64: 1, 1, 1>} : tensor<2x8x192xf32> -> tensor<2x8x64xf32>
  // Every third element: 1, 4, 7.
  // CHECK: cleave.slice %{{.*}} {limit = array<i64: 9>, start = array<i64: 1>, step = array<i64: 3>} : tensor<10xf32> -> tensor<3xf32>
  %1 = cleave.slice %x {start = array<i64: 1>, limit = array<i64: 9>, step = array<i64: 3>}
      : tensor<10xf32> -> tensor<3xf32>
  // Reversed, down to and including element 0 (limit -1).
  // CHECK: cleave.slice %{{.*}} {limit = array<i64: -1>, start = array<i64: 9>, step = array<i64: -1>} : tensor<10xf32> -> tensor<10xf32>
  %2 = cleave.slice %x {start = array<i64: 9>, limit = array<i64: -1>, step = array<i64: -1>}
      : tensor<10xf32> -> tensor<10xf32>
  // Elements 8, 6, 4.
  // CHECK: cleave.slice %{{.*}} {limit = array<i64: 3>, start = array<i64: 8>, step = array<i64: -2>} : tensor<10xf32> -> tensor<3xf32>
  %3 = cleave.slice %x {start = array<i64: 8>, limit = array<i64: 3>, step = array<i64: -2>}
      : tensor<10xf32> -> tensor<3xf32>
  // An empty slice.
  // CHECK: cleave.slice %{{.*}} {limit = array<i64: 4>, start = array<i64: 4>, step = array<i64: 1>} : tensor<10xf32> -> tensor<0xf32>
  %4 = cleave.slice %x {start = array<i64: 4>, limit = array<i64: 4>, step = array<i64: 1>}
      : tensor<10xf32> -> tensor<0xf32>
  return
}

// CHECK-LABEL: func.func @concat
func.func @concat(%a: tensor<2x3xf32>, %b: tensor<2x5xf32>, %c: tensor<2x1xf32>, %d: tensor<4x3xf32>) {
  // CHECK: cleave.concat %{{.*}}, %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>, tensor<2x1xf32>) -> tensor<2x9xf32>
  %0 = cleave.concat %a, %b, %c {axis = 1 : i64}
      : (tensor<2x3xf32>, tensor<2x5xf32>, tensor<2x1xf32>) -> tensor<2x9xf32>
  // CHECK: cleave.concat %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<6x3xf32>
  %1 = cleave.concat %a, %d {axis = 0 : i64} : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<6x3xf32>
  // CHECK: cleave.concat %{{.*}} {axis = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = cleave.concat %a {axis = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// CHECK-LABEL: func.func @rotary
// CHECK: cleave.rotary %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x4x8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8x16xf32>
func.func @rotary(%x: tensor<2x4x8x16xf32>, %c: tensor<8x16xf32>, %s: tensor<8x16xf32>) -> tensor<2x4x8x16xf32> {
  %0 = cleave.rotary %x, %c, %s : (tensor<2x4x8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8x16xf32>
  return %0 : tensor<2x4x8x16xf32>
}
