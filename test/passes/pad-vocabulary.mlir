// --cleave-pad-vocabulary: a vocabulary the tensor degree does not divide
// gets zero rows up to the next multiple (the type), keeps its shape in
// cleave.unpadded_shape (the value's), and the logits its head makes carry
// the padded classes to the loss, which sees them as -inf.
// RUN: cleave-opt %s --split-input-file --verify-diagnostics --cleave-pad-vocabulary=tensor=4 | FileCheck %s

// A tied table (GPT-2): embedding of the input ids and head; the logits
// reach the loss through a reshape and a slice that keeps the classes.
module {
  // CHECK: cleave.parameter @wte {cleave.unpadded_shape = array<i64: 7, 4>} : tensor<8x4xf32> = dense<1.000000e+00> : tensor<7x4xf32>
  // expected-remark @+1 {{vocabulary 'wte' of 7 rows padded to 8 for tensor=4 (1 zero rows, masked before the loss)}}
  cleave.parameter @wte : tensor<7x4xf32> = dense<1.0> : tensor<7x4xf32>
  // CHECK-LABEL: func.func @tied
  func.func @tied(%ids: tensor<2x3xi64>, %t: tensor<4xi64>) -> tensor<f32> {
    // CHECK: %[[W:.*]] = cleave.get_param @wte : tensor<8x4xf32>
    %w = cleave.get_param @wte : tensor<7x4xf32>
    // CHECK: cleave.embedding %[[W]], %{{.*}} : (tensor<8x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
    %x = cleave.embedding %w, %ids : (tensor<7x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
    %w2 = cleave.get_param @wte : tensor<7x4xf32>
    // CHECK: cleave.matmul {{.*}} -> tensor<2x3x8xf32>
    %l = cleave.matmul %x, %w2 {transpose_rhs} : (tensor<2x3x4xf32>, tensor<7x4xf32>) -> tensor<2x3x7xf32>
    // CHECK: cleave.slice {{.*}}limit = array<i64: 2, 2, 8>{{.*}} -> tensor<2x2x8xf32>
    %s = cleave.slice %l {start = array<i64: 0, 0, 0>, limit = array<i64: 2, 2, 7>, step = array<i64: 1, 1, 1>} : tensor<2x3x7xf32> -> tensor<2x2x7xf32>
    // CHECK: %[[R:.*]] = cleave.reshape {{.*}} -> tensor<4x8xf32>
    %r = cleave.reshape %s : tensor<2x2x7xf32> -> tensor<4x7xf32>
    // CHECK: %[[M:.*]] = cleave.constant dense<[0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00, 0xFF800000]> : tensor<8xf32>
    // CHECK: %[[A:.*]] = cleave.add %[[R]], %[[M]] : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    // CHECK: cleave.softmax_cross_entropy %[[A]]
    %loss = cleave.softmax_cross_entropy %r, %t {reduction = #cleave.reduction<mean>} : (tensor<4x7xf32>, tensor<4xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// An untied head ([vocab, d], read transposed) is padded alike; a
// divisible table is left alone.
module {
  // CHECK: cleave.parameter @head {cleave.unpadded_shape = array<i64: 6, 4>} : tensor<8x4xf32>
  // expected-remark @+1 {{vocabulary 'head' of 6 rows padded to 8}}
  cleave.parameter @head : tensor<6x4xf32>
  // CHECK: cleave.parameter @tok : tensor<8x4xf32>
  cleave.parameter @tok : tensor<8x4xf32>
  func.func @untied(%ids: tensor<4xi64>, %t: tensor<4xi64>) -> tensor<f32> {
    %e = cleave.get_param @tok : tensor<8x4xf32>
    %x = cleave.embedding %e, %ids : (tensor<8x4xf32>, tensor<4xi64>) -> tensor<4x4xf32>
    %w = cleave.get_param @head : tensor<6x4xf32>
    %l = cleave.matmul %x, %w {transpose_rhs} : (tensor<4x4xf32>, tensor<6x4xf32>) -> tensor<4x6xf32>
    %loss = cleave.softmax_cross_entropy %l, %t {reduction = #cleave.reduction<mean>} : (tensor<4x6xf32>, tensor<4xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// An untied head with a bias over the classes (nn.Linear's, added before
// the loss): the bias is padded with the table, its value the real
// classes; the padded classes' logits are 0 + 0, masked before the loss.
module {
  // CHECK: cleave.parameter @head.weight {cleave.unpadded_shape = array<i64: 6, 4>} : tensor<8x4xf32>
  // expected-remark @+1 {{vocabulary 'head.weight' of 6 rows padded to 8 for tensor=4 (2 zero rows, masked before the loss), with its bias}}
  cleave.parameter @head.weight : tensor<6x4xf32>
  // CHECK: cleave.parameter @head.bias {cleave.unpadded_shape = array<i64: 6>} : tensor<8xf32> = dense<5.000000e-01> : tensor<6xf32>
  cleave.parameter @head.bias : tensor<6xf32> = dense<0.5> : tensor<6xf32>
  // CHECK-LABEL: func.func @biased
  func.func @biased(%x: tensor<2x2x4xf32>, %t: tensor<4xi64>) -> tensor<f32> {
    %w = cleave.get_param @head.weight : tensor<6x4xf32>
    // CHECK: cleave.matmul {{.*}} -> tensor<2x2x8xf32>
    %l = cleave.matmul %x, %w {transpose_rhs} : (tensor<2x2x4xf32>, tensor<6x4xf32>) -> tensor<2x2x6xf32>
    // CHECK: %[[B:.*]] = cleave.get_param @head.bias : tensor<8xf32>
    %b = cleave.get_param @head.bias : tensor<6xf32>
    // CHECK: cleave.add %[[B]], %{{.*}} : (tensor<8xf32>, tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
    %lb = cleave.add %b, %l : (tensor<6xf32>, tensor<2x2x6xf32>) -> tensor<2x2x6xf32>
    // CHECK: cleave.reshape {{.*}} -> tensor<4x8xf32>
    %r = cleave.reshape %lb : tensor<2x2x6xf32> -> tensor<4x6xf32>
    // CHECK: cleave.add %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %loss = cleave.softmax_cross_entropy %r, %t {reduction = #cleave.reduction<mean>} : (tensor<4x6xf32>, tensor<4xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// A bias over the classes that something else reads too: neither it nor
// the table is padded.
module {
  // CHECK: cleave.parameter @head.weight : tensor<6x4xf32>
  // expected-remark @+1 {{vocabulary 'head.weight' of 6 rows not padded to 8 for tensor=4: its bias 'head.bias' is read other than added to its logits; they stay replicated}}
  cleave.parameter @head.weight : tensor<6x4xf32>
  // CHECK: cleave.parameter @head.bias : tensor<6xf32>
  cleave.parameter @head.bias : tensor<6xf32>
  func.func @shared_bias(%x: tensor<4x4xf32>, %t: tensor<4xi64>) -> (tensor<f32>, tensor<6xf32>) {
    %w = cleave.get_param @head.weight : tensor<6x4xf32>
    %l = cleave.matmul %x, %w {transpose_rhs} : (tensor<4x4xf32>, tensor<6x4xf32>) -> tensor<4x6xf32>
    %b = cleave.get_param @head.bias : tensor<6xf32>
    %lb = cleave.add %l, %b : (tensor<4x6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
    %loss = cleave.softmax_cross_entropy %lb, %t {reduction = #cleave.reduction<mean>} : (tensor<4x6xf32>, tensor<4xi64>) -> tensor<f32>
    %b2 = cleave.get_param @head.bias : tensor<6xf32>
    %twice = cleave.add %b2, %b2 : (tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
    return %loss, %twice : tensor<f32>, tensor<6xf32>
  }
}

// -----

// Logits that are also the model's output are not the loss's only: the
// table is not padded, and the remark says what else reads it.
module {
  // CHECK: cleave.parameter @wte : tensor<7x4xf32>
  // expected-remark @+1 {{vocabulary 'wte' of 7 rows not padded to 8 for tensor=4: cleave.matmul reads it other than as an embedding of the input ids or a head whose logits reach the loss; it stays replicated}}
  cleave.parameter @wte : tensor<7x4xf32>
  func.func @also_returned(%ids: tensor<4xi64>, %t: tensor<4xi64>) -> (tensor<f32>, tensor<4x7xf32>) {
    %w = cleave.get_param @wte : tensor<7x4xf32>
    %x = cleave.embedding %w, %ids : (tensor<7x4xf32>, tensor<4xi64>) -> tensor<4x4xf32>
    %l = cleave.matmul %x, %w {transpose_rhs} : (tensor<4x4xf32>, tensor<7x4xf32>) -> tensor<4x7xf32>
    %loss = cleave.softmax_cross_entropy %l, %t {reduction = #cleave.reduction<mean>} : (tensor<4x7xf32>, tensor<4xi64>) -> tensor<f32>
    return %loss, %l : tensor<f32>, tensor<4x7xf32>
  }
}

// -----

// A table of computed ids (learned positions) is no vocabulary.
module {
  // CHECK: cleave.parameter @wpe : tensor<5x4xf32>
  cleave.parameter @wpe : tensor<5x4xf32>
  func.func @positions(%ids: tensor<4xi64>) -> tensor<4x4xf32> {
    %w = cleave.get_param @wpe : tensor<5x4xf32>
    %one = cleave.constant dense<1> : tensor<i64>
    %p = cleave.add %ids, %one : (tensor<4xi64>, tensor<i64>) -> tensor<4xi64>
    %x = cleave.embedding %w, %p : (tensor<5x4xf32>, tensor<4xi64>) -> tensor<4x4xf32>
    return %x : tensor<4x4xf32>
  }
}

// -----

// A scalar divided by the logits would turn the padded classes' zeros into
// infinities: not padded. The logits divided by a scalar are.
module {
  // CHECK: cleave.parameter @w : tensor<7x4xf32>
  // expected-remark @+1 {{vocabulary 'w' of 7 rows not padded to 8 for tensor=4: cleave.matmul reads it other than}}
  cleave.parameter @w : tensor<7x4xf32>
  // CHECK: cleave.parameter @v {cleave.unpadded_shape = array<i64: 7, 4>} : tensor<8x4xf32>
  // expected-remark @+1 {{vocabulary 'v' of 7 rows padded to 8}}
  cleave.parameter @v : tensor<7x4xf32>
  func.func @divided(%ids: tensor<4xi64>, %t: tensor<4xi64>) -> (tensor<f32>, tensor<f32>) {
    %c = cleave.constant dense<2.0> : tensor<f32>
    %w = cleave.get_param @w : tensor<7x4xf32>
    %x = cleave.embedding %w, %ids : (tensor<7x4xf32>, tensor<4xi64>) -> tensor<4x4xf32>
    %l = cleave.matmul %x, %w {transpose_rhs} : (tensor<4x4xf32>, tensor<7x4xf32>) -> tensor<4x7xf32>
    %r = cleave.div %c, %l : (tensor<f32>, tensor<4x7xf32>) -> tensor<4x7xf32>
    %a = cleave.softmax_cross_entropy %r, %t {reduction = #cleave.reduction<mean>} : (tensor<4x7xf32>, tensor<4xi64>) -> tensor<f32>
    %v = cleave.get_param @v : tensor<7x4xf32>
    %m = cleave.matmul %x, %v {transpose_rhs} : (tensor<4x4xf32>, tensor<7x4xf32>) -> tensor<4x7xf32>
    // CHECK: cleave.div {{.*}} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
    %s = cleave.div %m, %c : (tensor<4x7xf32>, tensor<f32>) -> tensor<4x7xf32>
    %b = cleave.softmax_cross_entropy %s, %t {reduction = #cleave.reduction<mean>} : (tensor<4x7xf32>, tensor<4xi64>) -> tensor<f32>
    return %a, %b : tensor<f32>, tensor<f32>
  }
}
