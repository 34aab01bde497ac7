"""Test setup: CPU only, four fake CPU devices, quiet, deterministic.

The four fake devices let data-parallel tests compare a 1-device and a
4-device mesh in one process (no subprocess). They must be configured before
JAX is imported, hence here.
"""
import os
import sys
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_force_host_platform_device_count=4").strip()

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
for p in (str(REPO), str(TESTS)):
    if p not in sys.path:
        sys.path.insert(0, p)
