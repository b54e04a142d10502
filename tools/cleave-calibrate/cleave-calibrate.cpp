//===- cleave-calibrate.cpp - measures the rates the cost model uses ------===//
//
// cleave-calibrate [--threads N] [--seconds S] -o rates.json
// mpirun -np 2 cleave-calibrate ... also measures the link between ranks.
//
// Times the CPU backend's own kernels: a 1024^3 f32 matrix product (the
// FLOP/s of products) and an elementwise add over 64 MiB operands (bytes
// read and written per second) and a 64 MiB memory copy (the host copies
// of activation offload); under mpirun with two or more ranks, a
// ping-pong of 16 MiB and of 8 bytes between ranks 0 and 1 (the link's
// bandwidth and latency). Rank 0 writes the rates as JSON, the format
// `cleave-compile --rates` reads (passes/CostModel.h). Without a second
// rank the link is not measured and the file says the default it keeps.
//
//===----------------------------------------------------------------------===//

#include "runtime/Communicator.h"
#include "runtime/cpu/Kernels.h"

#include <mpi.h>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace cleave::runtime;

namespace {

const char *kUsage =
    "usage: cleave-calibrate [--threads N] [--seconds S] -o rates.json\n"
    "  measures matrix-product FLOP/s and memory bytes/s of the CPU backend\n"
    "  (and, under mpirun with 2+ ranks, the link between ranks 0 and 1);\n"
    "  give the file to cleave-compile --rates\n";

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Repeats `body` until `seconds` have passed (at least twice, after one
/// warm-up call); the mean seconds per call.
template <typename F> Status timeIt(double seconds, double &perCall, F body) {
  CLEAVE_CHECK(body());
  int calls = 0;
  double start = now(), elapsed = 0;
  while (calls < 2 || elapsed < seconds) {
    CLEAVE_CHECK(body());
    ++calls;
    elapsed = now() - start;
  }
  perCall = elapsed / calls;
  return Status::ok();
}

struct Flags {
  int threads = 0;
  double seconds = 1.0;
  std::string output;
  bool help = false;
};

Status parse(int argc, char **argv, Flags &flags) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](std::string &out) -> Status {
      if (i + 1 >= argc)
        return Status::error(arg + " needs a value");
      out = argv[++i];
      return Status::ok();
    };
    std::string v;
    if (arg == "-h" || arg == "--help") {
      flags.help = true;
    } else if (arg == "-o") {
      CLEAVE_CHECK(value(flags.output));
    } else if (arg == "--threads") {
      CLEAVE_CHECK(value(v));
      char *end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (*end || n < 1 || n > 4096)
        return Status::error("--threads expects a count of at least 1, got '" +
                             v + "'");
      flags.threads = int(n);
    } else if (arg == "--seconds") {
      CLEAVE_CHECK(value(v));
      char *end = nullptr;
      double s = std::strtod(v.c_str(), &end);
      if (*end || !(s > 0) || s > 600)
        return Status::error("--seconds expects a time in (0, 600], got '" +
                             v + "'");
      flags.seconds = s;
    } else {
      return Status::error("unknown argument '" + arg + "'\n" + kUsage);
    }
  }
  if (!flags.help && flags.output.empty())
    return Status::error("give the output file with -o rates.json\n" +
                         std::string(kUsage));
  return Status::ok();
}

