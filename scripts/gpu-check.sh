#!/usr/bin/env bash
# Builds the CUDA backend here (no GPU needed) and packs what a GPU machine
# needs to run its tests into .gpu/, with .gpu/run.sh to run them there.
#
# The GPU machine has CUDA (the driver, cudart, cuBLAS/cuBLASLt) but none of
# our Debian packages, and nothing can be fetched there. So this script
#   1. configures build-gpu/ with -DCLEAVE_CUDA=ON and builds
#      cleave-cuda-kernel-tests, cleave-compile and cleave-run (skipped with
#      --pack-only);
#   2. runs the CUDA kernel tests here, where they skip without a GPU, and
#      prepares .gpu/cases/: the toy models compiled for `device: cuda`
#      (fp32 and bf16, one rank; a pipeline x data layout of 4 ranks), with
#      PyTorch's CPU references and the CPU backend's runs of the same
#      programs, for scripts/gpu-equality.sh to compare the GPU against;
#   3. packs into .gpu/ the test binaries and cleave-run, stripped, and the Debian packages
#      (.deb, fetched with `apt-get download`) that own every shared library
#      they load (ldd) except glibc's, plus run.sh and MANIFEST.txt. CUDA's
#      own libraries are not packed: run.sh finds them on the GPU machine.
# It is idempotent: build-gpu/ is configured once and built incrementally,
# .debs are cached in ~/.cache/cleave/gpu-debs, .gpu/ is rebuilt whole and
# replaced at the end, and /.gpu/ is added to .git/info/exclude once.
#
# Usage:
#   scripts/gpu-check.sh                      build build-gpu/, test, pack
#   scripts/gpu-check.sh --bench              also compile the GPT-2 124M/350M
#                                             programs of bench/train-gpu.sh
#   scripts/gpu-check.sh --with NAME          also pack build-gpu/bin/NAME
#   scripts/gpu-check.sh --pack-only BINARY...  pack these binaries, build nothing
# Then, on the GPU machine (the device tool carries .gpu/ when asked to):
#   bash .gpu/run.sh [--sanitize] [gtest flags...]
# (CLEAVE_GPU_TESTS=0 skips the test binaries, CLEAVE_GPU_CASES=REGEX runs
# the equality cases it matches, TORCH_MODES=eager leaves torch.compile out
# of the benchmark: for a second, shorter call.)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="${CLEAVE_GPU_BUILD:-$repo/build-gpu}" # another build tree with CUDA: CLEAVE_GPU_BUILD
pack="$repo/.gpu"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/cleave/gpu-debs"
limit=$((64 * 1024 * 1024))
# Packages every machine that runs CUDA has and that must not be swapped:
# glibc (the loader, libc, libm, libpthread, libdl, librt).
base_packages=" libc6 "

say() { echo "gpu-check: $*"; }
die() { echo "gpu-check: error: $*" >&2; exit 1; }

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }

pack_only=0
bench=0
binaries=()
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
  --pack-only)
    pack_only=1
    shift
    while [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; do
      binaries+=("$1")
      shift
    done
    [ ${#binaries[@]} -gt 0 ] || die "--pack-only needs at least one binary"
    ;;
  --bench)
    bench=1
    shift
    ;;
  --with)
    [ $# -ge 2 ] || die "--with needs a binary name from build-gpu/bin"
    extra+=("$2")
    shift 2
    ;;
  -h | --help)
    usage
    exit 0
    ;;
  *) die "unknown argument '$1' (see --help)" ;;
  esac
done

#===-------------------------------------------------------------------===#
# 1-2. Build build-gpu/ and run the tests here (they skip without a GPU)
#===-------------------------------------------------------------------===#

