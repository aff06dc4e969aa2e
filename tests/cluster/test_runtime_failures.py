"""Kernel failures on the cluster: a failed shard on either host fails what depends on it."""

import pytest

from tests.runtime.test_failures import (  # noqa: F401
    test_a_failed_shard_fails_the_redistribution_whichever_device_holds_it,
)

pytestmark = pytest.mark.timeout(120)
