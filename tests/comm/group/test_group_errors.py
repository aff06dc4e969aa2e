"""Bad arguments fail early with errors that say what was given and what is accepted."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from group_reference import torch_chunks

from dtorch.comm.group import CommTopology, ThreadGroup, ThreadGroupManager
from dtorch.comm.namespace import CommNamespace
from dtorch.errors import CommError
from tests.thread_runner import on_threads

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def group3() -> Iterator[ThreadGroup]:
    """One caller holding all three ranks (checks run without any peer)."""
    with ThreadGroupManager(CommTopology.threads([[0, 1, 2]])) as manager:
        yield manager.get_group("cpu", [0, 1, 2], [0, 1, 2])


def _three(value: torch.Tensor) -> dict[int, torch.Tensor]:
    return {r: value.clone() for r in range(3)}


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        (
            {0: torch.ones(2), 1: torch.ones(2), 5: torch.ones(2)},
            "ranks ['5'] are not in the group",
        ),
        ({0: torch.ones(2), 1: torch.ones(2)}, "no tensor for ranks [2]"),
        ([torch.ones(2)] * 3, "inputs must be a dict {rank: tensor}, got list"),
        ({0: [1.0], 1: torch.ones(1), 2: torch.ones(1)}, "rank 0 passed list; accepted"),
        (
            {0: torch.ones(2, device="meta"), 1: torch.ones(2), 2: torch.ones(2)},
            "on meta; accepted: cpu tensors",
        ),
        (
            {0: torch.ones(2), 1: torch.ones(2, dtype=torch.int64), 2: torch.ones(2)},
            "differ in dtype",
        ),
        ({0: torch.ones(2), 1: torch.ones(3), 2: torch.ones(2)}, "differ in shape"),
    ],
)
def test_bad_inputs_are_rejected(group3: ThreadGroup, inputs, message: str) -> None:
    with pytest.raises(CommError) as info:
        group3.all_reduce(inputs)
    assert message in str(info.value)
    assert "cpu[0, 1, 2]" in str(info.value) or "accepted" in str(info.value)


def test_unknown_op_lists_the_accepted_ones(group3: ThreadGroup) -> None:
    with pytest.raises(CommError, match=r"unknown reduce op 'prod'; accepted: sum, avg, max, min"):
        group3.all_reduce(_three(torch.ones(2)), op="prod")
    with pytest.raises(CommError, match="unknown reduce op"):
        group3.reduce_scatter(_three(torch.ones(3)), op=None)  # type: ignore[arg-type]


def test_ops_undefined_for_a_dtype_are_rejected(group3: ThreadGroup) -> None:
    with pytest.raises(CommError, match="'avg' needs a floating or complex dtype"):
        group3.all_reduce(_three(torch.ones(2, dtype=torch.int32)), op="avg")
    with pytest.raises(CommError, match="undefined for complex"):
        group3.reduce_scatter(_three(torch.ones(3, dtype=torch.complex64)), op="max")


@pytest.mark.parametrize(("dim", "message"), [(2, "dim 2 is out of range"), ("0", "int")])
def test_bad_dims_are_rejected(group3: ThreadGroup, dim, message: str) -> None:
    for call in (
        lambda: group3.all_gather(_three(torch.ones(2, 2)), dim=dim),
        lambda: group3.reduce_scatter(_three(torch.ones(2, 2)), dim=dim),
        lambda: group3.replicate_to_shard(_three(torch.ones(2, 2)), dim=dim),
        lambda: group3.all_to_all(_three(torch.ones(2, 2)), src_dim=dim, dst_dim=0),
    ):
        with pytest.raises(CommError, match=message):
            call()


def test_all_to_all_needs_two_different_dims(group3: ThreadGroup) -> None:
    with pytest.raises(CommError, match="src_dim and dst_dim are both 1"):
        group3.all_to_all(_three(torch.ones(2, 3)), src_dim=1, dst_dim=-1)


def test_uneven_shards_need_the_full_size(group3: ThreadGroup) -> None:
    shards = dict(enumerate(torch_chunks(torch.arange(7), 3, 0)))
    with pytest.raises(CommError, match="pass full_size="):
        group3.all_gather(shards)
    with pytest.raises(CommError, match=r"torch.chunk sizes of the full tensor give \[3, 3, 2\]"):
        group3.all_gather(shards, full_size=8)
    with pytest.raises(CommError, match="full_size must be an int >= 0"):
        group3.all_gather(shards, full_size=-1)
    torch.testing.assert_close(group3.all_gather(shards, full_size=7)[1], torch.arange(7))


def test_shards_must_agree_outside_the_gathered_dim(group3: ThreadGroup) -> None:
    shards = {0: torch.ones(1, 2), 1: torch.ones(1, 3), 2: torch.ones(1, 2)}
    with pytest.raises(CommError, match="shards differ outside dim 0"):
        group3.all_gather(shards)


def test_broadcast_source_must_be_a_rank(group3: ThreadGroup) -> None:
    with pytest.raises(CommError, match=r"src 3 is not a rank of the group; accepted: 0..2"):
        group3.broadcast(_three(torch.ones(2)), src=3)


def test_replicate_to_shard_pieces_picks_the_piece(group3: ThreadGroup) -> None:
    full = torch.arange(14).view(7, 2)
    out = group3.replicate_to_shard(_three(full), dim=0, pieces={0: 2, 1: 0, 2: 1})
    pieces = torch_chunks(full, 3, 0)
    for rank, piece in {0: 2, 1: 0, 2: 1}.items():
        torch.testing.assert_close(out[rank], pieces[piece])
    with pytest.raises(CommError, match="pieces must map each held rank"):
        group3.replicate_to_shard(_three(full), dim=0, pieces={0: 1})
    with pytest.raises(CommError, match=r"pieces\[1\] 3 is not a rank"):
        group3.replicate_to_shard(_three(full), dim=0, pieces={0: 0, 1: 3, 2: 0})


def test_closed_group_refuses_calls(group3: ThreadGroup) -> None:
    group3.close()
    with pytest.raises(CommError, match="the group is closed"):
        group3.all_reduce(_three(torch.ones(1)))
    with pytest.raises(CommError, match="the group is closed"):
        group3.barrier()


def _two_callers(fn):
    """Run ``fn(group, held)`` on callers [[0], [1, 2]] (ids 0..2), one thread each."""
    topology = CommTopology.threads([[0], [1, 2]])
    with ThreadGroupManager(topology, namespace=CommNamespace.create()) as manager:

        def caller(held):
            group = manager.get_group("cpu", [0, 1, 2], held)
            try:
                return ("ok", fn(group, held))
            except CommError as error:
                return ("error", str(error))

        return on_threads([[0], [1, 2]], caller)


def test_ranks_of_other_callers_are_rejected() -> None:
    def fn(group, held):
        if held == [0]:
            return group.all_reduce({0: torch.ones(1), 1: torch.ones(1)})
        return None

    (status, message), _ = _two_callers(fn)
    assert status == "error" and "ranks [1] belong to other callers" in message


def test_a_peer_with_another_shape_fails_every_caller_and_the_group_survives() -> None:
    def fn(group, held):
        size = 3 if held == [0] else 2
        try:
            group.all_reduce({r: torch.ones(size) for r in held})
        except CommError as error:
            first = str(error)
        else:
            first = "no error"
        after = group.all_reduce({r: torch.full((2,), float(r)) for r in held})
        return first, after

    results = _two_callers(fn)
    for status, (first, after) in results:
        assert status == "ok"
        assert "passed torch.float32 [" in first and "expected torch.float32" in first
        for value in after.values():
            torch.testing.assert_close(value, torch.full((2,), 3.0))


@pytest.mark.parametrize(
    "sizes",
    [
        # 3 ranks: 43690 float32s are just below combine's 512 KiB, one more is above
        (((43690,), torch.float32), ((43691,), torch.float32)),
        (((43690,), torch.float32), ((43690,), torch.float64)),  # the dtype alone crosses it
    ],
)
def test_callers_straddling_the_combine_limit_fail_at_once(sizes) -> None:
    """Threads meet in one combine below 512 KiB (whole tensor x ranks) and use the handshake
    above it; each decides from its own tensor, so mismatched callers may choose differently.
    The one that finds the other kind of exchange refuses at once, far below the timeout."""
    import time

    from dtorch.options import GlobalOption

    def fn(group, held):
        shape, dtype = sizes[0] if held == [0] else sizes[1]
        started = time.monotonic()
        with GlobalOption.override(comm_timeout_second=20):
            try:
                group.all_reduce({r: torch.ones(shape, dtype=dtype) for r in held})
            except CommError as error:
                return time.monotonic() - started, str(error)
        return time.monotonic() - started, "no error"

    for status, (elapsed, message) in _two_callers(fn):
        assert status == "ok" and elapsed < 5, (elapsed, message)
        assert "differ in size or dtype" in message or "another caller failed" in message
    after = _two_callers(lambda g, held: g.all_reduce({r: torch.ones(2) for r in held}))
    assert all(status == "ok" for status, _ in after)  # the group survives


def test_a_waiter_timing_out_while_the_last_arrival_computes_names_it() -> None:
    """Everyone came, the last arrival is still computing when an earlier one's deadline
    passes: a CommTimeoutError saying so (the scope is aborted), not an IndexError."""
    import threading
    import time

    from dtorch.comm.group import compute
    from dtorch.errors import CommTimeoutError
    from dtorch.options import GlobalOption

    real = compute.all_reduce_outputs
    slow = threading.Event()

    def outputs(tensors, op, ranks, empty):
        if slow.is_set():
            time.sleep(1.5)
        return real(tensors, op, ranks, empty)

    def fn(group, held):
        with GlobalOption.override(comm_timeout_second=0.7):
            if held != [0]:
                time.sleep(0.2)  # arrive last, and compute slowly
                slow.set()
            try:
                return group.all_reduce({r: torch.ones(2) for r in held})
            except CommTimeoutError as error:
                return str(error)

    compute.all_reduce_outputs = outputs
    try:
        (first, message), (last, _) = _two_callers(fn)
    finally:
        compute.all_reduce_outputs = real
    assert first == "ok" and "did not finish computing the results" in message, message
    assert last in ("ok", "error")
