//===- LossScaler.h - fp16 dynamic loss scaling ----------------*- C++ -*-===//
//
// The state machine of SMP's and Megatron's dynamic loss scaler
// (program.proto, LossScaling): a step whose gradients overflow is skipped
// and spends one of `delayed_shift` allowed overflows; once they are spent
// each overflow halves the scale (never below `min_scale`). `scale_window`
// steps in a row without overflow double it and restore the allowance.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_LOSSSCALER_H
#define CLEAVE_RUNTIME_LOSSSCALER_H

#include <cstdint>

namespace cleave::runtime {

class LossScaler {
public:
  LossScaler() = default;
  LossScaler(double initialScale, int64_t window, double minScale,
             int64_t delayedShift)
      : scale_(initialScale), window_(window), minScale_(minScale),
        delayedShift_(delayedShift), hysteresis_(delayedShift) {}

  double scale() const { return scale_; }

  /// What changes from step to step: a checkpoint saves it, a resume
  /// restores it (the configuration comes from the program).
  struct State {
    double scale = 1;
    int64_t hysteresis = 1;
    int64_t goodSteps = 0;
  };
  State state() const { return {scale_, hysteresis_, goodSteps_}; }
  void restore(const State &s) {
    scale_ = s.scale;
    hysteresis_ = s.hysteresis;
    goodSteps_ = s.goodSteps;
  }

  /// After a step: `overflow` says whether any gradient was not finite.
  void update(bool overflow) {
    if (overflow) {
      goodSteps_ = 0;
      if (--hysteresis_ <= 0) // stays spent until the scale grows again
        scale_ = scale_ / 2 < minScale_ ? minScale_ : scale_ / 2;
      return;
    }
    if (++goodSteps_ == window_) {
      goodSteps_ = 0;
      hysteresis_ = delayedShift_;
      scale_ *= 2;
    }
  }

private:
  double scale_ = 1;
  int64_t window_ = 1000;
  double minScale_ = 1;
  int64_t delayedShift_ = 1;
  int64_t hysteresis_ = 1;
  int64_t goodSteps_ = 0;
};

} // namespace cleave::runtime

#endif // CLEAVE_RUNTIME_LOSSSCALER_H
