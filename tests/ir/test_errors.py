"""``dtorch.errors.raised_anew``: the copy of a kept error that each raise gets."""

from __future__ import annotations

import traceback

import pytest

from dtorch.errors import KernelError, PeerDiedError, WorkerDiedError, raised_anew


class _Worded(Exception):
    """An error whose ``__init__`` words its message (``cls(*args)`` would word it twice)."""

    def __init__(self, code: int) -> None:
        super().__init__(f"code {code} failed")
        self.code = code


def _kept(error: BaseException) -> BaseException:
    """``error`` as the runtime keeps one: raised and caught where it happened."""
    try:
        raise error
    except BaseException as caught:
        return caught


@pytest.mark.parametrize(
    "error",
    [
        _Worded(7),
        KernelError("add_3 failed on device 1", operator_id=3),
        PeerDiedError("rank 1 died", ((1, 4242),)),
        WorkerDiedError("worker 0 exited with signal SIGKILL"),
    ],
    ids=["worded", "kernel", "peer", "worker"],
)
def test_a_copy_keeps_everything_but_the_raises_after_it(error: BaseException) -> None:
    kept = _kept(error)
    kept.add_note("while fetching")
    frames = traceback.extract_tb(kept.__traceback__)
    copies = []
    for _ in range(3):
        try:
            raise raised_anew(kept)
        except type(kept) as raised:
            copies.append(raised)
    assert all(c is not kept and type(c) is type(kept) for c in copies)
    assert all(str(c) == str(kept) and c.args == kept.args for c in copies)
    assert all(c.__dict__ == kept.__dict__ for c in copies)  # attributes, __notes__
    # each copy holds the frames the error happened in, once, behind this raise's own
    depths = {len(traceback.extract_tb(c.__traceback__)) for c in copies}
    assert depths == {len(frames) + 1}
    assert traceback.extract_tb(kept.__traceback__) == frames  # the kept chain never grows
