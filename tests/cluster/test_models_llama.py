"""The Llama model on the cluster: its logits match transformers on meshes spanning both hosts
(tests/models/test_llama.py's tests that take the ``graph`` fixture)."""

import pytest

from tests.models.test_llama import (  # noqa: F401
    hf,
    test_greedy_generation_matches_transformers,
    test_logits_match_transformers_both_runners,
)

pytestmark = pytest.mark.timeout(300)
