"""tests/api/test_ops_linalg.py on the cluster (2 simulated hosts): see conftest.py."""

import pytest

from tests.api.test_ops_linalg import *  # noqa: F403
from tests.api.test_ops_linalg import _seeded  # noqa: F401 - its autouse fixture

# Strictly xfailed in the API suite for the same-device (store) backend, whose float16 partial
# sums round several times; on the cluster these groups run on Gloo, which rounds once.
del test_matmul_float16_partial_rounds_once  # noqa: F821
pytestmark = pytest.mark.timeout(120)
