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
// The cuBLASLt handle, descriptors and the 32 MiB workspace (stream-ordered
// cudaMallocAsync) are made per call: there is no global state, and no
// Context object owns them yet.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelSupport.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/CudaKernels.h"

#include <cublasLt.h>

#include <cstdint>

using namespace cleave::runtime;
using namespace cleave::runtime::cuda;
using cpu::KernelArgs;
using cpu::Shape;

namespace {

constexpr size_t kWorkspaceBytes = size_t(32) << 20;

/// What cuBLASLt objects the call makes, destroyed on every way out.
struct LtObjects {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  void *workspace = nullptr;
  cudaStream_t stream = nullptr;

  ~LtObjects() {
    if (workspace)
      (void)cudaFreeAsync(workspace, stream);
    if (preference)
      (void)cublasLtMatmulPreferenceDestroy(preference);
    for (cublasLtMatrixLayout_t layout : {a, b, c})
      if (layout)
        (void)cublasLtMatrixLayoutDestroy(layout);
    if (op)
      (void)cublasLtMatmulDescDestroy(op);
    if (handle)
      (void)cublasLtDestroy(handle);
  }
};

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

/// Sets up the descriptors, picks an algorithm for pointers of the given
/// alignment, then runs `run(algo)` (once, or once per batch).
template <typename Run>
Status withAlgorithm(const KernelArgs &a, LtObjects &lt, const Product &p,
                     uint32_t alignA, uint32_t alignB, uint32_t alignC,
                     Run &&run) {
  CLEAVE_CUDA_CHECK(cublasLtCreate(&lt.handle));
  CLEAVE_CUDA_CHECK(
      cublasLtMatmulDescCreate(&lt.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t opA = p.transposeA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = p.transposeB ? CUBLAS_OP_T : CUBLAS_OP_N;
  CLEAVE_CUDA_CHECK(cublasLtMatmulDescSetAttribute(
      lt.op, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof(opA)));
  CLEAVE_CUDA_CHECK(cublasLtMatmulDescSetAttribute(
      lt.op, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof(opB)));
  CLEAVE_CHECK(makeLayout(lt.a, p.type, p.a, p.batches));
  CLEAVE_CHECK(makeLayout(lt.b, p.type, p.b, p.batches));
  CLEAVE_CHECK(makeLayout(lt.c, p.type, p.c, p.batches));

  // The workspace is optional: without the stream-ordered allocator (or
  // memory for it), cuBLASLt picks among the algorithms that need none.
  size_t workspaceBytes = kWorkspaceBytes;
  if (cudaMallocAsync(&lt.workspace, workspaceBytes, lt.stream) !=
      cudaSuccess) {
    (void)cudaGetLastError();
    lt.workspace = nullptr;
    workspaceBytes = 0;
  }
  CLEAVE_CUDA_CHECK(cublasLtMatmulPreferenceCreate(&lt.preference));
  CLEAVE_CUDA_CHECK(cublasLtMatmulPreferenceSetAttribute(
      lt.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspaceBytes,
      sizeof(workspaceBytes)));
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] =
      {{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignA},
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignB},
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignC},
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignC}};
  for (const auto &[attribute, bytes] : alignments)
    CLEAVE_CUDA_CHECK(cublasLtMatmulPreferenceSetAttribute(
        lt.preference, attribute, &bytes, sizeof(bytes)));

  cublasLtMatmulHeuristicResult_t heuristic = {};
  int found = 0;
  CLEAVE_CUDA_CHECK(cublasLtMatmulAlgoGetHeuristic(lt.handle, lt.op, lt.a, lt.b,
                                                   lt.c, lt.c, lt.preference, 1,
                                                   &heuristic, &found));
  if (found == 0)
    return a.error("cuBLASLt has no algorithm for this product (lhs " +
                   cpu::shapeString(a.in(0).shape) + ", rhs " +
                   cpu::shapeString(a.in(1).shape) + ", " +
                   dtypeName(a.in(0).dtype) + ")");
  return run(heuristic.algo, workspaceBytes);
}

} // namespace

namespace cleave::runtime::cuda {

Status matmulKernel(const KernelArgs &a, cudaStream_t stream) {
  // The CPU kernel's checks.
  const TensorRef &lhs = a.in(0), &rhs = a.in(1), &out = a.out();
  if (lhs.rank() < 2 || rhs.rank() < 2)
    return a.error("operands must have rank 2 or more, got shapes " +
                   cpu::shapeString(lhs.shape) + " and " +
                   cpu::shapeString(rhs.shape));
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
    return a.error("lhs of shape " + cpu::shapeString(lhs.shape) +
                   " and rhs of shape " + cpu::shapeString(rhs.shape) +
                   " do not agree on the contracted dimension (" +
                   std::to_string(k) + " vs " + std::to_string(rk) + ")");
  Shape lhsBatch(lhs.shape.begin(), lhs.shape.end() - 2);
  Shape rhsBatch(rhs.shape.begin(), rhs.shape.end() - 2);
  Shape outBatch;
  if (!cpu::broadcastShapes(lhsBatch, rhsBatch, outBatch))
    return a.error("batch dimensions " + cpu::shapeString(lhsBatch) + " and " +
                   cpu::shapeString(rhsBatch) + " do not broadcast");
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
  int64_t batches = cpu::product(outBatch);
  int64_t lhsCount = cpu::product(lhsBatch), rhsCount = cpu::product(rhsBatch);
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

  LtObjects lt;
  lt.stream = stream;
  const float one = 1.0f, zero = 0.0f;
  return withAlgorithm(
      a, lt, p, alignmentOf(rhsData, rhsStep), alignmentOf(lhsData, lhsStep),
      alignmentOf(outData, outStep),
      [&](const cublasLtMatmulAlgo_t &algo, size_t workspaceBytes) -> Status {
        auto product = [&](const char *l, const char *r, char *o) -> Status {
          CLEAVE_CUDA_CHECK(cublasLtMatmul(
              lt.handle, lt.op, &one, r, lt.a, l, lt.b, &zero, o, lt.c, o, lt.c,
              &algo, lt.workspace, workspaceBytes, stream));
          return Status::ok();
        };
        if (stacked || strided)
          return product(lhsData, rhsData, outData);
        // Batch dimensions broadcasting both ways: the CPU's batch plan.
        cpu::BroadcastPlan plan =
            cpu::makeBroadcastPlan({lhsBatch, rhsBatch}, outBatch);
        for (int64_t row = 0, batch = 0; row < plan.rows; ++row) {
          int64_t l = plan.rowOffset(0, row), r = plan.rowOffset(1, row);
          for (int64_t j = 0; j < plan.inner; ++j, ++batch)
            CLEAVE_CHECK(
                product(lhsData + (l + j * plan.innerStride[0]) * m * k * size,
                        rhsData + (r + j * plan.innerStride[1]) * k * n * size,
                        outData + batch * m * n * size));
        }
        return Status::ok();
      });
}

} // namespace cleave::runtime::cuda
