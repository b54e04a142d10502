//===- matmul.cpp - CUDA kernel of the batched matrix product (cuBLASLt) --===//
//
// lhs[..., M, K] x rhs[..., K, N] with numpy's batch broadcasting, as
// runtime/cpu/matmul.cpp, for f32, bf16 and f16 operands with f32
// accumulation (CUBLAS_COMPUTE_32F: no TF32) and a result of the operands'
// type. transpose_lhs / transpose_rhs read an operand as its transpose over
// the last two dimensions.
//
// cuBLASLt is column-major and our tensors are row-major: a row-major
// [R, C] matrix is a column-major [C, R] one, so out = lhs rhs is computed
// as out^T = rhs^T lhs^T, with rhs as cuBLASLt's A and lhs as its B, and the
// transposes carried by the operations. Batches:
//   - rhs without batch, lhs not transposed (a linear layer): one GEMM of
//     all lhs rows;
//   - otherwise a strided batch, an operand without batch given stride 0;
//   - batch dimensions that broadcast both ways: one GEMM per result batch.
//
// The cuBLASLt handle, the descriptors, the algorithm cuBLASLt's heuristic
// picks and a 32 MiB workspace are what a product needs besides its
// operands. With the caller's CudaContext (defined here) the handle and
// workspace are made once and the descriptors and algorithm once per
// problem: the plan cache's key is everything the heuristic is given
// (element type, transposes, layouts, batches, the operands' alignment), so
// a reused plan is the one a fresh call would make. Without a context they
// are made and destroyed per call (the workspace stream-ordered,
// cudaMallocAsync).
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/KernelArgs.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/CudaKernels.h"

#include <cublasLt.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>

using namespace cleave::runtime;
using namespace cleave::runtime::cuda;
using ops::KernelArgs;
using ops::Shape;

namespace {

constexpr size_t kWorkspaceBytes = size_t(32) << 20;

/// A column-major matrix operand of cuBLASLt: its stored rows, columns and
/// leading dimension, the batch stride in elements (0: one matrix for every
/// batch).
struct Matrix {
  uint64_t rows, cols;
  int64_t ld;
  int64_t batchStride;
};

Status makeLayout(cublasLtMatrixLayout_t &layout, cudaDataType type,
                  const Matrix &m, int32_t batches) {
  CLEAVE_CUDA_CHECK(
      cublasLtMatrixLayoutCreate(&layout, type, m.rows, m.cols, m.ld));
  if (batches > 1) {
    CLEAVE_CUDA_CHECK(cublasLtMatrixLayoutSetAttribute(
        layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batches, sizeof(batches)));
    CLEAVE_CUDA_CHECK(cublasLtMatrixLayoutSetAttribute(
        layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &m.batchStride,
        sizeof(m.batchStride)));
  }
  return Status::ok();
}

/// The largest power of two up to 256 dividing the address and the batch
/// stride in bytes: what cuBLASLt may assume of every batch's pointer.
uint32_t alignmentOf(const void *p, int64_t strideBytes) {
  uintptr_t bits =
      reinterpret_cast<uintptr_t>(p) | uintptr_t(strideBytes) | uintptr_t(256);
  return uint32_t(bits & (~bits + 1));
}

/// One cuBLASLt product, possibly batched, in cuBLASLt's terms:
/// D[n, m] = op(A) op(B) with A = rhs (op: transposeA) and B = lhs.
struct Product {
  cudaDataType type;
  size_t elementSize;
  bool transposeA, transposeB;
  Matrix a, b, c;
  int32_t batches;
};

/// What cuBLASLt's heuristic is asked: the product and its pointers'
/// alignments (A, B, C and D).
struct Problem {
  Product p;
  uint32_t alignA, alignB, alignC;
};

/// The descriptors of one problem and the algorithm chosen for it.
struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo = {};

  Plan() = default;
  Plan(const Plan &) = delete;
  Plan &operator=(const Plan &) = delete;
  ~Plan() {
    for (cublasLtMatrixLayout_t layout : {a, b, c})
      if (layout)
        (void)cublasLtMatrixLayoutDestroy(layout);
    if (op)
      (void)cublasLtMatmulDescDestroy(op);
  }
};

