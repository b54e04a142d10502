//===- CudaBackendTest.cpp - the CUDA backend against the CPU kernels -----===//
//
// The CUDA backend (runtime/cuda/CudaBackend.cpp) as the executor drives it,
// through the Backend interface: matmul with the backend's CudaContext
// (cached cuBLASLt plans) against the CPU kernel, the context's plan cache
// itself (reused on repeats, the same bits as without a context), and adamw
// ops deferred and run as one multi-tensor launch, flushed by a download,
// against the CPU kernel run one by one, bit for bit. Tests that need a GPU
// skip without one; CudaBackendWithoutDevice runs only without one.
//
//===----------------------------------------------------------------------===//

#include "runtime/Backend.h"
#include "test/runtime/CudaTestSupport.h"

#include <cstring>

using namespace cleave::runtime;
using namespace cleave::runtime::test;

namespace {

TEST(CudaBackendWithoutDevice, NamesTheCpuBackend) {
  if (cudaDeviceCount() != 0)
    GTEST_SKIP() << "a CUDA device is present";
  std::unique_ptr<Backend> backend;
  Status status = makeBackend("cuda", 0, 1, backend);
  ASSERT_NO_FATAL_FAILURE(expectError(status, "--device cpu"));
  EXPECT_NE(status.message().find("device 'cuda'"), std::string::npos)
      << status.message();
  EXPECT_EQ(backend, nullptr);
}

/// A tensor in a backend's memory (an arena of its own).
TensorRef toBackend(Backend &backend, const Buf &b) {
  TensorRef t;
  t.shape = b.shape;
  t.dtype = b.dtype;
  size_t bytes = size_t(b.size()) * dtypeSize(b.dtype);
  void *base = nullptr;
  Status status = backend.allocate(bytes + 1, 256, base);
  EXPECT_TRUE(status.isOk()) << status.message();
  t.data = base;
  if (status.isOk() && bytes) {
    status = backend.upload(base, b.bytes.data(), bytes);
    EXPECT_TRUE(status.isOk()) << status.message();
  }
  return t;
}

void fromBackend(Backend &backend, const TensorRef &t, Buf &b) {
  size_t bytes = size_t(b.size()) * dtypeSize(b.dtype);
  ASSERT_STATUS_OK(backend.download(b.bytes.data(), t.data, bytes));
}

bool sameBytes(const Buf &a, const Buf &b) {
  size_t bytes = size_t(a.size()) * dtypeSize(a.dtype);
  return a.dtype == b.dtype && a.shape == b.shape &&
         std::memcmp(a.bytes.data(), b.bytes.data(), bytes) == 0;
}

class CudaBackendTest : public ::testing::Test {
protected:
  void SetUp() override {
    SKIP_WITHOUT_CUDA_DEVICE();
    ASSERT_STATUS_OK(makeBackend("cuda", 0, 1, backend));
    ASSERT_NE(backend, nullptr);
  }
  std::unique_ptr<Backend> backend;
};

//===----------------------------------------------------------------------===//
// matmul and the CudaContext
//===----------------------------------------------------------------------===//

struct MatmulCase {
  Shape lhs, rhs, out;
  bool transposeLhs, transposeRhs;
};

/// A linear layer, one GEMM of stacked rows, a strided batch with a
/// transposed lhs, batch dimensions broadcasting both ways, a transposed
/// rhs, and sizes that are no multiple of 8.
std::vector<MatmulCase> matmulCases() {
  return {{{5, 7}, {7, 3}, {5, 3}, false, false},
          {{2, 3, 5, 4}, {4, 6}, {2, 3, 5, 6}, false, false},
          {{4, 9, 5}, {4, 9, 6}, {4, 5, 6}, true, false},
          {{3, 1, 4, 5}, {2, 5, 6}, {3, 2, 4, 6}, false, false},
          {{33, 65}, {17, 65}, {33, 17}, false, true}};
}

Attributes matmulAttributes(const MatmulCase &c) {
  return {{"transpose_lhs", intA(c.transposeLhs)},
          {"transpose_rhs", intA(c.transposeRhs)}};
}

std::string caseName(const MatmulCase &c, DType dtype) {
  return std::string(dtypeName(dtype)) + " " + shapeText(c.lhs) +
         (c.transposeLhs ? "^T" : "") + " x " + shapeText(c.rhs) +
         (c.transposeRhs ? "^T" : "");
}

TEST_F(CudaBackendTest, MatmulMatchesCpu) {
  for (DType dtype : {DType::F32, DType::BF16, DType::F16})
    for (const MatmulCase &c : matmulCases()) {
      std::string what = caseName(c, dtype);
      SCOPED_TRACE(what);
      Buf lhs = random(dtype, c.lhs, -1, 1, 11);
      Buf rhs = random(dtype, c.rhs, -1, 1, 12);
      Buf want(dtype, c.out);
      Attributes attrs = matmulAttributes(c);
      ASSERT_STATUS_OK(
          runCpuKernel("matmul", attrs, {lhs.ref(), rhs.ref()}, {want.ref()}));
      TensorRef dl = toBackend(*backend, lhs), dr = toBackend(*backend, rhs);
      TensorRef dout = toBackend(*backend, Buf(dtype, c.out));
      // Twice: the second run reuses the first's plan, with the same bits.
      Buf first(dtype, c.out), second(dtype, c.out);
      ASSERT_STATUS_OK(backend->runKernel("matmul", attrs, {dl, dr}, {dout}));
      ASSERT_NO_FATAL_FAILURE(fromBackend(*backend, dout, first));
      ASSERT_STATUS_OK(backend->zero(dout.data, dout.sizeBytes()));
      ASSERT_STATUS_OK(backend->runKernel("matmul", attrs, {dl, dr}, {dout}));
      ASSERT_NO_FATAL_FAILURE(fromBackend(*backend, dout, second));
      expectClose(first, want, productTolerance(dtype), what);
      EXPECT_TRUE(sameBytes(first, second)) << what;
    }
  ASSERT_STATUS_OK(backend->synchronize());
}

TEST(CudaContextTest, MatmulPlansAreReused) {
  SKIP_WITHOUT_CUDA_DEVICE();
  std::unique_ptr<CudaContext> context;
  ASSERT_STATUS_OK(CudaContext::create(context));
  cudaStream_t stream;
  ASSERT_CUDA(cudaStreamCreate(&stream));
  int64_t problems = 0;
  for (DType dtype : {DType::F32, DType::BF16, DType::F16})
    for (const MatmulCase &c : matmulCases()) {
      std::string what = caseName(c, dtype);
      SCOPED_TRACE(what);
      Buf lhs = random(dtype, c.lhs, -1, 1, 21);
      Buf rhs = random(dtype, c.rhs, -1, 1, 22);
      Buf out(dtype, c.out);
      DevicePtr dl, dr, dout;
      ASSERT_NO_FATAL_FAILURE(toDevice(lhs, dl));
      ASSERT_NO_FATAL_FAILURE(toDevice(rhs, dr));
      ASSERT_NO_FATAL_FAILURE(toDevice(out, dout, 0, /*poison=*/true));
      Attributes attrs = matmulAttributes(c);
      // Without a context, then twice with it: the same bits each time.
      std::vector<Buf> got(3, out);
      for (int run = 0; run < 3; ++run) {
        ASSERT_CUDA(cudaMemset(dout->ref.data, 0xff, dout->ref.sizeBytes()));
        ASSERT_STATUS_OK(runCudaKernel("matmul", attrs, {dl->ref, dr->ref},
                                       {dout->ref}, stream,
                                       run == 0 ? nullptr : context.get()));
        ASSERT_CUDA(cudaStreamSynchronize(stream));
        ASSERT_NO_FATAL_FAILURE(toHost(dout, got[run]));
      }
      ++problems;
      EXPECT_EQ(context->matmulPlansMade(), problems);
      EXPECT_EQ(context->matmulPlansReused(), problems);
      EXPECT_TRUE(sameBytes(got[1], got[0])) << what << ": first with context";
      EXPECT_TRUE(sameBytes(got[2], got[0])) << what << ": reused plan";
    }
  (void)cudaStreamDestroy(stream);
}

//===----------------------------------------------------------------------===//
// adamw, deferred and batched
//===----------------------------------------------------------------------===//

Attributes adamwAttributes(double lr = 6e-4) {
  return {{"lr", floatA(lr)},         {"weight_decay", floatA(0.1)},
          {"beta1", floatA(0.9)},     {"beta2", floatA(0.95)},
          {"eps", floatA(1e-8)},      {"max_norm", floatA(1.0)},
          {"warmup_steps", intA(10)}, {"decay_steps", intA(100)},
          {"min_lr", floatA(6e-5)}};
}

/// One adamw op: its parameter's state on the host and on the device, how
/// it is called, and (aliasGrad >= 0) a grad that is parameter aliasGrad's
/// param tensor.
struct AdamWOp {
  Buf grad, param, expAvg, expAvgSq;
  TensorRef dGrad, dParam, dExpAvg, dExpAvgSq;
  double lr = 6e-4;
  bool clip = true;
  int aliasGrad = -1;
};

AdamWOp adamwOp(DType gradType, Shape shape, unsigned seed) {
  AdamWOp op;
  op.grad = random(gradType, shape, -1, 1, seed);
  op.param = random(DType::F32, shape, -1, 1, seed + 1);
  op.expAvg = random(DType::F32, shape, -0.1, 0.1, seed + 2);
  op.expAvgSq = random(DType::F32, shape, 0, 0.01, seed + 3);
  return op;
}

TEST_F(CudaBackendTest, AdamWBatchedIsBitIdentical) {
  // Sizes around the kernel's 4096-element chunk, an empty parameter, every
  // grad type; one op with another lr and one without clipping (each ends
  // a batch), and one whose grad is an earlier op's parameter (it must run
  // after that op, as on the CPU).
  std::vector<AdamWOp> ops;
  ops.push_back(adamwOp(DType::F32, {37, 129}, 100));
  ops.push_back(adamwOp(DType::BF16, {4097}, 110));
  ops.push_back(adamwOp(DType::F16, {4096}, 120));
  ops.push_back(adamwOp(DType::F32, {0, 3}, 130));
  ops.push_back(adamwOp(DType::F32, {1}, 140));
  ops.back().lr = 1e-3;
  ops.push_back(adamwOp(DType::BF16, {300, 33}, 150));
  ops.push_back(adamwOp(DType::F32, {37, 129}, 160));
  ops.back().aliasGrad = 0;
  ops.push_back(adamwOp(DType::F16, {5}, 170));
  ops.back().clip = false;
  for (int i = 0; i < 40; ++i)
    ops.push_back(adamwOp(i % 2 ? DType::F32 : DType::BF16,
                          {int64_t(1 + i % 7)}, 200 + 4 * i));

  std::vector<AdamWOp> cpu = ops;
  for (AdamWOp &op : ops) {
    op.dGrad = toBackend(*backend, op.grad);
    op.dParam = toBackend(*backend, op.param);
    op.dExpAvg = toBackend(*backend, op.expAvg);
    op.dExpAvgSq = toBackend(*backend, op.expAvgSq);
  }
  Buf sumSquares = make(DType::F32, {}, {37.5});
  TensorRef dSumSquares = toBackend(*backend, sumSquares);

  for (int64_t stepValue : {3, 11, 12}) {
    SCOPED_TRACE("step " + std::to_string(stepValue));
    Buf step = make(DType::I64, {}, {double(stepValue)});
    TensorRef dStep = toBackend(*backend, step);
    for (AdamWOp &op : cpu) {
      TensorRef grad =
          op.aliasGrad >= 0 ? cpu[op.aliasGrad].param.ref() : op.grad.ref();
      std::vector<TensorRef> in = {grad, step.ref()};
      if (op.clip)
        in.push_back(sumSquares.ref());
      ASSERT_STATUS_OK(
          runCpuKernel("adamw", adamwAttributes(op.lr), in,
                       {op.param.ref(), op.expAvg.ref(), op.expAvgSq.ref()}));
    }
    for (AdamWOp &op : ops) {
      TensorRef grad = op.aliasGrad >= 0 ? ops[op.aliasGrad].dParam : op.dGrad;
      std::vector<TensorRef> in = {grad, dStep};
      if (op.clip)
        in.push_back(dSumSquares);
      ASSERT_STATUS_OK(
          backend->runKernel("adamw", adamwAttributes(op.lr), in,
                             {op.dParam, op.dExpAvg, op.dExpAvgSq}));
    }
    // The first download runs the deferred ops.
    for (size_t i = 0; i < ops.size(); ++i) {
      std::string what = "parameter " + std::to_string(i) + " " +
                         shapeText(ops[i].param.shape);
      Buf param = ops[i].param, expAvg = ops[i].expAvg,
          expAvgSq = ops[i].expAvgSq;
      ASSERT_NO_FATAL_FAILURE(fromBackend(*backend, ops[i].dParam, param));
      ASSERT_NO_FATAL_FAILURE(fromBackend(*backend, ops[i].dExpAvg, expAvg));
      ASSERT_NO_FATAL_FAILURE(
          fromBackend(*backend, ops[i].dExpAvgSq, expAvgSq));
      EXPECT_TRUE(sameBytes(param, cpu[i].param)) << what << ": param";
      EXPECT_TRUE(sameBytes(expAvg, cpu[i].expAvg)) << what << ": exp_avg";
      EXPECT_TRUE(sameBytes(expAvgSq, cpu[i].expAvgSq))
          << what << ": exp_avg_sq";
    }
  }
  ASSERT_STATUS_OK(backend->synchronize());
}

TEST_F(CudaBackendTest, AdamWErrorsAtTheOp) {
  // A deferred op is checked when it is deferred, with runCudaKernel's
  // message; the ops deferred before it still run.
  AdamWOp good = adamwOp(DType::F32, {6, 5}, 300), cpu = good;
  good.dGrad = toBackend(*backend, good.grad);
  good.dParam = toBackend(*backend, good.param);
  good.dExpAvg = toBackend(*backend, good.expAvg);
  good.dExpAvgSq = toBackend(*backend, good.expAvgSq);
  Buf step = make(DType::I64, {}, {5});
  TensorRef dStep = toBackend(*backend, step);
  ASSERT_STATUS_OK(
      runCpuKernel("adamw", adamwAttributes(), {cpu.grad.ref(), step.ref()},
                   {cpu.param.ref(), cpu.expAvg.ref(), cpu.expAvgSq.ref()}));
  ASSERT_STATUS_OK(
      backend->runKernel("adamw", adamwAttributes(), {good.dGrad, dStep},
                         {good.dParam, good.dExpAvg, good.dExpAvgSq}));

  TensorRef badExpAvg = good.dExpAvg;
  badExpAvg.shape = {7};
  std::vector<TensorRef> in = {good.dGrad, dStep};
  std::vector<TensorRef> out = {good.dParam, badExpAvg, good.dExpAvgSq};
  Status deferred = backend->runKernel("adamw", adamwAttributes(), in, out);
  Status direct = runCudaKernel("adamw", adamwAttributes(), in, out, nullptr);
  ASSERT_NO_FATAL_FAILURE(expectError(deferred, "exp_avg has shape [7]"));
  ASSERT_FALSE(direct.isOk());
  EXPECT_EQ(deferred.message(), direct.message());
  ASSERT_NO_FATAL_FAILURE(
      expectError(backend->runKernel("adamw", {}, in, out), "lr"));

  Buf param = good.param;
  ASSERT_NO_FATAL_FAILURE(fromBackend(*backend, good.dParam, param));
  EXPECT_TRUE(sameBytes(param, cpu.param));
}

//===----------------------------------------------------------------------===//
// Offload and fetch in flight (PendingCopies)
//===----------------------------------------------------------------------===//

/// An offload, then a kernel and a zeroing that write over the offloaded
/// bytes at once; a fetch, then kernels that read the fetched bytes at
/// once: each must wait for its copy, and work on other bytes need not.
TEST_F(CudaBackendTest, OffloadAndFetchOrderWithTheKernelsThatTouchThem) {
  const Shape shape{1 << 22}; // 16 MiB: copies that take a while
  Buf x = random(DType::F32, shape, -1, 1, 21);
  Buf other = random(DType::F32, shape, -1, 1, 22);
  size_t bytes = size_t(x.size()) * sizeof(float);
  TensorRef dx = toBackend(*backend, x), dother = toBackend(*backend, other);
  TensorRef dy = toBackend(*backend, Buf(DType::F32, shape));
  TensorRef dz = toBackend(*backend, Buf(DType::F32, shape));
  void *host = nullptr;
  ASSERT_STATUS_OK(backend->allocateHost(bytes, 256, host));

  ASSERT_STATUS_OK(backend->offload(host, dx.data, bytes));
  // Not touching x: may overlap the copy.
  ASSERT_STATUS_OK(backend->runKernel("add", {}, {dother, dother}, {dz}));
  // Over x: waits for the offload's read.
  ASSERT_STATUS_OK(backend->runKernel("add", {}, {dother, dother}, {dx}));
  ASSERT_STATUS_OK(backend->fetch(dy.data, host, bytes));
  ASSERT_STATUS_OK(backend->runKernel("add", {}, {dy, dy}, {dz}));
  ASSERT_STATUS_OK(backend->offload(host, dz.data, bytes));
  ASSERT_STATUS_OK(backend->zero(dz.data, bytes));

  Buf want(DType::F32, shape), got(DType::F32, shape), twice(DType::F32, shape);
  ASSERT_STATUS_OK(
      runCpuKernel("add", {}, {x.ref(), x.ref()}, {want.ref()}));
  ASSERT_STATUS_OK(backend->synchronize());
  std::memcpy(got.bytes.data(), host, bytes); // the second offload: 2x
  EXPECT_TRUE(sameBytes(got, want));
  ASSERT_NO_FATAL_FAILURE(fromBackend(*backend, dy, got)); // the fetch: x
  EXPECT_TRUE(sameBytes(got, x));
  ASSERT_NO_FATAL_FAILURE(fromBackend(*backend, dz, got)); // zeroed
  EXPECT_TRUE(sameBytes(got, Buf(DType::F32, shape)));
  ASSERT_STATUS_OK(
      runCpuKernel("add", {}, {other.ref(), other.ref()}, {twice.ref()}));
  ASSERT_NO_FATAL_FAILURE(fromBackend(*backend, dx, got));
  EXPECT_TRUE(sameBytes(got, twice));
  backend->releaseHost(host);
}

} // namespace
