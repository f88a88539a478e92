# SPDX-License-Identifier: MIT
"""The GPU tests reuse the integration fixtures (lake, mount) and helpers."""

import importlib.util
import sys
from pathlib import Path

_path = Path(__file__).resolve().parents[1] / "integration" / "conftest.py"
_spec = importlib.util.spec_from_file_location("tfs_integration_conftest", _path)
_mod = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _mod
_spec.loader.exec_module(_mod)

lake = _mod.lake
mount = _mod.mount
tfs_bin = _mod.tfs_bin
_no_daemon_survives = _mod._no_daemon_survives
pytest_runtest_makereport = _mod.pytest_runtest_makereport
parse_object_header = _mod.parse_object_header  # test_bad_rows, imported by test_gpu
