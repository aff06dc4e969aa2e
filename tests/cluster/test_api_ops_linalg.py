"""tests/api/test_ops_linalg.py on the cluster (2 simulated hosts): see conftest.py."""

import pytest

from tests.api.test_ops_linalg import *  # noqa: F403
from tests.api.test_ops_linalg import _seeded  # noqa: F401 - its autouse fixture

pytestmark = pytest.mark.timeout(120)
