"""GlobalOption: parsing, defaults, errors and override."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dtorch.errors import OptionError
from dtorch.options import GlobalOption, Options


def test_defaults_and_parsing() -> None:
    options = Options.from_environ({})
    assert options == Options()
    parsed = Options.from_environ(
        {
            "DTORCH_COMM_TIMEOUT_SECOND": "12",
            "DTORCH_ZMQ_TIMEOUT_SECOND": "0.5",
            "DTORCH_DTENSOR_IN_SAME_DEVICE": "true",
            "DTORCH_NUM_GPU_WHEN_ENABLE_DTENSOR_IN_SAME_DEVICE": "4",
            "DTORCH_PER_DEVICE_PER_PROCESS": "1",
            "DTORCH_VALIDATE_KERNEL_INPUT_OUTPUT": "0",
        }
    )
    assert parsed.comm_timeout_second == 12.0 and parsed.zmq_timeout_second == 0.5
    assert parsed.dtensor_in_same_device and parsed.per_device_per_process
    assert parsed.num_gpu_when_enable_dtensor_in_same_device == 4
    assert not parsed.validate_kernel_input_output


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("DTORCH_COMM_TIMEOUT_SECOND", "0", "positive"),
        ("DTORCH_COMM_TIMEOUT_SECOND", "-3", "positive"),
        ("DTORCH_ZMQ_TIMEOUT_SECOND", "abc", "not a number"),
        ("DTORCH_ZMQ_TIMEOUT_SECOND", "inf", "finite"),
        ("DTORCH_DTENSOR_IN_SAME_DEVICE", "maybe", "boolean"),
        ("DTORCH_NUM_GPU_WHEN_ENABLE_DTENSOR_IN_SAME_DEVICE", "0", "positive integer"),
        ("DTORCH_NUM_GPU_WHEN_ENABLE_DTENSOR_IN_SAME_DEVICE", "2.5", "integer"),
    ],
)
def test_invalid_values_name_the_variable(variable: str, value: str, message: str) -> None:
    with pytest.raises(OptionError, match=message) as info:
        Options.from_environ({variable: value})
    assert variable in str(info.value)


def test_override_restores_the_previous_options() -> None:
    before = GlobalOption.get_comm_timeout_second()
    with GlobalOption.override(comm_timeout_second=1.5):
        assert GlobalOption.get_comm_timeout_second() == 1.5
    assert GlobalOption.get_comm_timeout_second() == before
    with pytest.raises(OptionError), GlobalOption.override(zmq_timeout_second=-1.0):
        pass


@pytest.mark.timeout(120)
def test_an_invalid_variable_fails_its_first_use_not_the_import() -> None:
    """``import dtorch`` reads DTORCH_GC_FREEZE; a bad DTORCH_* value must not make the import
    itself raise (a program could not catch it): the first use raises the OptionError."""
    script = (
        "import dtorch\n"
        "try:\n"
        "    dtorch.ones(2).tolist()\n"
        "except dtorch.OptionError as error:\n"
        "    print('refused:', error)\n"
    )
    env = {**os.environ, "DTORCH_COMM_TIMEOUT_SECOND": "-1"}
    done = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused: DTORCH_COMM_TIMEOUT_SECOND='-1' must be a positive" in done.stdout


def test_a_record_renders_as_the_variables_that_parse_back_to_it() -> None:
    """What a worker process is started with (``Options.environ``)."""
    records = [
        Options(),
        Options(
            comm_timeout_second=0.25, zmq_timeout_second=1e9, validate_kernel_input_output=True
        ),
        Options(
            per_device_per_process=True,
            gc_freeze=False,
            keep_freed_memory=False,
            num_gpu_when_enable_dtensor_in_same_device=3,
        ),
    ]
    for record in records:
        assert Options.from_environ(record.environ()) == record
