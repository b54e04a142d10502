// Every verifier message and every shape-inference error of the cleave ops.
// RUN: cleave-opt %s --split-input-file --verify-diagnostics

//===----------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------===//

// expected-error @+1 {{'cleave.parameter' op initial value of type 'tensor<4xf32>' does not match the parameter type 'tensor<8xf32>'}}
cleave.parameter @w : tensor<8xf32> = dense<0.5> : tensor<4xf32>

// -----

// expected-error @+1 {{'cleave.parameter' op cleave.unpadded_shape array<i64: 9, 4> is not 'tensor<8x4xf32>' less some of its first dimension's rows}}
cleave.parameter @w {cleave.unpadded_shape = array<i64: 9, 4>} : tensor<8x4xf32>

// -----

// A padded vocabulary's value holds its real rows.
// expected-error @+1 {{'cleave.parameter' op initial value of type 'tensor<8x4xf32>' does not match the parameter type 'tensor<7x4xf32>'}}
cleave.parameter @w {cleave.unpadded_shape = array<i64: 7, 4>} : tensor<8x4xf32> = dense<0.5> : tensor<8x4xf32>

// -----

// expected-error @+1 {{'cleave.parameter' op parameters are floating point, got 'tensor<8xi64>'}}
cleave.parameter @steps : tensor<8xi64>

// -----

