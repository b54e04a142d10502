//===- matmul.cpp - CPU kernel of the batched matrix product (OpenBLAS) ---===//
//
// lhs[..., M, K] x rhs[..., K, N] with numpy's batch broadcasting, through
// cblas_sgemm (dgemm for f64; f16 and bf16 are widened to float around an
// sgemm). When rhs has no batch (a linear layer: x[B, T, K] x W[K, N]) the
// whole product is one GEMM of B*T rows.
//
// Threads: every GEMM is split by this file over the OpenMP threads, each
// calling a single-threaded OpenBLAS on its block (a grid of row and column
// blocks chosen to copy the least operand data; batches of small products
// go one product per thread). OpenBLAS's own thread pool is switched off:
// with both pools, the OpenMP threads spinning between kernels take the
// cores OpenBLAS's threads need.
//
// Optional attributes transpose_lhs / transpose_rhs (i) read an operand as
// its transpose over the last two dimensions, so that a graph can hand a
// [N, K] weight to the product without a transpose kernel.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"

#include <cblas.h>

#include <climits>
#include <mutex>

using namespace cleave::runtime;
using namespace cleave::runtime::cpu;
using namespace cleave::runtime::ops;

namespace {

/// Products with at most this many multiply-adds run on one thread (as
/// OpenBLAS itself decides: 65536 * GEMM_MULTITHREAD_THRESHOLD).
constexpr int64_t kSingleThreadedGemm = 262144;

/// One matrix operand: its data and whether it is stored transposed.
template <typename T> struct Operand {
  const T *data;
  bool transposed;
  int64_t ld; // leading dimension of the stored matrix
};

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a,
          int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, blasint(m), blasint(n),
              blasint(k), 1.0f, a, blasint(lda), b, blasint(ldb), 0.0f, c,
              blasint(ldc));
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double *a,
          int64_t lda, const double *b, int64_t ldb, double *c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, blasint(m), blasint(n),
              blasint(k), 1.0, a, blasint(lda), b, blasint(ldb), 0.0, c,
              blasint(ldc));
}

/// C[m, n] = A B, split over up to `threads` OpenMP threads as a grid of
/// row blocks x column blocks. Each block packs its rows of A and columns
/// of B, so the grid minimizes m k (columns) + k n (rows) over the
/// factorizations of the thread count, keeping blocks at least 16 wide.
template <typename T>
void parallelGemm(int64_t m, int64_t n, int64_t k, Operand<T> a, Operand<T> b,
                  T *c, int64_t threads) {
  auto block = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    const T *ab = a.transposed ? a.data + r0 : a.data + r0 * a.ld;
    const T *bb = b.transposed ? b.data + c0 * b.ld : b.data + c0;
    gemm(a.transposed, b.transposed, r1 - r0, c1 - c0, k, ab, a.ld, bb, b.ld,
         c + r0 * n + c0, n);
  };
  threads = std::min<int64_t>(
      threads, std::max<int64_t>(1, m * n * k / kSingleThreadedGemm));
  if (threads <= 1) {
    block(0, m, 0, n);
    return;
  }
  int64_t rowsBlocks = 1, colBlocks = threads;
  double best = -1;
  for (int64_t r = 1; r <= threads; ++r) {
    if (threads % r)
      continue;
    int64_t cb = threads / r;
    if ((r > 1 && m / r < 16) || (cb > 1 && n / cb < 16))
      continue;
    double copied = double(m) * k * cb + double(k) * n * r;
    if (best < 0 || copied < best) {
      best = copied;
      rowsBlocks = r;
      colBlocks = cb;
    }
  }
  if (best < 0) { // too narrow for a grid: split the longer side
    rowsBlocks = m >= n ? std::min<int64_t>(threads, m) : 1;
    colBlocks = m >= n ? 1 : std::min<int64_t>(threads, n);
  }
  // Column boundaries on multiples of 16 elements (whole cache lines).
  auto colEdge = [&](int64_t j) {
    int64_t e = n * j / colBlocks;
    return j == colBlocks ? n : std::min(n, (e + 15) / 16 * 16);
  };
#pragma omp parallel for collapse(2) num_threads(rowsBlocks *colBlocks)        \
    schedule(static)
  for (int64_t i = 0; i < rowsBlocks; ++i)
    for (int64_t j = 0; j < colBlocks; ++j) {
      int64_t c0 = colEdge(j), c1 = colEdge(j + 1);
      if (c1 > c0)
        block(m * i / rowsBlocks, m * (i + 1) / rowsBlocks, c0, c1);
    }
}

