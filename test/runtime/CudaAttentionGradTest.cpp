//===- CudaAttentionGradTest.cpp - attention_grad on CUDA against the CPU -===//
//
// The CUDA kernel of attention_grad (runtime/cuda/attention_grad.cu) runs on
// random inputs and is compared with the CPU kernel on the same inputs, for
// f32, bf16 and f16: causal or not, masks of every type and broadcast, grouped
// query heads, odd and unequal sequence lengths, head dimensions up to 256,
// wholly masked rows and empty tensors; and its dk and dv, which sum over the
// grouped heads, are the same bits from one run to the next. Every test that
// needs a GPU skips when there is none; Errors always runs and checks the
// error paths, with or without a device.
//
//===----------------------------------------------------------------------===//

#include "test/runtime/CudaTestSupport.h"

#include <cstring>
#include <iostream>

using namespace cleave::runtime;
using namespace cleave::runtime::test;

namespace {

class CudaAttentionGradTyped : public ::testing::TestWithParam<DType> {};

enum MaskKind { kNone, kBool, kFloat, kHalf, kBFloat, kDouble };

struct Case {
  int64_t b, h, hkv, tq, tk, d, dv;
  bool causal;
  MaskKind mask;
  Shape maskShape; // empty: [B, H, Tq, Tk]
};

std::string describe(const Case &c) {
  return "b " + std::to_string(c.b) + " h " + std::to_string(c.h) + "/" +
         std::to_string(c.hkv) + " tq " + std::to_string(c.tq) + " tk " +
         std::to_string(c.tk) + " d " + std::to_string(c.d) + "/" +
         std::to_string(c.dv) + (c.causal ? " causal" : "") + " mask " +
         std::to_string(int(c.mask));
}

/// dy, q, k, v and the mask of a case (random, fixed seeds).
struct Operands {
  Buf dy, q, k, v, mask;
  std::vector<const Buf *> inputs() const {
    std::vector<const Buf *> in = {&dy, &q, &k, &v};
    if (!mask.bytes.empty()) // a default Buf has no bytes
      in.push_back(&mask);
    return in;
  }
  std::vector<Buf> results() const {
    return {Buf(q.dtype, q.shape), Buf(k.dtype, k.shape),
            Buf(v.dtype, v.shape)};
  }
};

Operands operands(const Case &c, DType dtype, unsigned &seed) {
  Operands o;
  o.q = random(dtype, {c.b, c.h, c.tq, c.d}, -2, 2, ++seed);
  o.k = random(dtype, {c.b, c.hkv, c.tk, c.d}, -2, 2, ++seed);
  o.v = random(dtype, {c.b, c.hkv, c.tk, c.dv}, -2, 2, ++seed);
  o.dy = random(dtype, {c.b, c.h, c.tq, c.dv}, -1, 1, ++seed);
  Shape maskShape =
      c.maskShape.empty() ? Shape{c.b, c.h, c.tq, c.tk} : c.maskShape;
  if (c.mask == kBool) {
    o.mask = random(DType::Bool, maskShape, 0, 2, ++seed);
    // Keep the first key of every row, so no row is wholly masked...
    int64_t tk = maskShape.back();
    for (int64_t i = 0; i < o.mask.size(); i += tk)
      o.mask.set(i, 1);
  } else if (c.mask != kNone) {
    DType maskType = c.mask == kHalf     ? DType::F16
                     : c.mask == kBFloat ? DType::BF16
                     : c.mask == kDouble ? DType::F64
                                         : DType::F32;
    o.mask = random(maskType, maskShape, -3, 1, ++seed);
    // ... and -inf entries as a float mask gives them (never the first).
    for (int64_t i = 1; i < o.mask.size(); i += 7)
      o.mask.set(i, -INFINITY);
  }
  return o;
}

TEST_P(CudaAttentionGradTyped, MatchesCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType dtype = GetParam();
  const std::vector<Case> cases = {
      {2, 4, 4, 64, 64, 64, 64, false, kNone, {}},
      {2, 4, 4, 64, 64, 64, 64, true, kNone, {}},
      {1, 8, 2, 17, 17, 32, 32, true, kNone, {}},    // GQA, odd lengths
      {1, 4, 2, 130, 130, 64, 64, true, kNone, {}},  // several tiles each way
      {1, 4, 1, 130, 130, 64, 64, false, kNone, {}}, // four heads per k/v
      {1, 2, 1, 130, 97, 128, 128, true, kNone, {}}, // head dim 128
      {2, 2, 2, 33, 33, 128, 128, false, kNone, {}},
      {1, 2, 1, 17, 40, 256, 200, false, kNone, {}}, // head dim 256
      {1, 2, 2, 70, 45, 256, 256, true, kNone, {}},
      {1, 2, 2, 1, 100, 64, 64, true, kNone, {}}, // one query row
      {1, 2, 2, 1, 100, 64, 64, false, kNone, {}},
      {1, 2, 2, 100, 1, 32, 32, false, kNone, {}}, // one key
      {1, 6, 3, 20, 75, 16, 48, false, kNone, {}}, // Tq < Tk, D != Dv
      {1, 2, 2, 75, 20, 32, 32, true, kNone, {}},  // Tq > Tk, causal
      {1, 2, 2, 33, 70, 40, 24, true, kNone, {}},  // head dims not / 16
      {1, 2, 1, 9, 11, 1, 3, false, kNone, {}},    // tiny head dims
      {2, 3, 3, 24, 30, 32, 32, false, kBool, {}},
      {2, 3, 3, 24, 30, 32, 32, true, kBool, {}},
      {2, 3, 3, 24, 30, 32, 32, false, kFloat, {}},
      {2, 3, 3, 24, 30, 32, 32, true, kFloat, {24, 30}}, // broadcast mask
      {2, 4, 2, 24, 30, 32, 32, false, kHalf, {2, 1, 24, 30}},
      {2, 3, 3, 24, 30, 32, 32, false, kBool, {2, 1, 1, 30}}, // padding
      {1, 2, 1, 70, 70, 64, 64, true, kBFloat, {1, 1, 1, 70}},
      {1, 2, 2, 19, 23, 16, 16, false, kDouble, {2, 19, 23}},
      {1, 2, 1, 0, 8, 16, 16, false, kNone, {}}, // no query rows: dk = dv = 0
      {1, 2, 1, 5, 0, 16, 16, false, kNone, {}}, // no keys: dq is NaN
  };
  unsigned seed = 2100;
  for (const Case &c : cases) {
    SCOPED_TRACE(describe(c));
    Operands o = operands(c, dtype, seed);
    Attributes attrs = {{"causal", intA(c.causal)}};
    ASSERT_NO_FATAL_FAILURE(compareWithCpu("attention_grad", attrs, o.inputs(),
                                           o.results(),
                                           productTolerance(dtype)));
  }
  // Operands that start 4 bytes into their allocations, and a scale.
  {
    SCOPED_TRACE("offset and scale");
    Case c{1, 4, 2, 37, 41, 64, 64, true, kFloat, {1, 1, 37, 41}};
    Operands o = operands(c, dtype, seed);
    Attributes attrs = {{"causal", intA(1)}, {"scale", floatA(0.3)}};
    ASSERT_NO_FATAL_FAILURE(compareWithCpu("attention_grad", attrs, o.inputs(),
                                           o.results(), productTolerance(dtype),
                                           /*inPlace=*/false, /*offset=*/4));
  }
}

TEST_P(CudaAttentionGradTyped, WhollyMaskedRowIsNaN) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType dtype = GetParam();
  // Row 1 sees no key: its dq row is NaN, and so are dk and dv at every key
  // (the last row keeps the last key, so the CPU's block sees them all).
  Buf q = random(dtype, {1, 1, 4, 8}, -2, 2, 2201);
  Buf k = random(dtype, {1, 1, 5, 8}, -2, 2, 2202);
  Buf v = random(dtype, {1, 1, 5, 8}, -2, 2, 2203);
  Buf dy = random(dtype, {1, 1, 4, 8}, -1, 1, 2204);
  Buf mask = make(DType::Bool, {4, 5},
                  {1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 0, 1});
  ASSERT_NO_FATAL_FAILURE(compareWithCpu(
      "attention_grad", {{"scale", floatA(0.5)}}, {&dy, &q, &k, &v, &mask},
      {Buf(dtype, q.shape), Buf(dtype, k.shape), Buf(dtype, v.shape)},
      productTolerance(dtype)));
}