if [ $pack_only = 0 ]; then
  if [ ! -f "$build/build.ninja" ] ||
    ! grep -q '^CLEAVE_CUDA:.*=ON$' "$build/CMakeCache.txt" 2>/dev/null; then
    say "configuring $build with -DCLEAVE_CUDA=ON"
    mkdir -p "$build"
    cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCLEAVE_CUDA=ON >"$build/configure.log" 2>&1 ||
      { tail -30 "$build/configure.log"; die "configure failed (log: $build/configure.log)"; }
  else
    say "$build is configured (CLEAVE_CUDA=ON); building incrementally"
  fi
  say "building cleave-cuda-kernel-tests cleave-compile cleave-run"
  cmake --build "$build" -j "$(nproc)" --target cleave-cuda-kernel-tests \
    cleave-compile cleave-run
  binaries=("$build/bin/cleave-cuda-kernel-tests" "$build/bin/cleave-run")
  for name in "${extra[@]}"; do
    binaries+=("$build/bin/$name")
  done
  say "running the CUDA kernel tests here (no GPU: they should skip)"
  "$build/bin/cleave-cuda-kernel-tests" --gtest_brief=1 2>&1 | tail -5 ||
    die "the CUDA kernel tests failed here"

  # The equality cases: NAME CONFIG PRECISION RANKS EXTRA-SPEC-KEYS.
  cases_new="$pack.cases"
  rm -rf "$cases_new" && mkdir -p "$cases_new"
  optimizer='{"type": "adamw", "lr": 1e-3, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1, "grad_clip": 1.0}'
  while read -r name config precision ranks keys; do
    dir="$cases_new/$name"
    mkdir -p "$dir"
    echo "$config" >"$dir/config"
    echo "$precision" >"$dir/precision"
    echo "$ranks" >"$dir/ranks"
    echo 4 >"$dir/batch"
    autocast=()
    [ "$precision" = bf16 ] && autocast=(--autocast bf16)
    say "case $name: PyTorch reference (CPU)"
    /usr/bin/python3 "$repo/models/reference.py" "$config" --data "$repo/data/tokens.bin"       --batch 4 --steps 10 "${autocast[@]}" -o "$dir/ref" >"$dir/ref.log" 2>&1 ||
      die "models/reference.py $config failed (log $dir/ref.log)"
    bf16=false
    [ "$precision" = bf16 ] && bf16=true
    echo "{\"batch_size\": 4, \"microbatches\": 2, \"device\": \"cuda\", \"bf16\": $bf16, \"world_size\": $ranks, $keys \"optimizer\": $optimizer}" >"$dir/spec.json"
    "$build/bin/cleave-compile" "$dir/ref/model.onnx" --spec "$dir/spec.json" \
      -o "$dir/program" >/dev/null || die "cleave-compile failed for case $name"
    rm -f "$dir/ref/model.onnx" "$dir/ref/grads.safetensors" "$dir/program/plan.json"
    [ "$precision" = bf16 ] && rm -f "$dir/ref/params_final.safetensors"
    [ "$precision" = fp32 ] && rm -f "$dir/ref/params_init.safetensors"
    launch=("$build/bin/cleave-run")
    [ "$ranks" -gt 1 ] && launch=(mpirun -np "$ranks" --oversubscribe --allow-run-as-root "$build/bin/cleave-run" --threads 1)
    "${launch[@]}" "$dir/program" --device cpu --data "$repo/data/tokens.bin" --steps 10 \
      --save-params "$dir/cpu-params.safetensors" </dev/null >"$dir/cpu.log" 2>&1 ||
      die "cleave-run --device cpu failed for case $name (log $dir/cpu.log)"
  done <<'CASES'