/// The heuristic's preference, destroyed on every way out.
struct Preference {
  cublasLtMatmulPreference_t pref = nullptr;
  ~Preference() {
    if (pref)
      (void)cublasLtMatmulPreferenceDestroy(pref);
  }
};

/// Makes the descriptors of `problem` and picks an algorithm for a
/// workspace of `workspaceBytes`.
Status makePlan(const KernelArgs &a, cublasLtHandle_t handle,
                const Problem &problem, size_t workspaceBytes, Plan &plan) {
  const Product &p = problem.p;
  CLEAVE_CUDA_CHECK(
      cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t opA = p.transposeA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = p.transposeB ? CUBLAS_OP_T : CUBLAS_OP_N;
  CLEAVE_CUDA_CHECK(cublasLtMatmulDescSetAttribute(
      plan.op, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof(opA)));
  CLEAVE_CUDA_CHECK(cublasLtMatmulDescSetAttribute(
      plan.op, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof(opB)));
  CLEAVE_CHECK(makeLayout(plan.a, p.type, p.a, p.batches));
  CLEAVE_CHECK(makeLayout(plan.b, p.type, p.b, p.batches));
  CLEAVE_CHECK(makeLayout(plan.c, p.type, p.c, p.batches));

  Preference preference;
  CLEAVE_CUDA_CHECK(cublasLtMatmulPreferenceCreate(&preference.pref));
  CLEAVE_CUDA_CHECK(cublasLtMatmulPreferenceSetAttribute(
      preference.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
      &workspaceBytes, sizeof(workspaceBytes)));
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] =
      {{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, problem.alignA},
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, problem.alignB},
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, problem.alignC},
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, problem.alignC}};
  for (const auto &[attribute, bytes] : alignments)
    CLEAVE_CUDA_CHECK(cublasLtMatmulPreferenceSetAttribute(
        preference.pref, attribute, &bytes, sizeof(bytes)));

  cublasLtMatmulHeuristicResult_t heuristic = {};
  int found = 0;
  CLEAVE_CUDA_CHECK(cublasLtMatmulAlgoGetHeuristic(
      handle, plan.op, plan.a, plan.b, plan.c, plan.c, preference.pref, 1,
      &heuristic, &found));
  if (found == 0)
    return a.error("cuBLASLt has no algorithm for this product (lhs " +
                   ops::shapeString(a.in(0).shape) + ", rhs " +
                   ops::shapeString(a.in(1).shape) + ", " +
                   dtypeName(a.in(0).dtype) + ")");
  plan.algo = heuristic.algo;
  return Status::ok();
}

/// The plan cache's key: every field of a Problem.
using PlanKey = std::array<int64_t, 19>;

PlanKey keyOf(const Problem &q) {
  const Product &p = q.p;
  PlanKey key;
  size_t at = 0;
  for (int64_t v : {int64_t(p.type), int64_t(p.transposeA),
                    int64_t(p.transposeB), int64_t(p.batches),
                    int64_t(q.alignA), int64_t(q.alignB), int64_t(q.alignC)})
    key[at++] = v;
  for (const Matrix *m : {&p.a, &p.b, &p.c})
    for (int64_t v :
         {int64_t(m->rows), int64_t(m->cols), m->ld, m->batchStride})
      key[at++] = v;
  return key;
}

/// A plan cache this large is cleared before it grows further (a program
/// has a few dozen problems; only a caller cycling through shapes gets
/// here).
constexpr size_t kMostPlans = 4096;

} // namespace

/// The context's cuBLASLt state.
struct CudaContext::Matmul {
  cublasLtHandle_t handle = nullptr;
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
  std::map<PlanKey, std::unique_ptr<Plan>> plans;
  int64_t made = 0, reused = 0;

  ~Matmul() {
    plans.clear();
    if (workspace)
      (void)cudaFree(workspace);
    if (handle)
      (void)cublasLtDestroy(handle);
  }

  /// The plan of `problem`, made on first use.
  Status plan(const KernelArgs &a, const Problem &problem, const Plan *&out) {
    PlanKey key = keyOf(problem);
    auto it = plans.find(key);
    if (it != plans.end()) {
      ++reused;
      out = it->second.get();
      return Status::ok();
    }
    auto made = std::make_unique<Plan>();
    CLEAVE_CHECK(makePlan(a, handle, problem, workspaceBytes, *made));
    if (plans.size() >= kMostPlans)
      plans.clear(); // enqueued products no longer need their descriptors
    out = made.get();
    plans.emplace(key, std::move(made));
    ++this->made;
    return Status::ok();
  }
};