/// Runs attention_grad on the GPU and copies its results back.
void runOnGpu(const Attributes &attrs, const std::vector<const Buf *> &inputs,
              std::vector<Buf> &results) {
  std::vector<DevicePtr> devIn(inputs.size()), devOut(results.size());
  std::vector<TensorRef> in, out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    ASSERT_NO_FATAL_FAILURE(toDevice(*inputs[i], devIn[i]));
    in.push_back(devIn[i]->ref);
  }
  for (size_t i = 0; i < results.size(); ++i) {
    ASSERT_NO_FATAL_FAILURE(toDevice(results[i], devOut[i], 0, true));
    out.push_back(devOut[i]->ref);
  }
  cudaStream_t stream;
  ASSERT_CUDA(cudaStreamCreate(&stream));
  Status status = runCudaKernel("attention_grad", attrs, in, out, stream);
  cudaError_t synced = cudaStreamSynchronize(stream);
  (void)cudaStreamDestroy(stream);
  ASSERT_TRUE(status.isOk()) << status.message();
  ASSERT_EQ(synced, cudaSuccess) << cudaGetErrorString(synced);
  for (size_t i = 0; i < results.size(); ++i)
    ASSERT_NO_FATAL_FAILURE(toHost(devOut[i], results[i]));
}

TEST_P(CudaAttentionGradTyped, Deterministic) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType dtype = GetParam();
  unsigned seed = 2300;
  Case c{2, 8, 2, 150, 150, 64, 64, true, kNone, {}};
  Operands o = operands(c, dtype, seed);
  Attributes attrs = {{"causal", intA(1)}};
  std::vector<Buf> first = o.results(), second = o.results();
  ASSERT_NO_FATAL_FAILURE(runOnGpu(attrs, o.inputs(), first));
  ASSERT_NO_FATAL_FAILURE(runOnGpu(attrs, o.inputs(), second));
  for (size_t i = 0; i < first.size(); ++i)
    EXPECT_EQ(first[i].bytes, second[i].bytes) << "result " << i;
}

