"""CPU instructions per ``a + b`` (float32[1]), dtorch vs plain torch, counted by callgrind.

Wall-clock figures on a shared VM move by +-20% (and by 1.6x between its slow and fast
phases), which hides any change smaller than that. Instruction counts do not move: this script
runs the ``op_overhead`` loop under valgrind's callgrind, with instrumentation switched on only
around the measured burst, and prints instructions per operator for torch and dtorch from the
same run. They count every thread (client, controller, streams) but not the kernel's wake-ups
or cache misses, so they rank changes; ``op_overhead.py`` stays the figure against the target.

Needs ``valgrind`` (with ``callgrind_control``) on the PATH; takes about a minute.

Run: .venv/bin/python benchmarks/op_instructions.py [--ops 2000]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: Seconds to wait for a marker of the child (torch's import under valgrind takes ~15 s).
MARKER_TIMEOUT = 300.0


def _wait_for(path: Path, child: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + MARKER_TIMEOUT
    while not path.exists():
        if child.poll() is not None:
            raise RuntimeError(f"the measured process exited early (code {child.returncode})")
        if time.monotonic() > deadline:
            child.kill()
            raise TimeoutError(f"no {path.name} marker within {MARKER_TIMEOUT} s")
        time.sleep(0.1)


def _callgrind(flag: str, pid: int) -> None:
    subprocess.run(["callgrind_control", flag, str(pid)], check=True, capture_output=True)


def _total(out: Path) -> int:
    text = subprocess.run(
        ["callgrind_annotate", str(out)], check=True, capture_output=True, text=True
    ).stdout
    match = re.search(r"([\d,]+) \([^)]*\)\s+PROGRAM TOTALS", text)
    if match is None:
        raise RuntimeError(f"no PROGRAM TOTALS in callgrind_annotate's output for {out}")
    return int(match.group(1).replace(",", ""))


def measure(runtime: str, ops: int) -> float:
    """Instructions per operator of ``runtime`` ("torch" or "dtorch") under callgrind."""
    with tempfile.TemporaryDirectory(prefix="dtorch-instr-") as tmp:
        folder = Path(tmp)
        command = [
            "valgrind", "--tool=callgrind", "--instr-atstart=no",
            f"--callgrind-out-file={folder / 'cg.out'}",
            sys.executable, __file__, "--child", runtime, "--ops", str(ops), "--dir", tmp,
        ]  # fmt: skip
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        log = (folder / "valgrind.log").open("wb")  # valgrind's chatter; shown if it fails
        child = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            _wait_for(folder / "ready", child)
            _callgrind("--instr=on", child.pid)
            (folder / "go").touch()
            _wait_for(folder / "done", child)
            _callgrind("--instr=off", child.pid)
            (folder / "exit").touch()
            child.wait(timeout=MARKER_TIMEOUT)
        except Exception:
            sys.stderr.write((folder / "valgrind.log").read_text(errors="replace")[-4000:])
            raise
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
            log.close()
        return _total(folder / "cg.out") / ops


def _child(runtime: str, ops: int, folder: Path) -> None:
    """The measured process: warm up, then one burst between the driver's markers."""
    import torch

    if runtime == "dtorch":
        import dtorch

        graph = dtorch.Graph()
        a, b = dtorch.ones(1, graph=graph), dtorch.ones(1, graph=graph)

        def burst() -> None:
            c = a
            for _ in range(ops):
                c = a + b
            c.to_torch()
    else:
        x, y = torch.ones(1), torch.ones(1)

        def burst() -> None:
            c = x
            for _ in range(ops):
                c = x + y
            c.tolist()

    burst()
    burst()
    (folder / "ready").touch()
    while not (folder / "go").exists():
        time.sleep(0.05)
    burst()
    (folder / "done").touch()
    while not (folder / "exit").exists():
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--child", choices=["torch", "dtorch"], help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.ops, Path(args.dir))
        return
    missing = [tool for tool in ("valgrind", "callgrind_control") if shutil.which(tool) is None]
    if missing:
        sys.exit(
            f"op_instructions needs {' and '.join(missing)} on the PATH (apt install valgrind)"
        )
    torch_instr = measure("torch", args.ops)
    dtorch_instr = measure("dtorch", args.ops)
    print(f"a + b on float32[1], {args.ops} ops after 2 warm-up bursts, callgrind instructions")
    print("| runtime | instructions per op | ratio to torch |")
    print("| --- | ---: | ---: |")
    print(f"| torch (eager, one device) | {torch_instr:,.0f} | 1.00 |")
    ratio = dtorch_instr / torch_instr
    print(f"| dtorch (thread mode, one device) | {dtorch_instr:,.0f} | {ratio:.2f} |")
    print()
    print("command: .venv/bin/python benchmarks/op_instructions.py")


if __name__ == "__main__":
    main()
