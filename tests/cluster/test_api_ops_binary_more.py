"""tests/api/test_ops_binary_more.py on the cluster (2 simulated hosts): see conftest.py."""

import pytest

from tests.api.test_ops_binary_more import *  # noqa: F403
from tests.api.test_ops_binary_more import _seeded  # noqa: F401 - its autouse fixture

pytestmark = pytest.mark.timeout(120)
