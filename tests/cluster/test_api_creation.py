"""tests/api/test_creation.py on the cluster (2 simulated hosts): see conftest.py."""

import pytest

from tests.api.test_creation import *  # noqa: F403

pytestmark = pytest.mark.timeout(120)