/// Where each batch of the result reads its operands.
struct BatchPlan {
  int64_t count = 1;
  std::vector<int64_t> lhsBatch, rhsBatch; // batch indices into lhs/rhs
  bool lhsStacked = false; // one GEMM: rhs has no batch, lhs is not broadcast
};

BatchPlan planBatches(const Shape &lhsBatch, const Shape &rhsBatch,
                      const Shape &outBatch, bool lhsTransposed) {
  BatchPlan plan;
  plan.count = product(outBatch);
  int64_t lhsCount = product(lhsBatch), rhsCount = product(rhsBatch);
  if (rhsCount == 1 && lhsCount == plan.count && !lhsTransposed) {
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
                 bool transLhs, bool transRhs, const T *lhs, const T *rhs,
                 T *out) {
  if (plan.count == 0 || m == 0 || n == 0)
    return;
  if (k == 0) {
    std::fill(out, out + plan.count * m * n, T(0));
    return;
  }
  singleThreadedBlas();
  int64_t threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  Operand<T> a{lhs, transLhs, transLhs ? m : k};
  Operand<T> b{rhs, transRhs, transRhs ? k : n};
  if (plan.lhsStacked) {
    parallelGemm(plan.count * m, n, k, a, b, out, threads);
    return;
  }
  auto one = [&](int64_t batch, int64_t threadsForIt) {
    Operand<T> ab = a, bb = b;
    ab.data += plan.lhsBatch[batch] * m * k;
    bb.data += plan.rhsBatch[batch] * k * n;
    parallelGemm(m, n, k, ab, bb, out + batch * m * n, threadsForIt);
  };
  // Batches over threads when there are enough of them; otherwise one
  // product at a time, each over all threads.
  if (plan.count >= threads || m * n * k <= kSingleThreadedGemm) {
#pragma omp parallel for schedule(dynamic, 1) if (threads > 1)
    for (int64_t batch = 0; batch < plan.count; ++batch)
      one(batch, 1);
  } else {
    for (int64_t batch = 0; batch < plan.count; ++batch)
      one(batch, threads);
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

/// OpenBLAS runs on the calling thread from now on (see the file comment).
void cpu::singleThreadedBlas() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

Status cpu::matmulKernel(const KernelArgs &a) {
  const TensorRef &lhs = a.in(0), &rhs = a.in(1), &out = a.out();
  if (lhs.rank() < 2 || rhs.rank() < 2)
    return a.error("operands must have rank 2 or more, got shapes " +
                   shapeString(lhs.shape) + " and " + shapeString(rhs.shape));
  CLEAVE_CHECK(a.expectDType(rhs, lhs.dtype, "rhs"));
  CLEAVE_CHECK(a.expectDType(out, lhs.dtype, "the result"));
  int64_t transLhs, transRhs;
  CLEAVE_CHECK(a.intAttr("transpose_lhs", transLhs, 0));
  CLEAVE_CHECK(a.intAttr("transpose_rhs", transRhs, 0));
  int64_t lr = lhs.rank(), rr = rhs.rank();
  int64_t m = lhs.shape[lr - (transLhs ? 1 : 2)];
  int64_t k = lhs.shape[lr - (transLhs ? 2 : 1)];
  int64_t rk = rhs.shape[rr - (transRhs ? 1 : 2)];
  int64_t n = rhs.shape[rr - (transRhs ? 2 : 1)];
  if (rk != k)
    return a.error("lhs of shape " + shapeString(lhs.shape) +
                   " and rhs of shape " + shapeString(rhs.shape) +
                   " do not agree on the contracted dimension (" +
                   std::to_string(k) + " vs " + std::to_string(rk) + ")");
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
  BatchPlan plan = planBatches(lhsBatch, rhsBatch, outBatch, transLhs);

  switch (lhs.dtype) {
  case DType::F32:
    batchedGemm(plan, m, n, k, transLhs, transRhs, lhs.as<float>(),
                rhs.as<float>(), out.as<float>());
    return Status::ok();
  case DType::F64:
    batchedGemm(plan, m, n, k, transLhs, transRhs, lhs.as<double>(),
                rhs.as<double>(), out.as<double>());
    return Status::ok();
  case DType::F16:
  case DType::BF16: {
    bool half = lhs.dtype == DType::F16;
    std::vector<float> l = half ? widen<Half>(lhs) : widen<BFloat16>(lhs);
    std::vector<float> r = half ? widen<Half>(rhs) : widen<BFloat16>(rhs);
    std::vector<float> o(out.numElements());
    batchedGemm(plan, m, n, k, transLhs, transRhs, l.data(), r.data(),
                o.data());
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
