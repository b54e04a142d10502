# lit configuration for Cleave's FileCheck tests.
import os
import lit.formats

config.name = "Cleave"
# Always the external shell (bash): tests use its command substitution
# ($(cat ...)), which lit's internal shell lacks; `lit -q` used to switch
# to the internal one and fail them.
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.cleave_obj_root, "test")
config.excludes = ["lit.cfg.py", "lit.site.cfg.py.in", "CMakeLists.txt", "unit", "inputs"]

config.environment["PATH"] = os.pathsep.join(
    [config.cleave_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
config.substitutions.append(("%torch_python", config.torch_python))
config.substitutions.append(("%src_root", config.cleave_src_root))
config.substitutions.append(("%cleave_bin", config.cleave_tools_dir))
config.substitutions.append(("%inputs", os.path.join(config.cleave_src_root, "test", "inputs")))
config.substitutions.append(("%models", os.path.join(config.cleave_src_root, "models")))

# `hf_transformers`: scripts/install-deps.sh (run by `make check`) made
# .venv-hf/, transformers over Debian's torch; the Hugging Face tests run
# under %hf_python. Without it they are unsupported, and lit says why.
hf_python = os.path.join(config.cleave_src_root, ".venv-hf", "bin", "python")
config.substitutions.append(("%hf_python", hf_python))
if os.access(hf_python, os.X_OK):
    config.available_features.add("hf_transformers")
else:
    lit_config.warning("%s is missing, so the Hugging Face tests "
                       "(runtime/hf-*.test) are UNSUPPORTED: scripts/install-deps.sh "
                       "creates it (CLEAVE_NO_HF=1 skips it)" % hf_python)

# `cuda_device`: cleave-run can run on a GPU here (a CUDA build and a device
# that answers). Tests that need one say `REQUIRES: cuda_device`; the CPU
# machines of CI have none.
import subprocess
try:
    probe = subprocess.run(
        [os.path.join(config.cleave_tools_dir, "cleave-run"), "--list-devices"],
        capture_output=True, text=True, timeout=60)
    if probe.returncode == 0 and "cuda:" in probe.stdout:
        config.available_features.add("cuda_device")
except (OSError, subprocess.TimeoutExpired):
    pass