gpt2-fp32 gpt2-toy fp32 1
llama-fp32 llama-toy fp32 1
gpt2-bf16 gpt2-toy bf16 1
llama-bf16 llama-toy bf16 1
gpt2-pp2dp2-fp32 gpt2-toy fp32 4 "pipeline_parallel_degree": 2, "ddp": true,
gpt2-offload-fp32 gpt2-toy fp32 1 "activation_checkpointing": "each", "offload_activations": true, "activation_loading_horizon": 1,
llama-tp2-fp32 llama-toy fp32 2 "tensor_parallel_degree": 2,
CASES

  # The benchmark's programs: shapes-only exports (generated weights, no
  # params.bin to carry), bf16, sequence 1024, every batch the plan fits
  # in 80 GiB.
  bench_new="$pack.bench"
  rm -rf "$bench_new"
  if [ $bench = 1 ]; then
    mkdir -p "$bench_new"
    for config in gpt2-124m gpt2-350m; do
      /usr/bin/python3 "$repo/models/export.py" "$config" --shapes-only \
        --dynamic-batch -o "$bench_new/$config.onnx" >/dev/null ||
        die "models/export.py $config --shapes-only failed"
      for batch in 64 48 32 24 16 8 4; do
        echo "{\"batch_size\": $batch, \"microbatches\": 1, \"bf16\": true, \"device\": \"cuda\", \"device_memory_gib\": 80, \"optimizer\": {\"type\": \"adamw\", \"lr\": 1e-4, \"betas\": [0.9, 0.95], \"weight_decay\": 0.1, \"grad_clip\": 1.0}}" >"$bench_new/spec.json"
        if "$build/bin/cleave-compile" "$bench_new/$config.onnx" --spec "$bench_new/spec.json" \
          -o "$bench_new/$config-b$batch" >"$bench_new/$config-b$batch.log" 2>&1; then
          say "bench: $config batch $batch fits the plan"
        else
          say "bench: $config batch $batch: $(tail -1 "$bench_new/$config-b$batch.log")"
          rm -rf "$bench_new/$config-b$batch"
        fi
      done
      rm -f "$bench_new/$config.onnx"
    done
  fi