Status calibrate(const Flags &flags, Communicator &comm) {
  if (flags.threads > 0)
    omp_set_num_threads(flags.threads);
  // Products: [n, n] x [n, n].
  const int64_t n = 1024;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  TensorRef ta{a.data(), {n, n}, DType::F32}, tb{b.data(), {n, n}, DType::F32},
      tc{c.data(), {n, n}, DType::F32};
  double matmul = 0;
  CLEAVE_CHECK(timeIt(flags.seconds, matmul, [&] {
    return runCpuKernel("matmul", {}, {ta, tb}, {tc});
  }));
  double flops = 2.0 * n * n * n / matmul;
  // Memory: c = a + b over 16M floats (64 MiB each).
  const int64_t m = int64_t(16) << 20;
  std::vector<float> x(m, 1.0f), y(m, 2.0f), z(m);
  TensorRef tx{x.data(), {m}, DType::F32}, ty{y.data(), {m}, DType::F32},
      tz{z.data(), {m}, DType::F32};
  double add = 0;
  CLEAVE_CHECK(timeIt(flags.seconds, add, [&] {
    return runCpuKernel("add", {}, {tx, ty}, {tz});
  }));
  double bytes = 3.0 * m * sizeof(float) / add;
  // Host copies (activation offload): on the CPU backends a memory copy on
  // one thread (cpu-staged's upload and download), counted once.
  double copy = 0;
  CLEAVE_CHECK(timeIt(flags.seconds, copy, [&] {
    std::memcpy(z.data(), x.data(), size_t(m) * sizeof(float));
    return Status::ok();
  }));
  double host = double(m) * sizeof(float) / copy;

  // The link: rank 0 and 1 ping-pong; the others wait.
  double link = 0, latency = 0;
  bool measuredLink = comm.usesMpi() && comm.size() > 1;
  if (measuredLink && comm.rank() < 2) {
    int peer = 1 - comm.rank();
    // A fixed number of round trips, so both ranks make the same calls.
    auto pingPong = [&](std::vector<char> &buffer, int trips,
                        double &perTrip) -> Status {
      TensorRef t{buffer.data(), {int64_t(buffer.size())}, DType::U8};
      double start = 0;
      for (int i = -1; i < trips; ++i) { // one warm-up trip
        if (i == 0)
          start = now();
        if (comm.rank() == 0) {
          CLEAVE_CHECK(comm.send(peer, 7, t));
          CLEAVE_CHECK(comm.recv(peer, 7, t));
        } else {
          CLEAVE_CHECK(comm.recv(peer, 7, t));
          CLEAVE_CHECK(comm.send(peer, 7, t));
        }
      }
      perTrip = (now() - start) / trips;
      return Status::ok();
    };
    std::vector<char> big(16 << 20), small(8);
    double trip = 0, smallTrip = 0;
    CLEAVE_CHECK(pingPong(big, 20, trip));
    CLEAVE_CHECK(pingPong(small, 2000, smallTrip));
    latency = smallTrip / 2;
    link = double(big.size()) / (trip / 2 - latency);
  }
  if (comm.rank() != 0)
    return Status::ok();
  if (!measuredLink) {
    link = 3.7978e9; // the checked-in CPU default (data/rates/cpu.json)
    latency = 8.7985e-7;
  }
  FILE *out = std::fopen(flags.output.c_str(), "w");
  if (!out)
    return Status::error("cannot write " + flags.output + ": " +
                         std::strerror(errno));
  std::fprintf(out,
               "{\"backend\": \"cpu\", \"flops_per_second\": %.4e, "
               "\"bytes_per_second\": %.4e, \"link_bytes_per_second\": %.4e, "
               "\"link_latency_seconds\": %.4e, "
               "\"host_bytes_per_second\": %.4e, \"threads\": %d, "
               "\"link_measured\": %s}\n",
               flops, bytes, link, latency, host, omp_get_max_threads(),
               measuredLink ? "true" : "false");
  if (std::fclose(out) != 0)
    return Status::error("writing " + flags.output + " failed");
  std::printf("matrix products: %.1f GFLOP/s (%d threads)\n", flops / 1e9,
              omp_get_max_threads());
  std::printf("memory: %.1f GB/s read and written\n", bytes / 1e9);
  std::printf("host copies: %.1f GB/s copied\n", host / 1e9);
  if (measuredLink)
    std::printf("link: %.2f GB/s, latency %.1f us\n", link / 1e9,
                latency * 1e6);
  else
    std::printf("link: not measured (one rank; run under mpirun -np 2); "
                "keeps the default %.1f GB/s\n",
                link / 1e9);
  std::printf("rates: %s\n", flags.output.c_str());
  return Status::ok();
}

} // namespace

int main(int argc, char **argv) {
  Flags flags;
  Status status = parse(argc, argv, flags);
  if (!status) {
    std::fprintf(stderr, "cleave-calibrate: %s\n", status.message().c_str());
    return 2;
  }
  if (flags.help) {
    std::printf("%s", kUsage);
    return 0;
  }
  bool underMpi = std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
  if (underMpi && MPI_Init(&argc, &argv) != MPI_SUCCESS) {
    std::fprintf(stderr, "cleave-calibrate: MPI_Init failed\n");
    return 1;
  }
  int rc = 0;
  {
    Communicator comm;
    if (underMpi)
      status = comm.initMpi();
    if (status)
      status = calibrate(flags, comm);
    if (!status) {
      std::fprintf(stderr, "cleave-calibrate: %s\n", status.message().c_str());
      rc = 1;
    }
  }
  if (underMpi)
    MPI_Finalize();
  return rc;
}
