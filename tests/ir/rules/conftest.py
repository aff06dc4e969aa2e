"""Puts the repository root on sys.path so that tests import the harness as `tests.simulate`
(pytest itself only adds this folder)."""

from __future__ import annotations

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[3])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