elif [ ${#extra[@]} -gt 0 ]; then
  die "--with applies to the build; with --pack-only, name the binaries"
fi

#===-------------------------------------------------------------------===#
# 3. Pack
#===-------------------------------------------------------------------===#

for b in "${binaries[@]}"; do
  [ -x "$b" ] || die "$b is not an executable"
  file -L "$b" | grep -q ELF || die "$b is not an ELF binary"
done

new="$pack.new"
rm -rf "$new"
mkdir -p "$new/bin" "$new/debs" "$new/lib" "$cache"

# The package owning a library path, or nothing. dpkg knows the path it
# installed, which may differ from ldd's by a symlink or by merged /usr.
owner() {
  local path=$1 real candidates c
  real=$(readlink -f "$path")
  candidates=("$path" "$real")
  for c in "$path" "$real"; do
    case "$c" in
    /usr/*) candidates+=("${c#/usr}") ;;
    *) candidates+=("/usr$c") ;;
    esac
  done
  for c in "${candidates[@]}"; do
    dpkg -S "$c" 2>/dev/null | head -1 | cut -d: -f1 && return 0
  done
  return 0
}

declare -A packages=() # package -> the libraries it gives
cuda_libs=()
copied_libs=()
for b in "${binaries[@]}"; do
  name=$(basename "$b")
  cp -L "$b" "$new/bin/$name"
  strip --strip-unneeded "$new/bin/$name"
  # The CUDA fat binaries compress about 3.5 times: run.sh unpacks them.
  gzip -9 -n "$new/bin/$name"
  say "packed $name ($(du -h "$new/bin/$name.gz" | cut -f1) stripped and gzipped)"
  missing=$(ldd "$b" | grep 'not found' || true)
  [ -z "$missing" ] || die "$b has unresolved libraries here: $missing"
  while read -r lib path; do
    [ -n "$path" ] || continue
    pkg=$(owner "$path")
    if [ -n "$pkg" ]; then
      case "$base_packages" in *" $pkg "*) continue ;; esac
      packages[$pkg]="${packages[$pkg]:-} $lib"
    elif [[ "$(readlink -f "$path")" == */cuda* || "$lib" =~ ^lib(cu|nv|nccl) ]]; then
      cuda_libs+=("$lib")
    else
      cp -L "$path" "$new/lib/$lib"
      copied_libs+=("$lib")
    fi
  done < <(ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}')
done

# mpirun for the cases with several ranks (sharing the GPU there): Open
# MPI's launcher, its components and PMIx, with every library they load.
# run.sh relocates them with OPAL_PREFIX and PMIX_INSTALL_PREFIX.
mpi_files=(/usr/bin/orterun /usr/bin/orted
  /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/*.so
  /usr/lib/x86_64-linux-gnu/pmix2/lib/pmix/*.so)
for pkg in openmpi-bin openmpi-common libopenmpi3 libpmix2; do
  packages[$pkg]="${packages[$pkg]:-} (mpirun)"
done
for f in "${mpi_files[@]}"; do
  [ -e "$f" ] || continue
  while read -r lib path; do
    pkg=$(owner "$path")
    [ -n "$pkg" ] || continue
    case "$base_packages" in *" $pkg "*) continue ;; esac
    case "${packages[$pkg]:-}" in *" $lib"*) ;; *) packages[$pkg]="${packages[$pkg]:-} $lib" ;; esac
  done < <(ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}')
done

# Fetches the installed version of each package (the one the binaries were
# linked against), from the cache when it is there.
updated=0
for pkg in $(printf '%s\n' "${!packages[@]}" | sort); do
  version=$(dpkg-query -W -f='${Version}' "$pkg")
  arch=$(dpkg-query -W -f='${Architecture}' "$pkg")
  deb="${pkg}_${version//:/%3a}_${arch}.deb"
  if [ ! -f "$cache/$deb" ]; then
    say "downloading $pkg $version"
    if ! (cd "$cache" && apt-get download -q "$pkg:$arch=$version" >/dev/null 2>&1); then
      if [ $updated = 0 ]; then
        say "apt-get update (the package lists lack $pkg $version)"
        apt-get update -q >/dev/null
        updated=1
      fi
      (cd "$cache" && apt-get download -q "$pkg:$arch=$version" >/dev/null 2>&1) ||
        die "cannot download $pkg $version (apt-get download $pkg:$arch=$version)"
    fi
    [ -f "$cache/$deb" ] || deb=$(cd "$cache" && ls -t "${pkg}_"*"_${arch}.deb" | head -1)
  fi
  cp "$cache/$deb" "$new/debs/"
done

cat >"$new/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs the packed CUDA tests on a GPU machine: unpacks the .debs into a
# private folder (dpkg -x, nothing installed), points LD_LIBRARY_PATH at them
# and at CUDA's libraries for the tests alone, shows nvidia-smi, runs every
# bin/*-tests, and prints a summary. Exit status 0 only if every test binary
# passed and, on a machine with a GPU, the GPU tests ran instead of skipping.
#   bash .gpu/run.sh [--sanitize] [gtest flags...]
# --sanitize runs the tests under compute-sanitizer (memcheck) as well.
# Logs go to .gpu/logs/ (and to $OUT/ when the device tool sets it).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
sanitize=0
if [ "${1:-}" = "--sanitize" ]; then sanitize=1; shift; fi
private="${TMPDIR:-/tmp}/cleave-gpu-libs"
logs="$here/logs"
rm -rf "$private" && mkdir -p "$private" "$logs"

# The binaries travel gzipped.
for z in "$here"/bin/*.gz; do
  [ -e "$z" ] || continue
  gzip -dc "$z" >"${z%.gz}" && chmod +x "${z%.gz}" ||
    { echo "run.sh: cannot unpack $z" >&2; exit 2; }
done

for deb in "$here"/debs/*.deb; do
  [ -e "$deb" ] || continue
  dpkg -x "$deb" "$private" || { echo "run.sh: dpkg -x $deb failed" >&2; exit 2; }
done
libpath=$(find "$private" "$here/lib" -regex '.*\.so\(\.[0-9]+\)*' -printf '%h\n' 2>/dev/null | sort -u | paste -sd:)

# CUDA's libraries the tests link (libcudart, libcublasLt, ...): wherever
# this machine keeps them when the loader does not find them by itself.
cuda_dirs=(/usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib
  /usr/local/cuda*/lib64 /usr/local/nvidia/lib64 /usr/lib/x86_64-linux-gnu)
for py in python3 /opt/torch/.venv/bin/python3; do
  site=$("$py" -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null) || continue
  for s in $site; do cuda_dirs+=("$s"/nvidia/*/lib "$s"/nvidia/cu*/lib); done
done
for test in "$here"/bin/*; do
  [ "${test%.gz}" = "$test" ] || continue
  for lib in $(LD_LIBRARY_PATH="$libpath" ldd "$test" | awk '/not found/ {print $1}'); do
    for dir in "${cuda_dirs[@]}"; do
      if [ -e "$dir/$lib" ]; then
        libpath="$libpath:$dir"
        echo "run.sh: $lib from $dir"
        break
      fi
    done
  done
done

# Open MPI from the packed .debs: relocated to where they were unpacked.
if [ -x "$private/usr/bin/orterun" ]; then
  ln -sf orterun "$private/usr/bin/mpirun"
  export OPAL_PREFIX="$private/usr"
  export PMIX_INSTALL_PREFIX="$private/usr/lib/x86_64-linux-gnu/pmix2"
  export PATH="$private/usr/bin:$PATH"
fi

echo "== nvidia-smi"
gpus=0
if command -v nvidia-smi >/dev/null; then
  nvidia-smi 2>&1 | tee "$logs/nvidia-smi.txt"
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
else
  echo "nvidia-smi not found"
fi

status=0
summary=()
for test in "$here"/bin/*-tests; do
  [ "${CLEAVE_GPU_TESTS:-1}" = 0 ] && break
  name=$(basename "$test")
  missing=$(LD_LIBRARY_PATH="$libpath" ldd "$test" | grep 'not found')
  if [ -n "$missing" ]; then
    echo "run.sh: $name cannot load: $missing" >&2
    summary+=("$name: CANNOT LOAD ($(echo "$missing" | awk '{print $1}' | paste -sd' '))")
    status=1
    continue
  fi
  runs=("plain")
  [ $sanitize = 1 ] && command -v compute-sanitizer >/dev/null && runs+=("memcheck")
  for run in "${runs[@]}"; do
    log="$logs/$name.$run.log"
    echo "== $name ($run)"
    start=$(date +%s)
    if [ "$run" = memcheck ]; then
      LD_LIBRARY_PATH="$libpath" compute-sanitizer --tool memcheck \
        --error-exitcode 3 "$test" "$@" 2>&1 | tee "$log"
    else
      LD_LIBRARY_PATH="$libpath" "$test" "$@" 2>&1 | tee "$log"
    fi
    rc=${PIPESTATUS[0]}
    seconds=$(($(date +%s) - start))
    passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
    failed=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
    skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
    line="$name ($run): exit $rc, ${passed:-0} passed, ${failed:-0} failed, ${skipped:-0} skipped, ${seconds}s"
    if [ "$rc" != 0 ]; then
      status=1
    elif [ "$gpus" -gt 0 ] && grep '^\[  SKIPPED \] [A-Za-z]' "$log" | grep -v WithoutDevice | grep -q .; then
      line="$line -- GPU TESTS SKIPPED ON A MACHINE WITH $gpus GPU(S)"
      status=1
    fi
    summary+=("$line")
  done
done

# The equality checks (scripts/gpu-equality.sh, from the repository root
# the device tool runs in) when the pack has cases and a cleave-run.
root=$(cd "$here/.." && pwd)
if [ -d "$here/cases" ] && [ -x "$here/bin/cleave-run" ]; then
  if (cd "$root" && LD_LIBRARY_PATH="$libpath" bash scripts/gpu-equality.sh "$here" "$logs"); then
    summary+=("equality: all cases passed ($logs/equality.txt)")
  else
    summary+=("equality: FAILURES ($logs/equality.txt)")
    status=1
  fi
fi

# The benchmark, when the pack has its programs.
if [ -d "$here/bench" ] && [ "$gpus" -gt 0 ]; then
  (cd "$root" && LD_LIBRARY_PATH="$libpath" bash bench/train-gpu.sh "$here") 2>&1 | tee "$logs/bench.txt"
fi

echo "== summary ($(hostname), $gpus GPU(s))"
printf '  %s\n' "${summary[@]}" | tee "$logs/summary.txt"
[ $status = 0 ] && echo "  ALL PASSED" || echo "  FAILURES (logs: $logs)"
# The device tool returns at most 8 files from $OUT: the logs as one archive.
if [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ]; then
  tar czf "$OUT/gpu-logs.tgz" -C "$here" logs
  cp "$logs/summary.txt" "$OUT/" 2>/dev/null
fi
exit $status
RUN
chmod +x "$new/run.sh"

{
  echo "Packed by scripts/gpu-check.sh on $(hostname), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$repo" diff --quiet 2>/dev/null || echo ' (with local changes)')"
  echo "binaries (stripped):"
  for b in "${binaries[@]}"; do echo "  $(basename "$b")  from $b"; done
  echo "Debian packages (debs/, unpacked by run.sh with dpkg -x):"
  for pkg in $(printf '%s\n' "${!packages[@]}" | sort); do
    echo "  $pkg $(dpkg-query -W -f='${Version}' "$pkg"):${packages[$pkg]}"
  done
  echo "not packed, from glibc (on every machine):$base_packages"
  echo "not packed, from CUDA (found by run.sh on the GPU machine):"
  printf '%s\n' "${cuda_libs[@]}" | sort -u | sed 's/^/  /'
  if [ ${#copied_libs[@]} -gt 0 ]; then
    echo "copied, owned by no package (lib/):"
    printf '  %s\n' "${copied_libs[@]}"
  fi
} >"$new/MANIFEST.txt"

for part in cases bench; do
  if [ -d "$pack.$part" ]; then
    mv "$pack.$part" "$new/$part"
  elif [ -d "$pack/$part" ]; then
    cp -r "$pack/$part" "$new/$part"
  fi
done

size=$(du -sb "$new" | cut -f1)
if [ "$size" -gt "$limit" ]; then
  du -sh "$new"/bin/* "$new"/debs/* "$new"/lib/* 2>/dev/null | sort -h | tail -10 >&2
  rm -rf "$new"
  die "the pack would take $((size / 1024 / 1024)) MiB, over the 64 MiB limit"
fi
rm -rf "$pack"
mv "$new" "$pack"

exclude=$(git -C "$repo" rev-parse --git-path info/exclude 2>/dev/null || echo "$repo/.git/info/exclude")
case "$exclude" in /*) ;; *) exclude="$repo/$exclude" ;; esac
mkdir -p "$(dirname "$exclude")"
if ! grep -qx '/.gpu/' "$exclude" 2>/dev/null; then
  echo '/.gpu/' >>"$exclude"
  say "added /.gpu/ to $exclude"
fi

tree=$(cd "$repo" && git ls-files -co --exclude-standard -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
say "packed $pack: ${#binaries[@]} binaries, ${#packages[@]} Debian packages ($(ls "$pack/debs" | paste -sd' ')), $((size / 1024)) KiB"
say "CUDA libraries left to the GPU machine: $(printf '%s\n' "${cuda_libs[@]}" | sort -u | paste -sd' ')"
[ ${#copied_libs[@]} -eq 0 ] || say "copied without a package: ${copied_libs[*]}"
say "working tree $((tree / 1024)) KiB + pack $((size / 1024)) KiB of the device tool's 64 MiB"
[ $((tree + size)) -le $limit ] || say "warning: the working tree and the pack together exceed 64 MiB"
say "on the GPU machine: bash .gpu/run.sh   (device tool: carry [\".gpu\"])"