INSTANTIATE_TEST_SUITE_P(Types, CudaAttentionGradTyped,
                         ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         dtypeParamName);

//===----------------------------------------------------------------------===//
// Without a device too
//===----------------------------------------------------------------------===//

TEST(CudaAttentionGrad, Errors) {
  auto t = fakeTensor;
  // dy, q, k, v for B 1, H 2, Hkv 1, Tq 4, Tk 3, D 8, Dv 8, and results.
  auto run = [&](DType dtype, Shape dy, Shape q, Shape k, Shape v,
                 const TensorRef *mask = nullptr, Attributes attrs = {},
                 std::vector<TensorRef> results = {}) {
    std::vector<TensorRef> in = {t(dtype, dy), t(dtype, q), t(dtype, k),
                                 t(dtype, v)};
    if (mask)
      in.push_back(*mask);
    if (results.empty())
      results = {t(dtype, q), t(dtype, k), t(dtype, v)};
    return runCudaKernel("attention_grad", attrs, in, results, nullptr);
  };
  const Shape dy{1, 2, 4, 8}, q{1, 2, 4, 8}, k{1, 1, 3, 8}, v{1, 1, 3, 8};

  expectError(
      runCudaKernel("attention_grad", {},
                    {t(DType::F32, dy), t(DType::F32, q), t(DType::F32, k)},
                    {t(DType::F32, q), t(DType::F32, k), t(DType::F32, v)},
                    nullptr),
      "attention_grad: got 3 operands, expected 4 to 5 operands");
  expectError(runCudaKernel("attention_grad", {},
                            {t(DType::F32, dy), t(DType::F32, q),
                             t(DType::F32, k), t(DType::F32, v)},
                            {t(DType::F32, q), t(DType::F32, k)}, nullptr),
              "attention_grad: got 2 results, expected 3");
  expectError(run(DType::F32, dy, {1, 2, 4}, k, v),
              "q, k and v must have rank 4");
  expectError(
      run(DType::F32, {1, 3, 4, 8}, {1, 3, 4, 8}, {1, 2, 3, 8}, {1, 2, 3, 8}),
      "attention_grad: q has 3 heads, which is not a multiple of the "
      "2 key/value heads");
  expectError(run(DType::F32, dy, q, {1, 1, 3, 7}, v),
              "k has shape [1, 1, 3, 7], expected [1, 1, 3, 8]");
  expectError(run(DType::F32, {1, 2, 5, 8}, q, k, v),
              "dy has shape [1, 2, 5, 8], expected [1, 2, 4, 8]");
  expectError(
      run(DType::F32, dy, q, k, v, nullptr, {},
          {t(DType::F32, q), t(DType::F32, k), t(DType::F32, {1, 1, 3, 9})}),
      "dv has shape [1, 1, 3, 9], expected [1, 1, 3, 8]");
  expectError(run(DType::F32, dy, q, k, v, nullptr, {},
                  {t(DType::BF16, q), t(DType::F32, k), t(DType::F32, v)}),
              "dq has element type bf16, expected f32");
  TensorRef badMask = t(DType::Bool, {4, 2});
  expectError(run(DType::F32, dy, q, k, v, &badMask),
              "mask has shape [4, 2], which does not broadcast to "
              "[1, 2, 4, 3]");
  TensorRef intMask = t(DType::I32, {4, 3});
  expectError(run(DType::F32, dy, q, k, v, &intMask),
              "no kernel for element type i32 (mask)");
  expectError(
      run(DType::F32, dy, q, k, v, nullptr, {{"scale", stringA("big")}}),
      "attribute 'scale' is");
  expectError(run(DType::F64, dy, q, k, v),
              "no CUDA kernel for element type f64 (q)");
  expectError(run(DType::F32, {1, 2, 4, 8}, {1, 2, 4, 512}, {1, 1, 3, 512},
                  {1, 1, 3, 8}),
              "attention_grad: the CUDA attention_grad kernel takes head "
              "dimensions up to 256, got 512 (q, k) and 8 (v)");
  expectError(run(DType::F32, {1, 2, 4, 300}, q, k, {1, 1, 3, 300}),
              "head dimensions up to 256, got 8 (q, k) and 300 (v)");

  if (cudaDeviceCount() > 0)
    return;
  // No device: an error naming the op and the failed call, not a crash.
  // The pointers are never dereferenced: the first CUDA call fails.
  for (bool causal : {false, true}) {
    Status s =
        run(DType::BF16, dy, q, k, v, nullptr, {{"causal", intA(causal)}});
    expectError(s, "attention_grad: ");
    expectError(s, "failed");
    std::cout << "[ INFO     ] " << s.message() << "\n";
  }
  // No query rows (no scratch buffer): the launch is what fails.
  Status s = run(DType::F32, {1, 2, 0, 8}, {1, 2, 0, 8}, k, v);
  expectError(s, "attention_grad: ");
  expectError(s, "failed");
}

} // namespace
