"""A traced program's round trip: trace a tensor-parallel MLP, replay it, save it, load it.

The MLP is Megatron-style on a 1-D "tp" mesh of 2 CPU devices: a column-parallel first layer
(weight Shard(1)), relu, a row-parallel second layer (weight Shard(0), a Partial output) and a
redistribution to Replicate (an all-reduce). ``dtorch.trace`` records its four operators once;
each call replays them as one operator; ``save`` writes them with the weights to one file and
``dtorch.load_program`` runs that file again (here in this process; any process with a mesh of
the same shape can). With ``--picture PATH`` it also writes the program's picture (Graphviz's
``dot`` must be installed): the README's ``docs/program.svg`` comes from
``PYTHONPATH=. .venv/bin/python examples/program.py --picture docs/program.svg``.

Run: PYTHONPATH=. .venv/bin/python examples/program.py [--picture PATH]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch

import dtorch


def round_trip(folder: Path, picture: Path | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(the loaded program's result, torch's) for one new input; prints the summary."""
    mesh = dtorch.init_device_mesh("cpu", 2, mesh_dim_names=("tp",))
    w1 = torch.randn(16, 32)
    w2 = torch.randn(32, 16)
    c1 = dtorch.from_torch(w1, device_mesh=mesh, placements=[dtorch.Shard(1)])
    c2 = dtorch.from_torch(w2, device_mesh=mesh, placements=[dtorch.Shard(0)])

    def mlp(x: dtorch.Tensor) -> dtorch.Tensor:
        h = (x @ c1).relu()  # Shard(1): each device holds half the hidden units
        return (h @ c2).redistribute(mesh, [dtorch.Replicate()])  # Partial -> all-reduce

    example = dtorch.zeros(4, 16, device_mesh=mesh)
    program = dtorch.trace(mlp, example)  # runs once, keeps the four operators
    print(program.summary())
    if picture is not None:
        print("picture:", program.render(picture))
    program.save(folder / "mlp.dtorch")  # operators, meshes as shapes, w1 and w2 as bytes
    loaded = dtorch.load_program(folder / "mlp.dtorch")  # a mesh of the same shape
    x = torch.randn(4, 16)
    y = loaded(dtorch.from_torch(x, device_mesh=mesh))  # one operator: the devices replay
    return y.to_torch(), (x @ w1).relu() @ w2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--picture", type=Path, default=None, help="write the picture here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dtorch-program-") as folder:
        got, expected = round_trip(Path(folder), args.picture)
    torch.testing.assert_close(got, expected)
    print("loaded program's result equals torch's:", tuple(got.shape))


if __name__ == "__main__":
    main()
