// Tests of --cleave-mixed-precision: products in the low type, fp32 for
// norms, softmax, reductions and losses, promotion elsewhere, parameters
// kept fp32, and the loss-scaling attribute for fp16.
// RUN: cleave-opt %s --cleave-mixed-precision=dtype=bf16 | FileCheck %s
// RUN: cleave-opt %s --cleave-mixed-precision="dtype=fp16 dynamic-loss-scale=1 initial-scale=65536 scale-window=10" | FileCheck %s --check-prefix=FP16
// RUN: cleave-opt %s --cleave-mixed-precision=dtype=fp16 --cleave-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: not cleave-opt %s --cleave-mixed-precision=dtype=fp8 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not cleave-opt %s --cleave-mixed-precision="dtype=fp16 dynamic-loss-scale=1 scale-window=0" 2>&1 | FileCheck %s --check-prefix=BADWINDOW

// CHECK: cleave.parameter @w : tensor<8x8xf32>
cleave.parameter @w : tensor<8x8xf32>
cleave.parameter @g : tensor<8xf32>

// CHECK-LABEL: func.func @forward
func.func @forward(%x: tensor<4x8xf32>, %t: tensor<4xi64>) -> tensor<f32> {
  %w = cleave.get_param @w : tensor<8x8xf32>
  // CHECK: %[[XL:.*]] = cleave.cast %arg0 : tensor<4x8xf32> -> tensor<4x8xbf16>
  // CHECK: %[[WL:.*]] = cleave.cast %{{.*}} : tensor<8x8xf32> -> tensor<8x8xbf16>
  // CHECK: %[[Y:.*]] = cleave.matmul %[[XL]], %[[WL]] : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
  %y = cleave.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  // An activation of a bf16 value stays bf16.
  // CHECK: %[[A:.*]] = cleave.gelu %[[Y]] : tensor<4x8xbf16>
  %a = cleave.gelu %y : tensor<4x8xf32>
  // bf16 + f32 computes in f32 (the residual stream).
  // CHECK: %[[AF:.*]] = cleave.cast %[[A]] : tensor<4x8xbf16> -> tensor<4x8xf32>
  // CHECK: %[[R:.*]] = cleave.add %[[AF]], %arg0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %r = cleave.add %a, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %g = cleave.get_param @g : tensor<8xf32>
  // CHECK: cleave.rms_norm %[[R]], %{{.*}} {{.*}} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %n = cleave.rms_norm %r, %g {axis = 1 : i64, epsilon = 1.0e-05 : f32} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  // CHECK: %[[L:.*]] = cleave.matmul {{.*}} -> tensor<4x8xbf16>
  %l = cleave.matmul %n, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  // The loss reads its logits in f32.
  // CHECK: %[[LF:.*]] = cleave.cast %[[L]] : tensor<4x8xbf16> -> tensor<4x8xf32>
  // CHECK: cleave.softmax_cross_entropy %[[LF]], %arg1 {{.*}} -> tensor<f32>
  %loss = cleave.softmax_cross_entropy %l, %t {reduction = #cleave.reduction<mean>} : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
  // CHECK: return {{.*}} : tensor<f32>
  return %loss : tensor<f32>
}

// FP16: module attributes {cleave.loss_scaling = {delayed_shift = 1 : i64, initial_scale = 6.553600e+04 : f64, min_scale = 1.000000e+00 : f64, scale_window = 10 : i64}}
// FP16: cleave.matmul {{.*}} -> tensor<4x8xf16>

// The gradient of the cast brings a product's weight gradient back to f32
// before it is accumulated into the f32 gradient buffer.
// GRAD-LABEL: func.func @forward_backward
// GRAD: cleave.cast %{{.*}} : tensor<8x8xf16> -> tensor<8x8xf32>
// GRAD: cleave.cast %{{.*}} : tensor<8x8xf16> -> tensor<8x8xf32>
// GRAD: cleave.accumulate_grad @w, %{{.*}} : tensor<8x8xf32>

// BAD: cleave-mixed-precision: dtype must be bf16 or fp16, got 'fp8'
// BADWINDOW: cleave-mixed-precision: initial-scale and min-scale must be positive, scale-window and delayed-shift at least 1
