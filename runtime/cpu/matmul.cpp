//===- matmul.cpp - CPU kernel of the batched matrix product (OpenBLAS) ---===//
//
// lhs[..., M, K] x rhs[..., K, N] with numpy's batch broadcasting, through
// cblas_sgemm (dgemm for f64; f16 and bf16 are widened to float around an
// sgemm). When rhs has no batch (a linear layer: x[B, T, K] x W[K, N]) the
// whole product is one GEMM of B*T rows, which OpenBLAS threads itself.
// Batches of small products, which OpenBLAS runs on one thread each, are
// spread over OpenMP threads instead; large ones run one after the other,
// each threaded by OpenBLAS.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"

#include <cblas.h>

#include <climits>

using namespace cleave::runtime;
using namespace cleave::runtime::cpu;

namespace {

/// OpenBLAS runs a GEMM of at most this many multiply-adds on the calling
/// thread (65536 * GEMM_MULTITHREAD_THRESHOLD, which defaults to 4).
constexpr int64_t kSingleThreadedGemm = 262144;

void gemm(int64_t m, int64_t n, int64_t k, const float *a, const float *b,
          float *c) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blasint(m), blasint(n),
              blasint(k), 1.0f, a, blasint(k), b, blasint(n), 0.0f, c,
              blasint(n));
}

void gemm(int64_t m, int64_t n, int64_t k, const double *a, const double *b,
          double *c) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blasint(m), blasint(n),
              blasint(k), 1.0, a, blasint(k), b, blasint(n), 0.0, c,
              blasint(n));
}

/// Where each batch of the result reads its operands.
struct BatchPlan {
  int64_t count = 1;
  std::vector<int64_t> lhsBatch, rhsBatch; // batch indices into lhs/rhs
  bool lhsStacked = false; // one GEMM: rhs has no batch, lhs is not broadcast
};

BatchPlan planBatches(const Shape &lhsBatch, const Shape &rhsBatch,
                      const Shape &outBatch) {
  BatchPlan plan;
  plan.count = product(outBatch);
  int64_t lhsCount = product(lhsBatch), rhsCount = product(rhsBatch);
  if (rhsCount == 1 && lhsCount == plan.count) {
    plan.lhsStacked = true;
    return plan;
  }
  BroadcastPlan b = makeBroadcastPlan({lhsBatch, rhsBatch}, outBatch);
  plan.lhsBatch.resize(plan.count);
  plan.rhsBatch.resize(plan.count);
  for (int64_t row = 0, i = 0; row < b.rows; ++row) {
    int64_t l = b.rowOffset(0, row), r = b.rowOffset(1, row);
    for (int64_t j = 0; j < b.inner; ++j, ++i) {
      plan.lhsBatch[i] = l + j * b.innerStride[0];
      plan.rhsBatch[i] = r + j * b.innerStride[1];
    }
  }
  return plan;
}

template <typename T>
void batchedGemm(const BatchPlan &plan, int64_t m, int64_t n, int64_t k,
                 const T *lhs, const T *rhs, T *out) {
  if (plan.count == 0 || m == 0 || n == 0)
    return;
  if (k == 0) {
    std::fill(out, out + plan.count * m * n, T(0));
    return;
  }
  if (plan.lhsStacked) {
    gemm(plan.count * m, n, k, lhs, rhs, out);
    return;
  }
  auto one = [&](int64_t b) {
    gemm(m, n, k, lhs + plan.lhsBatch[b] * m * k,
         rhs + plan.rhsBatch[b] * k * n, out + b * m * n);
  };
  if (m * n * k <= kSingleThreadedGemm && plan.count > 1 &&
      !omp_in_parallel()) {
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t b = 0; b < plan.count; ++b)
      one(b);
  } else {
    for (int64_t b = 0; b < plan.count; ++b)
      one(b);
  }
}

template <typename T> std::vector<float> widen(const TensorRef &t) {
  std::vector<float> v(t.numElements());
  const T *p = t.as<T>();
  parallelRange(int64_t(v.size()), kElementwiseGrain,
                [&](int64_t begin, int64_t end) {
                  for (int64_t i = begin; i < end; ++i)
                    v[i] = load(p[i]);
                });
  return v;
}

} // namespace

Status cpu::matmulKernel(const KernelArgs &a) {
  const TensorRef &lhs = a.in(0), &rhs = a.in(1), &out = a.out();
  if (lhs.rank() < 2 || rhs.rank() < 2)
    return a.error("operands must have rank 2 or more, got shapes " +
                   shapeString(lhs.shape) + " and " + shapeString(rhs.shape));
  CLEAVE_CHECK(a.expectDType(rhs, lhs.dtype, "rhs"));
  CLEAVE_CHECK(a.expectDType(out, lhs.dtype, "the result"));
  int64_t m = lhs.shape[lhs.rank() - 2], k = lhs.shape[lhs.rank() - 1];
  int64_t n = rhs.shape[rhs.rank() - 1];
  if (rhs.shape[rhs.rank() - 2] != k)
    return a.error("lhs of shape " + shapeString(lhs.shape) +
                   " and rhs of shape " + shapeString(rhs.shape) +
                   " do not agree on the contracted dimension (" +
                   std::to_string(k) + " vs " +
                   std::to_string(rhs.shape[rhs.rank() - 2]) + ")");
  Shape lhsBatch(lhs.shape.begin(), lhs.shape.end() - 2);
  Shape rhsBatch(rhs.shape.begin(), rhs.shape.end() - 2);
  Shape outBatch;
  if (!broadcastShapes(lhsBatch, rhsBatch, outBatch))
    return a.error("batch dimensions " + shapeString(lhsBatch) + " and " +
                   shapeString(rhsBatch) + " do not broadcast");
  Shape expected = outBatch;
  expected.push_back(m);
  expected.push_back(n);
  CLEAVE_CHECK(a.expectShape(out, expected, "the result"));
  int64_t rows = product(lhsBatch) * m;
  if (rows > INT_MAX || n > INT_MAX || k > INT_MAX)
    return a.error("a matrix dimension exceeds what BLAS indexes (2^31 - 1)");
  BatchPlan plan = planBatches(lhsBatch, rhsBatch, outBatch);

  switch (lhs.dtype) {
  case DType::F32:
    batchedGemm(plan, m, n, k, lhs.as<float>(), rhs.as<float>(),
                out.as<float>());
    return Status::ok();
  case DType::F64:
    batchedGemm(plan, m, n, k, lhs.as<double>(), rhs.as<double>(),
                out.as<double>());
    return Status::ok();
  case DType::F16:
  case DType::BF16: {
    bool half = lhs.dtype == DType::F16;
    std::vector<float> l = half ? widen<Half>(lhs) : widen<BFloat16>(lhs);
    std::vector<float> r = half ? widen<Half>(rhs) : widen<BFloat16>(rhs);
    std::vector<float> o(out.numElements());
    batchedGemm(plan, m, n, k, l.data(), r.data(), o.data());
    parallelRange(int64_t(o.size()), kElementwiseGrain,
                  [&](int64_t begin, int64_t end) {
                    for (int64_t i = begin; i < end; ++i) {
                      if (half)
                        out.as<Half>()[i] = floatToHalf(o[i]);
                      else
                        out.as<BFloat16>()[i] = floatToBf16(o[i]);
                    }
                  });
    return Status::ok();
  }
  default:
    return a.unsupported(lhs.dtype, "lhs");
  }
}