func.func @get_param_unknown() -> tensor<8xf32> {
  // expected-error @+1 {{'cleave.get_param' op no cleave.parameter named @missing}}
  %0 = cleave.get_param @missing : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// A symbol that is not a parameter is as good as none.
func.func @not_a_parameter() {
  return
}
func.func @get_param_of_function() -> tensor<8xf32> {
  // expected-error @+1 {{'cleave.get_param' op no cleave.parameter named @not_a_parameter}}
  %0 = cleave.get_param @not_a_parameter : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

cleave.parameter @w : tensor<8xf32>
func.func @get_param_type() -> tensor<4xf32> {
  // expected-error @+1 {{'cleave.get_param' op result type 'tensor<4xf32>' differs from the type of parameter @w, 'tensor<8xf32>'}}
  %0 = cleave.get_param @w : tensor<4xf32>
  return %0 : tensor<4xf32>
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// -----

func.func @add_no_broadcast(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{operand shapes 2x3 and 4 do not broadcast}}
  %0 = cleave.add %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @mul_element_types(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error @+1 {{operands have different element types: f32 and f16}}
  %0 = cleave.mul %a, %b : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

func.func @less_element_types(%a: tensor<8xi64>, %b: tensor<8xi32>) {
  // expected-error @+1 {{operands have different element types: i64 and i32}}
  %0 = cleave.less %a, %b : (tensor<8xi64>, tensor<8xi32>) -> tensor<8xi1>
  return
}

// -----

// The printed result type is checked against the inferred one.
func.func @add_wrong_result(%a: tensor<2x1xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'cleave.add' op inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<2x1xf32>'}}
  %0 = cleave.add %a, %b : (tensor<2x1xf32>, tensor<3xf32>) -> tensor<2x1xf32>
  return
}

// -----

func.func @equal_wrong_result(%a: tensor<8x1xi64>, %b: tensor<8xi64>) {
  // expected-error @+1 {{'cleave.equal' op inferred type(s) 'tensor<8x8xi1>' are incompatible with return type(s) of operation 'tensor<8xi1>'}}
  %0 = cleave.equal %a, %b : (tensor<8x1xi64>, tensor<8xi64>) -> tensor<8xi1>
  return
}

// -----

// The condition takes part in the broadcast.
func.func @select_no_broadcast(%c: tensor<3xi1>, %a: tensor<4xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{operand shapes 3 and 4 do not broadcast}}
  %0 = cleave.select %c, %a, %b : (tensor<3xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @select_element_types(%c: tensor<i1>, %a: tensor<4xf32>, %b: tensor<f16>) {
  // expected-error @+1 {{operands have different element types: f32 and f16}}
  %0 = cleave.select %c, %a, %b : (tensor<i1>, tensor<4xf32>, tensor<f16>) -> tensor<4xf32>
  return
}

// -----

func.func @gelu_approximate(%x: tensor<4xf32>) {
  // expected-error @+1 {{'cleave.gelu' op approximate must be "none" or "tanh", got "fast"}}
  %0 = cleave.gelu %x {approximate = "fast"} : tensor<4xf32>
  return
}

// -----

func.func @dropout_ratio(%x: tensor<4xf32>) {
  // expected-error @+1 {{'cleave.dropout' op ratio must be in (0, 1), got 1}}
  %0 = cleave.dropout %x {ratio = 1.0 : f64, stream = "/drop/Dropout"} : tensor<4xf32>
  return
}

// -----

func.func @dropout_slice(%x: tensor<4x3xf32>) {
  // expected-error @+1 {{'cleave.dropout' op the operand 'tensor<4x3xf32>' is not a slice of full_shape}}
  %0 = cleave.dropout %x {ratio = 0.5 : f64, stream = "/drop/Dropout", full_shape = array<i64: 4, 8>, split = #cleave.sharding<[{}, {"tensor"}]>} : tensor<4x3xf32>
  return
}

// -----

func.func @dropout_split_alone(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{'cleave.dropout' op full_shape and split come together}}
  %0 = cleave.dropout %x {ratio = 0.5 : f64, stream = "/drop/Dropout", full_shape = array<i64: 4, 8>} : tensor<4x4xf32>
  return
}

//===----------------------------------------------------------------------===//
// Matrix products
//===----------------------------------------------------------------------===//

// -----

func.func @matmul_rank(%a: tensor<8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+1 {{operands must have rank 2 or more, got 8 and 8x4}}
  %0 = cleave.matmul %a, %b : (tensor<8xf32>, tensor<8x4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @matmul_element_types(%a: tensor<2x8xf32>, %b: tensor<8x4xf16>) {
  // expected-error @+1 {{operands have different element types: f32 and f16}}
  %0 = cleave.matmul %a, %b : (tensor<2x8xf32>, tensor<8x4xf16>) -> tensor<2x4xf32>
  return
}

// -----

func.func @matmul_k(%a: tensor<2x8x64xf32>, %b: tensor<32x192xf32>) {
  // expected-error @+1 {{contracting dimensions differ: 2x8x64 has K = 64, 32x192 has K = 32}}
  %0 = cleave.matmul %a, %b : (tensor<2x8x64xf32>, tensor<32x192xf32>) -> tensor<2x8x192xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x8x16xf32>, %b: tensor<3x16x4xf32>) {
  // expected-error @+1 {{batch dimensions of 2x8x16 and 3x16x4 do not broadcast}}
  %0 = cleave.matmul %a, %b : (tensor<2x8x16xf32>, tensor<3x16x4xf32>) -> tensor<2x8x4xf32>
  return
}

// -----

func.func @matmul_wrong_result(%a: tensor<2x8x16xf32>, %b: tensor<16x4xf32>) {
  // expected-error @+1 {{'cleave.matmul' op inferred type(s) 'tensor<2x8x4xf32>' are incompatible with return type(s) of operation 'tensor<2x8x16xf32>'}}
  %0 = cleave.matmul %a, %b : (tensor<2x8x16xf32>, tensor<16x4xf32>) -> tensor<2x8x16xf32>
  return
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

// -----

func.func @reduce_axis_range(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{reduction axis 2 is out of range for rank 2}}
  %0 = cleave.reduce_sum %x {axes = array<i64: 2>} : tensor<2x8xf32> -> tensor<2x8x1xf32>
  return
}

// -----

func.func @reduce_axis_negative(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{reduction axis -1 is out of range for rank 2}}
  %0 = cleave.reduce_mean %x {axes = array<i64: -1>} : tensor<2x8xf32> -> tensor<2x1xf32>
  return
}

// -----

func.func @reduce_axes_unsorted(%x: tensor<2x8x4xf32>) {
  // expected-error @+1 {{reduction axes must be sorted and unique}}
  %0 = cleave.reduce_max %x {axes = array<i64: 2, 0>} : tensor<2x8x4xf32> -> tensor<1x8x1xf32>
  return
}

// -----

func.func @reduce_axes_repeated(%x: tensor<2x8x4xf32>) {
  // expected-error @+1 {{reduction axes must be sorted and unique}}
  %0 = cleave.reduce_min %x {axes = array<i64: 1, 1>} : tensor<2x8x4xf32> -> tensor<2x1x4xf32>
  return
}

// -----

func.func @reduce_keepdims(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'cleave.reduce_sum' op inferred type(s) 'tensor<2xf32>' are incompatible with return type(s) of operation 'tensor<2x1xf32>'}}
  %0 = cleave.reduce_sum %x {axes = array<i64: 1>, keepdims = false} : tensor<2x8xf32> -> tensor<2x1xf32>
  return
}

//===----------------------------------------------------------------------===//
// Softmax and normalizations
//===----------------------------------------------------------------------===//

// -----

func.func @scatter_nd_updates(%x: tensor<3x4xf32>, %t: tensor<2x1xi64>, %u: tensor<2x3xf32>) {
  // expected-error @+1 {{'cleave.scatter_nd' op updates must be 'tensor<2x4xf32>', got 'tensor<2x3xf32>'}}
  %0 = cleave.scatter_nd %x, %t, %u : (tensor<3x4xf32>, tensor<2x1xi64>, tensor<2x3xf32>) -> tensor<3x4xf32>
  return
}

// -----

func.func @gather_elements_grad_dy(%dy: tensor<2x3xf32>, %i: tensor<2x4xi64>) {
  // expected-error @+1 {{'cleave.gather_elements_grad' op dy must be 'tensor<2x4xf32>', got 'tensor<2x3xf32>'}}
  %0 = cleave.gather_elements_grad %dy, %i {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x4xi64>) -> tensor<3x4xf32>
  return
}

// -----

func.func @cumsum_axis(%x: tensor<2x8xi64>) {
  // expected-error @+1 {{'cleave.cumsum' op axis 2 is out of range for rank 2}}
  %0 = cleave.cumsum %x {axis = 2 : i64} : tensor<2x8xi64>
  return
}

// -----

func.func @softmax_axis(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'cleave.softmax' op axis 2 is out of range for rank 2}}
  %0 = cleave.softmax %x {axis = 2 : i64} : tensor<2x8xf32>
  return
}

// -----

func.func @log_softmax_axis(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'cleave.log_softmax' op axis -1 is out of range for rank 2}}
  %0 = cleave.log_softmax %x {axis = -1 : i64} : tensor<2x8xf32>
  return
}

