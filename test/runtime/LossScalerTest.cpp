//===- LossScalerTest.cpp - the dynamic loss scaler's state machine -------===//

#include "runtime/LossScaler.h"

#include <gtest/gtest.h>

using cleave::runtime::LossScaler;

TEST(LossScaler, OverflowHalvesAndWindowDoubles) {
  LossScaler s(1024, /*window=*/3, /*minScale=*/1, /*delayedShift=*/1);
  EXPECT_EQ(s.scale(), 1024);
  s.update(true);
  EXPECT_EQ(s.scale(), 512);
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.scale(), 512);
  s.update(false); // the third good step in a row
  EXPECT_EQ(s.scale(), 1024);
  s.update(false);
  s.update(true); // an overflow restarts the window
  EXPECT_EQ(s.scale(), 512);
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.scale(), 512);
}

TEST(LossScaler, NeverBelowMinScale) {
  LossScaler s(4, 1000, /*minScale=*/2, 1);
  s.update(true);
  s.update(true);
  s.update(true);
  EXPECT_EQ(s.scale(), 2);
}

TEST(LossScaler, DelayedShiftToleratesOverflowsUntilTheScaleGrows) {
  // Megatron's hysteresis: two overflows before the first halving; once
  // spent, every overflow halves, until a full window restores it.
  LossScaler s(64, /*window=*/2, 1, /*delayedShift=*/2);
  s.update(true);
  EXPECT_EQ(s.scale(), 64);
  s.update(true);
  EXPECT_EQ(s.scale(), 32);
  s.update(true);
  EXPECT_EQ(s.scale(), 16);
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.scale(), 32);
  s.update(true);
  EXPECT_EQ(s.scale(), 32);
  s.update(true);
  EXPECT_EQ(s.scale(), 16);
}
