"""Test setup: CPU only, four fake CPU devices, a shared compilation cache, quiet.

The four fake devices let data-parallel tests compare a 1-device and a
4-device mesh in one process (no subprocess). They must be configured before
JAX is imported, hence here.

Compiles are the suite's main cost on a 2-core machine, so XLA's optimisation
passes are off (``JAX_DISABLE_MOST_OPTIMIZATIONS``): programs compile about 40 %
faster and compute the same values up to float rounding. For the same reason XLA:CPU's
fusion emitters are off (``--xla_cpu_use_fusion_emitters=false``, about half again).

The persistent compilation cache lives in a fresh temporary directory per test
session (so no run sees another run's programs) and is passed to the test's
subprocesses through the environment: a program compiled once (the same train
step in several tests, a killed and a resumed run) is loaded, not recompiled.
"""
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_force_host_platform_device_count=4").strip()
# XLA:CPU's loop-fusion emitters cost about half of each compile here (the PPGN's train
# step, the Pallas interpret-mode kernels); the classic elemental emitters compute the
# same values up to float rounding. Subprocesses inherit it (test_cli.py keeps it when it
# drops the device count).
if "xla_cpu_use_fusion_emitters" not in os.environ["XLA_FLAGS"]:
    os.environ["XLA_FLAGS"] += " --xla_cpu_use_fusion_emitters=false"

os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")
# A shell starts background jobs with SIGINT ignored, and children inherit that: the
# tests that interrupt a run (in process or in a subprocess) need Python's own handler.
import signal  # noqa: E402

if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="ddgjax-test-jax-cache-")
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
for p in (str(REPO), str(TESTS)):
    if p not in sys.path:
        sys.path.insert(0, p)