// -----

func.func @layer_norm_result(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'cleave.layer_norm' op result type 'tensor<2x8xf16>' differs from the input type 'tensor<2x8xf32>'}}
  %0 = cleave.layer_norm %x {axis = 1 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x8xf32>) -> tensor<2x8xf16>
  return
}

// -----

func.func @layer_norm_axis(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'cleave.layer_norm' op axis 2 is out of range for 'tensor<2x8xf32>'}}
  %0 = cleave.layer_norm %x {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @layer_norm_scale_shape(%x: tensor<2x8x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{'cleave.layer_norm' op scale must have shape 8x64 (x.shape[1:]), got 64}}
  %0 = cleave.layer_norm %x scale %g {axis = 1 : i64, epsilon = 1.0e-05 : f32}
      : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @layer_norm_scale_type(%x: tensor<2x64xf32>, %g: tensor<64xf16>) {
  // expected-error @+1 {{'cleave.layer_norm' op scale has element type 'f16', x has 'f32'}}
  %0 = cleave.layer_norm %x scale %g {axis = 1 : i64, epsilon = 1.0e-05 : f32}
      : (tensor<2x64xf32>, tensor<64xf16>) -> tensor<2x64xf32>
  return
}

// -----

func.func @layer_norm_bias_shape(%x: tensor<2x64xf32>, %g: tensor<64xf32>, %b: tensor<32xf32>) {
  // expected-error @+1 {{'cleave.layer_norm' op bias must have shape 64 (x.shape[1:]), got 32}}
  %0 = cleave.layer_norm %x scale %g bias %b {axis = 1 : i64, epsilon = 1.0e-05 : f32}
      : (tensor<2x64xf32>, tensor<64xf32>, tensor<32xf32>) -> tensor<2x64xf32>
  return
}

// -----

// The custom form cannot spell a bias without a scale; the generic one can.
func.func @layer_norm_bias_without_scale(%x: tensor<2x64xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{'cleave.layer_norm' op a bias needs a scale; pass a scale of ones}}
  %0 = "cleave.layer_norm"(%x, %b) {axis = 1 : i64, epsilon = 1.0e-05 : f32,
                                    operand_segment_sizes = array<i32: 1, 0, 1>}
      : (tensor<2x64xf32>, tensor<64xf32>) -> tensor<2x64xf32>
  return
}

