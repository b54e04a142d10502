// Tests of --cleave-optimizer: one update per parameter with a gradient,
// weight decay only on matrices, the global sum of squares for clipping,
// the schedule's attributes, SGD, and bad options.
// RUN: cleave-opt %s --cleave-autodiff --cleave-optimizer="lr=0.01 beta2=0.95 weight-decay=0.1 grad-clip=1.0 warmup-steps=2 decay-steps=10 min-lr=0.001" | FileCheck %s
// RUN: cleave-opt %s --cleave-autodiff --cleave-optimizer="type=sgd lr=0.1 momentum=0.9" | FileCheck %s --check-prefix=SGD
// RUN: cleave-opt %s --cleave-optimizer | FileCheck %s --check-prefix=NOGRAD
// RUN: not cleave-opt %s --cleave-autodiff --cleave-optimizer=type=adam 2>&1 | FileCheck %s --check-prefix=BADTYPE
// RUN: not cleave-opt %s --cleave-autodiff --cleave-optimizer=lr=-1 2>&1 | FileCheck %s --check-prefix=BADLR

cleave.parameter @w : tensor<4x3xf32>
cleave.parameter @b : tensor<3xf32>
// Not read by the loss: no gradient, no update (as PyTorch skips a
// parameter whose .grad is None).
cleave.parameter @unused : tensor<3xf32>

func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
  %w = cleave.get_param @w : tensor<4x3xf32>
  %y = cleave.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %b = cleave.get_param @b : tensor<3xf32>
  %z = cleave.add %y, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %s = cleave.reduce_mean %z {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// CHECK-LABEL: func.func @optimizer(%arg0: tensor<i64> {cleave.role = "step"}) attributes {cleave.kind = "optimizer"}
// CHECK: %[[GW:.*]] = cleave.get_grad @w : tensor<4x3xf32>
// CHECK: %[[GB:.*]] = cleave.get_grad @b : tensor<3xf32>
// CHECK: %[[N:.*]] = cleave.sum_squares %[[GW]], %[[GB]] : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<f32>
// Attributes at their default (beta1, eps) are not printed.
// CHECK: cleave.adamw @w, %[[GW]], %arg0 norm %[[N]] : tensor<f32> {beta2 = 0.9499{{[0-9]*}} : f64, decay_steps = 10 : i64, lr = 1.000000e-02 : f64, max_norm = 1.000000e+00 : f64, min_lr = 1.000000e-03 : f64, warmup_steps = 2 : i64, weight_decay = 1.000000e-01 : f64} : tensor<4x3xf32>, tensor<i64>
// A vector gets no weight decay.
// CHECK: cleave.adamw @b, %[[GB]], %arg0 norm %[[N]] : tensor<f32> {beta2 = 0.9499{{[0-9]*}} : f64, decay_steps = 10 : i64, lr = 1.000000e-02 : f64, max_norm = 1.000000e+00 : f64, min_lr = 1.000000e-03 : f64, warmup_steps = 2 : i64} : tensor<3xf32>, tensor<i64>
// CHECK-NOT: @unused
// CHECK: return

// SGD: cleave.sgd @w, %{{.*}}, %arg0 {lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64} : tensor<4x3xf32>, tensor<i64>
// SGD-NOT: sum_squares
// NOGRAD-NOT: func.func @optimizer
// BADTYPE: error: cleave-optimizer: type must be adamw or sgd, got 'adam'
// BADLR: error: cleave-optimizer: lr, weight-decay, grad-clip, momentum, warmup-steps, decay-steps and min-lr must be non-negative
