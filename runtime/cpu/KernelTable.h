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
Status addKernel(const KernelArgs &a);
Status subKernel(const KernelArgs &a);
Status mulKernel(const KernelArgs &a);
Status divKernel(const KernelArgs &a);
Status powKernel(const KernelArgs &a);
Status maxKernel(const KernelArgs &a);
Status minKernel(const KernelArgs &a);
Status andKernel(const KernelArgs &a);
Status orKernel(const KernelArgs &a);
Status equalKernel(const KernelArgs &a);
Status lessKernel(const KernelArgs &a);
Status lessEqualKernel(const KernelArgs &a);
Status greaterKernel(const KernelArgs &a);
Status greaterEqualKernel(const KernelArgs &a);
Status selectKernel(const KernelArgs &a);
Status negKernel(const KernelArgs &a);
Status absKernel(const KernelArgs &a);
Status reluKernel(const KernelArgs &a);
Status notKernel(const KernelArgs &a);
Status expKernel(const KernelArgs &a);
Status logKernel(const KernelArgs &a);
Status sqrtKernel(const KernelArgs &a);
Status rsqrtKernel(const KernelArgs &a);
Status reciprocalKernel(const KernelArgs &a);
Status tanhKernel(const KernelArgs &a);
Status erfKernel(const KernelArgs &a);
Status sigmoidKernel(const KernelArgs &a);
Status siluKernel(const KernelArgs &a);
Status sinKernel(const KernelArgs &a);
Status cosKernel(const KernelArgs &a);
Status geluKernel(const KernelArgs &a);
Status siluGradKernel(const KernelArgs &a);
Status geluGradKernel(const KernelArgs &a);

// matmul.cpp
Status matmulKernel(const KernelArgs &a);

// reductions.cpp
Status reduceSumKernel(const KernelArgs &a);
Status reduceMeanKernel(const KernelArgs &a);
Status reduceMaxKernel(const KernelArgs &a);
Status reduceMinKernel(const KernelArgs &a);
Status cumsumKernel(const KernelArgs &a);

// softmax.cpp
Status softmaxKernel(const KernelArgs &a);
Status logSoftmaxKernel(const KernelArgs &a);
Status softmaxGradKernel(const KernelArgs &a);
Status logSoftmaxGradKernel(const KernelArgs &a);

// norms.cpp
Status layerNormKernel(const KernelArgs &a);
Status rmsNormKernel(const KernelArgs &a);
Status layerNormGradKernel(const KernelArgs &a);
Status rmsNormGradKernel(const KernelArgs &a);

// rotary.cpp
Status rotaryKernel(const KernelArgs &a);

// attention.cpp
Status attentionKernel(const KernelArgs &a);
Status attentionGradKernel(const KernelArgs &a);

// indexing.cpp
Status gatherElementsKernel(const KernelArgs &a);
Status gatherElementsGradKernel(const KernelArgs &a);
Status gatherNdKernel(const KernelArgs &a);
Status scatterNdKernel(const KernelArgs &a);

// lookup.cpp
Status embeddingKernel(const KernelArgs &a);
Status gatherKernel(const KernelArgs &a);
Status embeddingGradKernel(const KernelArgs &a);
Status gatherGradKernel(const KernelArgs &a);

// losses.cpp
Status softmaxCrossEntropyKernel(const KernelArgs &a);
Status nllLossKernel(const KernelArgs &a);
Status softmaxCrossEntropyGradKernel(const KernelArgs &a);
Status softmaxCrossEntropyFusedKernel(const KernelArgs &a);
Status nllLossGradKernel(const KernelArgs &a);

// movement.cpp
Status reshapeKernel(const KernelArgs &a);
Status transposeKernel(const KernelArgs &a);
Status broadcastToKernel(const KernelArgs &a);
Status sliceKernel(const KernelArgs &a);
Status sliceGradKernel(const KernelArgs &a);
Status concatKernel(const KernelArgs &a);
Status castKernel(const KernelArgs &a);

// optimizer.cpp
Status accumulateGradKernel(const KernelArgs &a);
Status sumSquaresKernel(const KernelArgs &a);
Status adamwKernel(const KernelArgs &a);
Status sgdKernel(const KernelArgs &a);

} // namespace cleave::runtime::cpu

#endif // CLEAVE_RUNTIME_CPU_KERNELTABLE_H