// -----

func.func @rms_norm_result(%x: tensor<2x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{'cleave.rms_norm' op result type 'tensor<64x2xf32>' differs from the input type 'tensor<2x64xf32>'}}
  %0 = cleave.rms_norm %x, %g {axis = 1 : i64, epsilon = 1.0e-05 : f32}
      : (tensor<2x64xf32>, tensor<64xf32>) -> tensor<64x2xf32>
  return
}

// -----

func.func @rms_norm_axis(%x: tensor<2x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{'cleave.rms_norm' op axis -1 is out of range for 'tensor<2x64xf32>'}}
  %0 = cleave.rms_norm %x, %g {axis = -1 : i64, epsilon = 1.0e-05 : f32}
      : (tensor<2x64xf32>, tensor<64xf32>) -> tensor<2x64xf32>
  return
}

// -----

func.func @rms_norm_scale_shape(%x: tensor<2x64xf32>, %g: tensor<2x64xf32>) {
  // expected-error @+1 {{'cleave.rms_norm' op scale must have shape 64 (x.shape[1:]), got 2x64}}
  %0 = cleave.rms_norm %x, %g {axis = 1 : i64, epsilon = 1.0e-05 : f32}
      : (tensor<2x64xf32>, tensor<2x64xf32>) -> tensor<2x64xf32>
  return
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

// -----

func.func @attention_rank(%q: tensor<2x8x16xf32>, %k: tensor<2x4x8x16xf32>) {
  // expected-error @+1 {{'cleave.attention' op q, k and v must be [batch, heads, seq, head_dim], got 2x8x16, 2x4x8x16 and 2x4x8x16}}
  %0 = cleave.attention %q, %k, %k {scale = 0.25 : f32}
      : (tensor<2x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @attention_element_types(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf16>) {
  // expected-error @+1 {{'cleave.attention' op q, k and v must have one element type, got 'f32', 'f16' and 'f16'}}
  %0 = cleave.attention %q, %k, %k {scale = 0.25 : f32}
      : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf16>, tensor<2x4x8x16xf16>) -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_kv(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x6x16xf32>) {
  // expected-error @+1 {{'cleave.attention' op k and v shapes differ: 2x4x8x16 and 2x4x6x16}}
  %0 = cleave.attention %q, %k, %v {scale = 0.25 : f32}
      : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>) -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_head_dim(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x32xf32>) {
  // expected-error @+1 {{'cleave.attention' op q 2x4x8x16 and k 2x4x8x32 differ in batch or head_dim}}
  %0 = cleave.attention %q, %k, %k {scale = 0.25 : f32}
      : (tensor<2x4x8x16xf32>, tensor<2x4x8x32xf32>, tensor<2x4x8x32xf32>) -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_batch(%q: tensor<2x4x8x16xf32>, %k: tensor<1x4x8x16xf32>) {
  // expected-error @+1 {{'cleave.attention' op q 2x4x8x16 and k 1x4x8x16 differ in batch or head_dim}}
  %0 = cleave.attention %q, %k, %k {scale = 0.25 : f32}
      : (tensor<2x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_heads(%q: tensor<2x4x8x16xf32>, %k: tensor<2x3x8x16xf32>) {
  // expected-error @+1 {{'cleave.attention' op query heads (4) must be a multiple of key/value heads (3)}}
  %0 = cleave.attention %q, %k, %k {scale = 0.25 : f32}
      : (tensor<2x4x8x16xf32>, tensor<2x3x8x16xf32>, tensor<2x3x8x16xf32>) -> tensor<2x4x8x16xf32>
  return
}

// -----

// Zero key/value heads used to crash the verifier with a division by zero.
func.func @attention_zero_heads(%q: tensor<2x4x8x16xf32>, %k: tensor<2x0x8x16xf32>) {
  // expected-error @+1 {{'cleave.attention' op query heads (4) must be a multiple of key/value heads (0)}}
  %0 = cleave.attention %q, %k, %k {scale = 0.25 : f32}
      : (tensor<2x4x8x16xf32>, tensor<2x0x8x16xf32>, tensor<2x0x8x16xf32>) -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_result(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x10x16xf32>) {
  // expected-error @+1 {{'cleave.attention' op result type 'tensor<2x4x10x16xf32>' differs from q's type 'tensor<2x4x8x16xf32>'}}
  %0 = cleave.attention %q, %k, %k {scale = 0.25 : f32}
      : (tensor<2x4x8x16xf32>, tensor<2x4x10x16xf32>, tensor<2x4x10x16xf32>) -> tensor<2x4x10x16xf32>
  return
}

// -----

// The scores are [B, H, Tq, Tk] = 2x4x8x10; a mask over Tq x Tq is wrong.
func.func @attention_mask_shape(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x10x16xf32>, %m: tensor<8x8xi1>) {
  // expected-error @+1 {{'cleave.attention' op mask of shape 8x8 does not broadcast to the scores' shape 2x4x8x10}}
  %0 = cleave.attention %q, %k, %k mask %m {scale = 0.25 : f32}
      : (tensor<2x4x8x16xf32>, tensor<2x4x10x16xf32>, tensor<2x4x10x16xf32>, tensor<8x8xi1>)
      -> tensor<2x4x8x16xf32>
  return
}

// -----

// A mask may broadcast to the scores, never the other way round.
func.func @attention_mask_too_big(%q: tensor<2x4x8x16xf32>, %m: tensor<3x2x4x8x8xi1>) {
  // expected-error @+1 {{'cleave.attention' op mask of shape 3x2x4x8x8 does not broadcast to the scores' shape 2x4x8x8}}
  %0 = cleave.attention %q, %q, %q mask %m {scale = 0.25 : f32}
      : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<3x2x4x8x8xi1>)
      -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_mask_type(%q: tensor<2x4x8x16xf32>, %m: tensor<8x8xi64>) {
  // expected-error @+1 {{'cleave.attention' op mask must be i1 (true keeps) or a float type (added to the scores), got 'i64'}}
  %0 = cleave.attention %q, %q, %q mask %m {scale = 0.25 : f32}
      : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<8x8xi64>)
      -> tensor<2x4x8x16xf32>
  return
}

//===----------------------------------------------------------------------===//
// Lookups and losses
//===----------------------------------------------------------------------===//

// -----

func.func @embedding_table_rank(%t: tensor<4x256x64xf32>, %i: tensor<8xi64>) {
  // expected-error @+1 {{embedding table must be [vocab, dim], got 4x256x64}}
  %0 = cleave.embedding %t, %i : (tensor<4x256x64xf32>, tensor<8xi64>) -> tensor<8x64xf32>
  return
}

// -----

func.func @embedding_wrong_result(%t: tensor<256x64xf32>, %i: tensor<2x8xi64>) {
  // expected-error @+1 {{'cleave.embedding' op inferred type(s) 'tensor<2x8x64xf32>' are incompatible with return type(s) of operation 'tensor<16x64xf32>'}}
  %0 = cleave.embedding %t, %i : (tensor<256x64xf32>, tensor<2x8xi64>) -> tensor<16x64xf32>
  return
}

// -----

func.func @embedding_padding_idx(%t: tensor<256x64xf32>, %i: tensor<2x8xi64>) {
  // expected-error @+1 {{'cleave.embedding' op padding_idx 256 is not a row of the table (0 to 255)}}
  %0 = cleave.embedding %t, %i {padding_idx = 256 : i64} : (tensor<256x64xf32>, tensor<2x8xi64>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @embedding_grad_padding_idx(%dy: tensor<2x8x64xf32>, %i: tensor<2x8xi64>) {
  // expected-error @+1 {{'cleave.embedding_grad' op padding_idx -1 is not a row of the table (0 to 255)}}
  %0 = cleave.embedding_grad %dy, %i {padding_idx = -1 : i64} : (tensor<2x8x64xf32>, tensor<2x8xi64>) -> tensor<256x64xf32>
  return
}

// -----

func.func @gather_axis(%x: tensor<2x8xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{gather axis 2 is out of range for rank 2}}
  %0 = cleave.gather %x, %i {axis = 2 : i64} : (tensor<2x8xf32>, tensor<3xi64>) -> tensor<2x8x3xf32>
  return
}

// -----

func.func @gather_negative_axis(%x: tensor<2x8xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{gather axis -1 is out of range for rank 2}}
  %0 = cleave.gather %x, %i {axis = -1 : i64} : (tensor<2x8xf32>, tensor<3xi64>) -> tensor<2x3xf32>
  return
}

// -----

func.func @loss_input_rank(%x: tensor<16xf32>, %t: tensor<16xi64>) {
  // expected-error @+1 {{expected input of shape [N, C, d...], got 16}}
  %0 = cleave.softmax_cross_entropy %x, %t {reduction = #cleave.reduction<mean>}
      : (tensor<16xf32>, tensor<16xi64>) -> tensor<f32>
  return
}

// -----

func.func @loss_target_shape(%x: tensor<16x256xf32>, %t: tensor<8xi64>) {
  // expected-error @+1 {{expected target of shape 16 for input 16x256, got 8}}
  %0 = cleave.softmax_cross_entropy %x, %t {reduction = #cleave.reduction<sum>}
      : (tensor<16x256xf32>, tensor<8xi64>) -> tensor<f32>
  return
}

// -----

// The class dimension C is not part of the target.
func.func @nll_loss_target_shape(%x: tensor<2x256x8xf32>, %t: tensor<2x256x8xi64>) {
  // expected-error @+1 {{expected target of shape 2x8 for input 2x256x8, got 2x256x8}}
  %0 = cleave.nll_loss %x, %t {reduction = #cleave.reduction<mean>}
      : (tensor<2x256x8xf32>, tensor<2x256x8xi64>) -> tensor<f32>
  return
}

// -----

func.func @loss_reduction_none_result(%x: tensor<16x256xf32>, %t: tensor<16xi64>) {
  // expected-error @+1 {{'cleave.softmax_cross_entropy' op inferred type(s) 'tensor<16xf32>' are incompatible with return type(s) of operation 'tensor<f32>'}}
  %0 = cleave.softmax_cross_entropy %x, %t {reduction = #cleave.reduction<none>}
      : (tensor<16x256xf32>, tensor<16xi64>) -> tensor<f32>
  return
}

// -----

func.func @loss_fused_dloss(%x: tensor<16x256xf32>, %t: tensor<16xi64>, %d: tensor<16xf32>) {
  // expected-error @+1 {{'cleave.softmax_cross_entropy_fused' op dloss must be 'tensor<f32>', got 'tensor<16xf32>'}}
  %0:2 = cleave.softmax_cross_entropy_fused %x, %t, %d {reduction = #cleave.reduction<mean>}
      : (tensor<16x256xf32>, tensor<16xi64>, tensor<16xf32>) -> (tensor<f32>, tensor<16x256xf32>)
  return
}

// -----

func.func @loss_fused_dinput(%x: tensor<16x256xf32>, %t: tensor<16xi64>, %d: tensor<16xf32>) {
  // expected-error @+1 {{'cleave.softmax_cross_entropy_fused' op dinput must be 'tensor<16x256xf32>', got 'tensor<16x256xbf16>'}}
  %0:2 = cleave.softmax_cross_entropy_fused %x, %t, %d {reduction = #cleave.reduction<none>}
      : (tensor<16x256xf32>, tensor<16xi64>, tensor<16xf32>) -> (tensor<16xf32>, tensor<16x256xbf16>)
  return
}

// -----

func.func @loss_fused_loss(%x: tensor<16x256xf32>, %t: tensor<16xi64>, %d: tensor<f32>) {
  // expected-error @+1 {{'cleave.softmax_cross_entropy_fused' op the loss must be 'tensor<f32>', got 'tensor<16xf32>'}}
  %0:2 = cleave.softmax_cross_entropy_fused %x, %t, %d {reduction = #cleave.reduction<sum>}
      : (tensor<16x256xf32>, tensor<16xi64>, tensor<f32>) -> (tensor<16xf32>, tensor<16x256xf32>)
  return
}

// -----

func.func @loss_fused_target(%x: tensor<16x256xf32>, %t: tensor<8xi64>, %d: tensor<f32>) {
  // expected-error @+1 {{expected target of shape 16 for input 16x256, got 8}}
  %0:2 = cleave.softmax_cross_entropy_fused %x, %t, %d {reduction = #cleave.reduction<mean>}
      : (tensor<16x256xf32>, tensor<8xi64>, tensor<f32>) -> (tensor<f32>, tensor<16x256xf32>)
  return
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

// -----

func.func @reshape_count(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'cleave.reshape' op cannot reshape 2x8 (16 elements) to 4x5 (20 elements)}}
  %0 = cleave.reshape %x : tensor<2x8xf32> -> tensor<4x5xf32>
  return
}

// -----

func.func @reshape_element_type(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'cleave.reshape' op element type changes from 'f32' to 'f16'}}
  %0 = cleave.reshape %x : tensor<2x8xf32> -> tensor<16xf16>
  return
}

// -----

func.func @transpose_perm_size(%x: tensor<2x8x4xf32>) {
  // expected-error @+1 {{perm has 2 entries for rank 3}}
  %0 = cleave.transpose %x {perm = array<i64: 1, 0>} : tensor<2x8x4xf32> -> tensor<8x2x4xf32>
  return
}

// -----

func.func @transpose_perm_repeated(%x: tensor<2x8x4xf32>) {
  // expected-error @+1 {{perm is not a permutation of 0..2}}
  %0 = cleave.transpose %x {perm = array<i64: 0, 1, 1>} : tensor<2x8x4xf32> -> tensor<2x8x8xf32>
  return
}

// -----

func.func @transpose_perm_range(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{perm is not a permutation of 0..1}}
  %0 = cleave.transpose %x {perm = array<i64: 0, 2>} : tensor<2x8xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @transpose_wrong_result(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'cleave.transpose' op inferred type(s) 'tensor<8x2xf32>' are incompatible with return type(s) of operation 'tensor<2x8xf32>'}}
  %0 = cleave.transpose %x {perm = array<i64: 1, 0>} : tensor<2x8xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @broadcast_to_shape(%x: tensor<3x8xf32>) {
  // expected-error @+1 {{'cleave.broadcast_to' op cannot broadcast 3x8 to 4x8}}
  %0 = cleave.broadcast_to %x : tensor<3x8xf32> -> tensor<4x8xf32>
  return
}

// -----

// broadcast_to only grows: the result is the broadcast of both shapes.
func.func @broadcast_to_smaller(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'cleave.broadcast_to' op cannot broadcast 4x8 to 1x8}}
  %0 = cleave.broadcast_to %x : tensor<4x8xf32> -> tensor<1x8xf32>
  return
}

// -----

func.func @broadcast_to_element_type(%x: tensor<1x8xf32>) {
  // expected-error @+1 {{'cleave.broadcast_to' op element type changes from 'f32' to 'f16'}}
  %0 = cleave.broadcast_to %x : tensor<1x8xf32> -> tensor<4x8xf16>
  return
}

// -----

func.func @slice_entries(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{start, limit and step need 2 entries each (the rank)}}
  %0 = cleave.slice %x {start = array<i64: 0, 0>, limit = array<i64: 2, 8>, step = array<i64: 1>}
      : tensor<2x8xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @slice_limit(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{slice 0:9:1 is invalid for dimension 1 of size 8}}
  %0 = cleave.slice %x {start = array<i64: 0, 0>, limit = array<i64: 2, 9>, step = array<i64: 1, 1>}
      : tensor<2x8xf32> -> tensor<2x9xf32>
  return
}

// -----

func.func @slice_start_after_limit(%x: tensor<8xf32>) {
  // expected-error @+1 {{slice 5:3:1 is invalid for dimension 0 of size 8}}
  %0 = cleave.slice %x {start = array<i64: 5>, limit = array<i64: 3>, step = array<i64: 1>}
      : tensor<8xf32> -> tensor<0xf32>
  return
}

// -----

func.func @slice_negative_start(%x: tensor<8xf32>) {
  // expected-error @+1 {{slice -2:8:1 is invalid for dimension 0 of size 8}}
  %0 = cleave.slice %x {start = array<i64: -2>, limit = array<i64: 8>, step = array<i64: 1>}
      : tensor<8xf32> -> tensor<2xf32>
  return
}

// -----

func.func @slice_zero_step(%x: tensor<8xf32>) {
  // expected-error @+1 {{slice 0:8:0 is invalid for dimension 0 of size 8}}
  %0 = cleave.slice %x {start = array<i64: 0>, limit = array<i64: 8>, step = array<i64: 0>}
      : tensor<8xf32> -> tensor<8xf32>
  return
}

// -----

// With a negative step the start must be an element: at most dim - 1.
func.func @slice_negative_step_start(%x: tensor<8xf32>) {
  // expected-error @+1 {{slice 8:-1:-1 is invalid for dimension 0 of size 8}}
  %0 = cleave.slice %x {start = array<i64: 8>, limit = array<i64: -1>, step = array<i64: -1>}
      : tensor<8xf32> -> tensor<9xf32>
  return
}

// -----

func.func @slice_negative_step_limit(%x: tensor<8xf32>) {
  // expected-error @+1 {{slice 3:5:-1 is invalid for dimension 0 of size 8}}
  %0 = cleave.slice %x {start = array<i64: 3>, limit = array<i64: 5>, step = array<i64: -1>}
      : tensor<8xf32> -> tensor<0xf32>
  return
}

// -----

// A dimension of size 0 has no element to start a reversed slice at; this
// used to infer a result of size 1.
func.func @slice_negative_step_empty_dim(%x: tensor<0xf32>) {
  // expected-error @+1 {{slice 0:-1:-1 is invalid for dimension 0 of size 0}}
  %0 = cleave.slice %x {start = array<i64: 0>, limit = array<i64: -1>, step = array<i64: -1>}
      : tensor<0xf32> -> tensor<1xf32>
  return
}

// -----

func.func @slice_wrong_result(%x: tensor<10xf32>) {
  // expected-error @+1 {{'cleave.slice' op inferred type(s) 'tensor<3xf32>' are incompatible with return type(s) of operation 'tensor<4xf32>'}}
  %0 = cleave.slice %x {start = array<i64: 8>, limit = array<i64: 3>, step = array<i64: -2>}
      : tensor<10xf32> -> tensor<4xf32>
  return
}

// -----

func.func @concat_axis(%a: tensor<2x3xf32>, %b: tensor<2x5xf32>) {
  // expected-error @+1 {{concat axis 2 is out of range for rank 2}}
  %0 = cleave.concat %a, %b {axis = 2 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @concat_shape(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{concat inputs 2x3 and 4x5 differ outside axis 1}}
  %0 = cleave.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @concat_rank(%a: tensor<2x3xf32>, %b: tensor<2x3x1xf32>, %c: tensor<2x3xf32>) {
  // expected-error @+1 {{concat inputs differ in rank or element type: tensor<2x3xf32> and tensor<2x3x1xf32>}}
  %0 = cleave.concat %a, %c, %b {axis = 0 : i64}
      : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3x1xf32>) -> tensor<6x3xf32>
  return
}

// -----

func.func @concat_element_type(%a: tensor<2x3xf32>, %b: tensor<2x3xf16>) {
  // expected-error @+1 {{concat inputs differ in rank or element type: tensor<2x3xf32> and tensor<2x3xf16>}}
  %0 = cleave.concat %a, %b {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf16>) -> tensor<4x3xf32>
  return
}

// -----

func.func @concat_no_inputs() {
  // expected-error @+1 {{concat needs at least one input}}
  %0 = cleave.concat {axis = 0 : i64} : () -> tensor<0xf32>
  return
}

// -----

func.func @concat_wrong_result(%a: tensor<2x3xf32>, %b: tensor<2x5xf32>) {
  // expected-error @+1 {{'cleave.concat' op inferred type(s) 'tensor<2x8xf32>' are incompatible with return type(s) of operation 'tensor<2x9xf32>'}}
  %0 = cleave.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x9xf32>
  return
}

// -----

func.func @rotary_odd_head_dim(%x: tensor<2x8x15xf32>, %c: tensor<8x15xf32>) {
  // expected-error @+1 {{'cleave.rotary' op x must be [..., seq, head_dim] with an even head_dim, got 2x8x15}}
  %0 = cleave.rotary %x, %c, %c : (tensor<2x8x15xf32>, tensor<8x15xf32>, tensor<8x15xf32>) -> tensor<2x8x15xf32>
  return
}

// -----

func.func @rotary_wrong_table(%x: tensor<2x8x16xf32>, %c: tensor<4x16xf32>) {
  // expected-error @+1 {{'cleave.rotary' op cos and sin must both be 8x16 of 'f32', got 'tensor<4x16xf32>' and 'tensor<4x16xf32>'}}
  %0 = cleave.rotary %x, %c, %c : (tensor<2x8x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<2x8x16xf32>
  return
}
