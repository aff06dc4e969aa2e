"""tests/nn/test_linear.py on the cluster (2 simulated hosts): see conftest.py."""

import pytest

from tests.nn.test_linear import *  # noqa: F403

pytestmark = pytest.mark.timeout(120)
