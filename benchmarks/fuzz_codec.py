"""Long fuzz campaign for the codec: any bytes must decode or raise DeserializationError.

Mutates valid payloads (bit flips, truncations, splices, absurd lengths, deep nesting, frame
header fields, and structural edits of the MessagePack document re-framed with correct sizes)
and adds random bytes, then counts the outcome of ``deserialize`` per class: accepted, each
DeserializationError subclass, and FAILURE for any other exception. Each case is seeded by
``(seed, index)``, so ``--replay INDEX`` reproduces one. Exits 1 if any case failed.

Run:  .venv/bin/python benchmarks/fuzz_codec.py --count 1000000 --seed 0
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter

from dtorch.errors import DeserializationError
from dtorch.serialization import deserialize
from dtorch.serialization.fuzz import MUTATORS, sample_payloads


def one_case(seed: int, index: int, payloads: list[bytes]) -> tuple[str, bytes]:
    """The mutator name and the input of case ``index``."""
    rng = random.Random(f"{seed}:{index}")
    name = rng.choice(sorted(MUTATORS))
    return name, MUTATORS[name](rng, rng.choice(payloads))


def outcome(data: bytes) -> str:
    """``accepted``, the DeserializationError class name, or ``FAILURE <type>``."""
    try:
        deserialize(data)
    except DeserializationError as exc:
        return type(exc).__name__
    except Exception as exc:  # the campaign exists to find these
        return f"FAILURE {type(exc).__name__}: {exc}"
    return "accepted"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--replay", type=int, default=None, help="run one case and show it")
    args = parser.parse_args(argv)
    payloads = sample_payloads()
    if args.replay is not None:
        name, data = one_case(args.seed, args.replay, payloads)
        print(f"case {args.replay} ({name}), {len(data)} bytes: {data[:256].hex()}")
        print(outcome(data))
        return 0
    print(f"command: .venv/bin/python {' '.join(sys.argv)}")
    counts: Counter[str] = Counter()
    per_mutator: Counter[tuple[str, str]] = Counter()
    failures: list[str] = []
    start = time.perf_counter()
    for index in range(args.count):
        name, data = one_case(args.seed, index, payloads)
        result = outcome(data)
        kind = result.split(":")[0]
        counts[kind] += 1
        per_mutator[name, kind] += 1
        if kind.startswith("FAILURE") and len(failures) < 20:
            failures.append(f"case {index} ({name}): {result}")
    elapsed = time.perf_counter() - start
    print(
        f"{args.count:,} cases in {elapsed:.1f} s ({args.count / elapsed:,.0f}/s), seed {args.seed}"
    )
    for kind, count in counts.most_common():
        print(f"  {count:>10,}  {kind}")
    print("per mutator:")
    for (name, kind), count in sorted(per_mutator.items()):
        print(f"  {name:>14}  {kind:<28} {count:>10,}")
    for line in failures:
        print(line)
    failed = sum(c for k, c in counts.items() if k.startswith("FAILURE"))
    print("result:", "FAILED" if failed else "ok", f"({failed} failures)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