CudaContext::CudaContext() : matmul_(std::make_unique<Matmul>()) {}
CudaContext::~CudaContext() = default;

Status CudaContext::create(std::unique_ptr<CudaContext> &context) {
  std::unique_ptr<CudaContext> made(new CudaContext());
  Matmul &m = *made->matmul_;
  CLEAVE_CUDA_CHECK(cublasLtCreate(&m.handle));
  if (cudaMalloc(&m.workspace, kWorkspaceBytes) == cudaSuccess) {
    m.workspaceBytes = kWorkspaceBytes;
  } else {
    (void)cudaGetLastError();
    m.workspace = nullptr;
  }
  context = std::move(made);
  return Status::ok();
}

int64_t CudaContext::matmulPlansMade() const { return matmul_->made; }
int64_t CudaContext::matmulPlansReused() const { return matmul_->reused; }

namespace {

/// A call's own handle and workspace, when there is no context.
struct OwnState {
  cublasLtHandle_t handle = nullptr;
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
  cudaStream_t stream = nullptr;

  ~OwnState() {
    if (workspace)
      (void)cudaFreeAsync(workspace, stream);
    if (handle)
      (void)cublasLtDestroy(handle);
  }
};

/// cleave.matmul with the context's handle, workspace and plans, or
/// (null `context`) its own.
Status matmulOn(const KernelArgs &a, cudaStream_t stream,
                CudaContext::Matmul *context) {
  // The CPU kernel's checks.
  const TensorRef &lhs = a.in(0), &rhs = a.in(1), &out = a.out();
  if (lhs.rank() < 2 || rhs.rank() < 2)
    return a.error("operands must have rank 2 or more, got shapes " +
                   ops::shapeString(lhs.shape) + " and " +
                   ops::shapeString(rhs.shape));
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
    return a.error("lhs of shape " + ops::shapeString(lhs.shape) +
                   " and rhs of shape " + ops::shapeString(rhs.shape) +
                   " do not agree on the contracted dimension (" +
                   std::to_string(k) + " vs " + std::to_string(rk) + ")");
  Shape lhsBatch(lhs.shape.begin(), lhs.shape.end() - 2);
  Shape rhsBatch(rhs.shape.begin(), rhs.shape.end() - 2);
  Shape outBatch;
  if (!ops::broadcastShapes(lhsBatch, rhsBatch, outBatch))
    return a.error("batch dimensions " + ops::shapeString(lhsBatch) + " and " +
                   ops::shapeString(rhsBatch) + " do not broadcast");
  Shape expected = outBatch;
  expected.push_back(m);
  expected.push_back(n);
  CLEAVE_CHECK(a.expectShape(out, expected, "the result"));

  Product p;
  switch (lhs.dtype) {
  case DType::F32:
    p.type = CUDA_R_32F;
    break;
  case DType::BF16:
    p.type = CUDA_R_16BF;
    break;
  case DType::F16:
    p.type = CUDA_R_16F;
    break;
  default:
    return a.error(std::string("no CUDA kernel for element type ") +
                   dtypeName(lhs.dtype) +
                   " (lhs); the CUDA kernels take f32, bf16 and f16");
  }
  p.elementSize = dtypeSize(lhs.dtype);
  int64_t batches = ops::product(outBatch);
  int64_t lhsCount = ops::product(lhsBatch), rhsCount = ops::product(rhsBatch);
  if (batches == 0 || m == 0 || n == 0)
    return Status::ok();
  if (k == 0) { // an empty sum: zeros (+0.0 is all-zero bits in every type)
    CLEAVE_CUDA_CHECK(cudaMemsetAsync(out.data, 0, out.sizeBytes(), stream));
    return Status::ok();
  }

  // A linear layer: every lhs row against one rhs, as one GEMM.
  bool stacked = rhsCount == 1 && lhsCount == batches && !transLhs;
  int64_t rows = stacked ? batches * m : m;
  // A strided batch covers every case where each operand has the result's
  // batches or a single matrix; otherwise one product per result batch.
  bool strided = !stacked && (lhsCount == batches || lhsCount == 1) &&
                 (rhsCount == batches || rhsCount == 1);
  int64_t perCall = stacked || !strided ? 1 : batches;
  int64_t most = INT32_MAX;
  if (rows > most || n > most || k > most || perCall > most)
    return a.error("a dimension of the product exceeds 2^31 - 1");

  // out^T[n, rows] = op(rhs^T) op(lhs^T), column-major.
  p.transposeA = transRhs;
  p.a = {uint64_t(transRhs ? k : n), uint64_t(transRhs ? n : k),
         transRhs ? k : n, rhsCount == 1 ? 0 : k * n};
  p.transposeB = transLhs;
  p.b = {uint64_t(transLhs ? m : k), uint64_t(transLhs ? k : rows),
         transLhs ? m : k, lhsCount == 1 ? 0 : m * k};
  p.c = {uint64_t(n), uint64_t(rows), n, m * n};
  p.batches = int32_t(perCall);

  const char *lhsData = static_cast<const char *>(lhs.data);
  const char *rhsData = static_cast<const char *>(rhs.data);
  char *outData = static_cast<char *>(out.data);
  int64_t size = int64_t(p.elementSize);
  // Per-batch products start at multiples of one matrix.
  int64_t lhsStep = perCall > 1 || !strided ? m * k * size : 0;
  int64_t rhsStep = perCall > 1 || !strided ? k * n * size : 0;
  int64_t outStep = perCall > 1 || !strided ? m * n * size : 0;

  Problem problem{p, alignmentOf(rhsData, rhsStep),
                  alignmentOf(lhsData, lhsStep), alignmentOf(outData, outStep)};
  OwnState own; // without a context: this call's handle and workspace
  Plan ownPlan;
  const Plan *plan = &ownPlan;
  if (context) {
    CLEAVE_CHECK(context->plan(a, problem, plan));
  } else {
    own.stream = stream;
    CLEAVE_CUDA_CHECK(cublasLtCreate(&own.handle));
    // The workspace is optional: without the stream-ordered allocator (or
    // memory for it), cuBLASLt picks among the algorithms that need none.
    if (cudaMallocAsync(&own.workspace, kWorkspaceBytes, stream) ==
        cudaSuccess) {
      own.workspaceBytes = kWorkspaceBytes;
    } else {
      (void)cudaGetLastError();
      own.workspace = nullptr;
    }
    CLEAVE_CHECK(makePlan(a, own.handle, problem, own.workspaceBytes, ownPlan));
  }
  cublasLtHandle_t handle = context ? context->handle : own.handle;
  void *workspace = context ? context->workspace : own.workspace;
  size_t workspaceBytes =
      context ? context->workspaceBytes : own.workspaceBytes;

  const float one = 1.0f, zero = 0.0f;
  auto product = [&](const char *l, const char *r, char *o) -> Status {
    CLEAVE_CUDA_CHECK(cublasLtMatmul(
        handle, plan->op, &one, r, plan->a, l, plan->b, &zero, o, plan->c, o,
        plan->c, &plan->algo, workspace, workspaceBytes, stream));
    return Status::ok();
  };
  if (stacked || strided)
    return product(lhsData, rhsData, outData);
  // Batch dimensions broadcasting both ways: the CPU's batch plan.
  ops::BroadcastPlan broadcast =
      ops::makeBroadcastPlan({lhsBatch, rhsBatch}, outBatch);
  for (int64_t row = 0, batch = 0; row < broadcast.rows; ++row) {
    int64_t l = broadcast.rowOffset(0, row), r = broadcast.rowOffset(1, row);
    for (int64_t j = 0; j < broadcast.inner; ++j, ++batch)
      CLEAVE_CHECK(
          product(lhsData + (l + j * broadcast.innerStride[0]) * m * k * size,
                  rhsData + (r + j * broadcast.innerStride[1]) * k * n * size,
                  outData + batch * m * n * size));
  }
  return Status::ok();
}

} // namespace

namespace cleave::runtime::cuda {

Status matmulKernel(const KernelArgs &a, cudaStream_t stream) {
  return matmulOn(a, stream, nullptr);
}

Status matmulKernelInContext(const KernelArgs &a, cudaStream_t stream,
                             CudaContext &context) {
  return matmulOn(a, stream, &context.matmul());
}

} // namespace cleave::runtime::cuda
