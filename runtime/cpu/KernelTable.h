//===- KernelTable.h - the CPU kernels, one function per op ----*- C++ -*-===//
//
// Each function is defined in the file of its op family and registered by
// name in Kernels.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_CPU_KERNELTABLE_H
#define CLEAVE_RUNTIME_CPU_KERNELTABLE_H

#include "runtime/cpu/KernelSupport.h"

namespace cleave::runtime::cpu {

// elementwise.cpp
Status addKernel(const ops::KernelArgs &a);
Status subKernel(const ops::KernelArgs &a);
Status mulKernel(const ops::KernelArgs &a);
Status divKernel(const ops::KernelArgs &a);
Status powKernel(const ops::KernelArgs &a);
Status maxKernel(const ops::KernelArgs &a);
Status minKernel(const ops::KernelArgs &a);
Status andKernel(const ops::KernelArgs &a);
Status orKernel(const ops::KernelArgs &a);
Status equalKernel(const ops::KernelArgs &a);
Status lessKernel(const ops::KernelArgs &a);
Status lessEqualKernel(const ops::KernelArgs &a);
Status greaterKernel(const ops::KernelArgs &a);
Status greaterEqualKernel(const ops::KernelArgs &a);
Status selectKernel(const ops::KernelArgs &a);
Status negKernel(const ops::KernelArgs &a);
Status absKernel(const ops::KernelArgs &a);
Status reluKernel(const ops::KernelArgs &a);
Status notKernel(const ops::KernelArgs &a);
Status expKernel(const ops::KernelArgs &a);
Status logKernel(const ops::KernelArgs &a);
Status sqrtKernel(const ops::KernelArgs &a);
Status rsqrtKernel(const ops::KernelArgs &a);
Status reciprocalKernel(const ops::KernelArgs &a);
Status tanhKernel(const ops::KernelArgs &a);
Status erfKernel(const ops::KernelArgs &a);
Status sigmoidKernel(const ops::KernelArgs &a);
Status siluKernel(const ops::KernelArgs &a);
Status sinKernel(const ops::KernelArgs &a);
Status cosKernel(const ops::KernelArgs &a);
Status geluKernel(const ops::KernelArgs &a);
Status dropoutKernel(const ops::KernelArgs &a);
Status siluGradKernel(const ops::KernelArgs &a);
Status geluGradKernel(const ops::KernelArgs &a);

// matmul.cpp
Status matmulKernel(const ops::KernelArgs &a);

// reductions.cpp
Status reduceSumKernel(const ops::KernelArgs &a);
Status reduceMeanKernel(const ops::KernelArgs &a);
Status reduceMaxKernel(const ops::KernelArgs &a);
Status reduceMinKernel(const ops::KernelArgs &a);
Status cumsumKernel(const ops::KernelArgs &a);

// softmax.cpp
Status softmaxKernel(const ops::KernelArgs &a);
Status logSoftmaxKernel(const ops::KernelArgs &a);
Status softmaxGradKernel(const ops::KernelArgs &a);
Status logSoftmaxGradKernel(const ops::KernelArgs &a);

// norms.cpp
Status layerNormKernel(const ops::KernelArgs &a);
Status rmsNormKernel(const ops::KernelArgs &a);
Status layerNormGradKernel(const ops::KernelArgs &a);
Status rmsNormGradKernel(const ops::KernelArgs &a);

// rotary.cpp
Status rotaryKernel(const ops::KernelArgs &a);

// attention.cpp
Status attentionKernel(const ops::KernelArgs &a);
Status attentionGradKernel(const ops::KernelArgs &a);

// indexing.cpp
Status gatherElementsKernel(const ops::KernelArgs &a);
Status gatherElementsGradKernel(const ops::KernelArgs &a);
Status gatherNdKernel(const ops::KernelArgs &a);
Status scatterNdKernel(const ops::KernelArgs &a);

// lookup.cpp
Status embeddingKernel(const ops::KernelArgs &a);
Status gatherKernel(const ops::KernelArgs &a);
Status embeddingGradKernel(const ops::KernelArgs &a);
Status gatherGradKernel(const ops::KernelArgs &a);

// losses.cpp
Status softmaxCrossEntropyKernel(const ops::KernelArgs &a);
Status nllLossKernel(const ops::KernelArgs &a);
Status softmaxCrossEntropyGradKernel(const ops::KernelArgs &a);
Status softmaxCrossEntropyFusedKernel(const ops::KernelArgs &a);
Status nllLossGradKernel(const ops::KernelArgs &a);

// movement.cpp
Status reshapeKernel(const ops::KernelArgs &a);
Status transposeKernel(const ops::KernelArgs &a);
Status broadcastToKernel(const ops::KernelArgs &a);
Status sliceKernel(const ops::KernelArgs &a);
Status sliceGradKernel(const ops::KernelArgs &a);
Status concatKernel(const ops::KernelArgs &a);
Status castKernel(const ops::KernelArgs &a);

// optimizer.cpp
Status accumulateGradKernel(const ops::KernelArgs &a);
Status sumSquaresKernel(const ops::KernelArgs &a);
Status adamwKernel(const ops::KernelArgs &a);
Status sgdKernel(const ops::KernelArgs &a);

} // namespace cleave::runtime::cpu

#endif // CLEAVE_RUNTIME_CPU_KERNELTABLE_H
