"""ResNet-18, ResNet-50 and AlexNet written with ``dtorch.nn``: torchvision's architectures.

The modules, their attributes and therefore their parameter and buffer names are
torchvision's (``conv1``, ``bn1``, ``layer1.0.downsample.0``, ``fc``; ``features.0``,
``classifier.6``), so the ``state_dict()`` of a torchvision model (or of any torch.nn model
written the same way) loads strictly. Every constructor takes ``num_classes=``,
``device_mesh=`` (None: the default graph's default mesh) and ``dtype=``; the parameters are
Replicate on every mesh dim, and a batch sharded on a ``dp`` mesh dim stays sharded through
every layer (BatchNorm's training statistics are over the whole batch however it is sharded).
The ReLUs and the residual additions (``out += identity``) are in place, as torchvision's
are: each is one operator whose devices write the input's shards (no temporary, no copy).

* ``ResNet(block, layers)`` with ``BasicBlock`` (two 3x3 convs) or ``Bottleneck`` (1x1, 3x3,
  1x1 with 4x expansion), a 1x1-conv + BatchNorm ``downsample`` where the shape changes, the
  7x7 stride-2 stem and 3x3 max pool, and an ``AdaptiveAvgPool2d((1, 1))`` + ``Linear`` head;
  ``resnet18`` and ``resnet50`` build the two standard depths.
* ``AlexNet``: ``features`` (five convs, three max pools), ``avgpool``
  (``AdaptiveAvgPool2d((6, 6))``) and ``classifier`` (Dropout, Linear, ReLU twice, Linear).

Example:
    >>> import torch, dtorch
    >>> from dtorch import Shard
    >>> from examples.vision import resnet18
    >>> mesh = dtorch.init_device_mesh("cpu", (2,), mesh_dim_names=("dp",))
    >>> model = resnet18(num_classes=10, device_mesh=mesh).eval()
    >>> x = dtorch.from_torch(torch.randn(3, 3, 32, 32), device_mesh=mesh, placements=[Shard(0)])
    >>> y = model(x)
    >>> y.shape, y.placements
    (torch.Size([3, 10]), [Shard(dim=0)])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

import dtorch
from dtorch import nn


def conv3x3(in_planes: int, out_planes: int, stride: int = 1, groups: int = 1,
            dilation: int = 1, **layer: Any) -> nn.Conv2d:  # fmt: skip
    """A 3x3 convolution with padding and no bias (torchvision's ``conv3x3``)."""
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=dilation,
                     groups=groups, bias=False, dilation=dilation, **layer)  # fmt: skip


def conv1x1(in_planes: int, out_planes: int, stride: int = 1, **layer: Any) -> nn.Conv2d:
    """A 1x1 convolution without bias (torchvision's ``conv1x1``)."""
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False, **layer)


class BasicBlock(nn.Module):
    """Two 3x3 conv + BatchNorm layers and a residual connection (ResNet-18/34).

    Example:
        >>> import dtorch
        >>> from examples.vision import BasicBlock
        >>> BasicBlock(8, 8)(dtorch.randn(1, 8, 5, 5)).shape
        torch.Size([1, 8, 5, 5])
    """

    expansion = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1,
                 downsample: nn.Module | None = None, **layer: Any) -> None:  # fmt: skip
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride, **layer)
        self.bn1 = nn.BatchNorm2d(planes, **layer)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes, **layer)
        self.bn2 = nn.BatchNorm2d(planes, **layer)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: dtorch.Tensor) -> dtorch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += identity  # one operator writing ``out``'s shards, as torchvision's
        return self.relu(out)


class Bottleneck(nn.Module):
    """1x1 (reduce), 3x3 (stride here, as torchvision's V1.5) and 1x1 (expand 4x) conv +
    BatchNorm layers and a residual connection (ResNet-50/101/152).

    Example:
        >>> import dtorch
        >>> from examples.vision import Bottleneck
        >>> Bottleneck(16, 4)(dtorch.randn(1, 16, 5, 5)).shape
        torch.Size([1, 16, 5, 5])
    """

    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1,
                 downsample: nn.Module | None = None, **layer: Any) -> None:  # fmt: skip
        super().__init__()
        self.conv1 = conv1x1(inplanes, planes, **layer)
        self.bn1 = nn.BatchNorm2d(planes, **layer)
        self.conv2 = conv3x3(planes, planes, stride, **layer)
        self.bn2 = nn.BatchNorm2d(planes, **layer)
        self.conv3 = conv1x1(planes, planes * self.expansion, **layer)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion, **layer)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: dtorch.Tensor) -> dtorch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        out += identity
        return self.relu(out)


Block = type[BasicBlock] | type[Bottleneck]


class ResNet(nn.Module):
    """torchvision's ResNet: stem, four stages of ``block`` (``layers[i]`` blocks each, 64 to
    512 planes, stride 2 from the second stage), global average pool and a Linear head.

    Example:
        >>> import dtorch
        >>> from examples.vision import BasicBlock, ResNet
        >>> model = ResNet(BasicBlock, [1, 1, 1, 1], num_classes=4, dtype=dtorch.float64)
        >>> model.fc, model.layer2[0].downsample[0].weight.dtype
        (Linear(in_features=512, out_features=4, bias=True), torch.float64)
    """

    def __init__(
        self,
        block: Block,
        layers: Sequence[int],
        num_classes: int = 1000,
        *,
        device_mesh: dtorch.DeviceMesh | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        layer: dict[str, Any] = {"device_mesh": device_mesh, "dtype": dtype}
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False, **layer)
        self.bn1 = nn.BatchNorm2d(64, **layer)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, 64, layers[0], 1, layer)
        self.layer2 = self._make_layer(block, 128, layers[1], 2, layer)
        self.layer3 = self._make_layer(block, 256, layers[2], 2, layer)
        self.layer4 = self._make_layer(block, 512, layers[3], 2, layer)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes, **layer)

    def _make_layer(
        self, block: Block, planes: int, blocks: int, stride: int, layer: dict[str, Any]
    ) -> nn.Sequential:
        """One stage; its first block downsamples where the stride or the width changes."""
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                conv1x1(self.inplanes, planes * block.expansion, stride, **layer),
                nn.BatchNorm2d(planes * block.expansion, **layer),
            )
        stage = [block(self.inplanes, planes, stride, downsample, **layer)]
        self.inplanes = planes * block.expansion
        stage += [block(self.inplanes, planes, **layer) for _ in range(1, blocks)]
        return nn.Sequential(*stage)

    def forward(self, x: dtorch.Tensor) -> dtorch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(self.avgpool(x).flatten(1))


def resnet18(num_classes: int = 1000, **layer: Any) -> ResNet:
    """ResNet-18: ``BasicBlock`` stages of 2, 2, 2, 2 blocks (11.7M parameters at 1000
    classes); ``layer`` is ``device_mesh=`` and ``dtype=``.

    Example:
        >>> from examples.vision import resnet18
        >>> sum(p.numel() for p in resnet18().parameters())
        11689512
    """
    return ResNet(BasicBlock, [2, 2, 2, 2], num_classes, **layer)


def resnet50(num_classes: int = 1000, **layer: Any) -> ResNet:
    """ResNet-50: ``Bottleneck`` stages of 3, 4, 6, 3 blocks (25.6M parameters at 1000
    classes); ``layer`` is ``device_mesh=`` and ``dtype=``.

    Example:
        >>> from examples.vision import resnet50
        >>> len(resnet50(num_classes=10).state_dict())
        320
    """
    return ResNet(Bottleneck, [3, 4, 6, 3], num_classes, **layer)


class AlexNet(nn.Module):
    """torchvision's AlexNet: ``features``, ``avgpool`` to 6x6 and the ``classifier``
    (``dropout`` is the probability of its two Dropout layers; identity in eval mode).

    Example:
        >>> from examples.vision import AlexNet
        >>> AlexNet(num_classes=10).classifier[6]
        Linear(in_features=4096, out_features=10, bias=True)
    """

    def __init__(
        self,
        num_classes: int = 1000,
        dropout: float = 0.5,
        *,
        device_mesh: dtorch.DeviceMesh | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        layer: dict[str, Any] = {"device_mesh": device_mesh, "dtype": dtype}
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, kernel_size=11, stride=4, padding=2, **layer),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(64, 192, kernel_size=5, padding=2, **layer),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(192, 384, kernel_size=3, padding=1, **layer),
            nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, kernel_size=3, padding=1, **layer),
            nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, kernel_size=3, padding=1, **layer),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
        )
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))
        self.classifier = nn.Sequential(
            nn.Dropout(p=dropout),
            nn.Linear(256 * 6 * 6, 4096, **layer),
            nn.ReLU(inplace=True),
            nn.Dropout(p=dropout),
            nn.Linear(4096, 4096, **layer),
            nn.ReLU(inplace=True),
            nn.Linear(4096, num_classes, **layer),
        )

    def forward(self, x: dtorch.Tensor) -> dtorch.Tensor:
        return self.classifier(self.avgpool(self.features(x)).flatten(1))


def alexnet(num_classes: int = 1000, **layer: Any) -> AlexNet:
    """AlexNet (61.1M parameters at 1000 classes); ``layer`` is ``dropout=``,
    ``device_mesh=`` and ``dtype=``.

    Example:
        >>> from examples.vision import alexnet
        >>> alexnet(num_classes=10).features[0]
        Conv2d(3, 64, kernel_size=(11, 11), stride=(4, 4), padding=(2, 2))
    """
    return AlexNet(num_classes, **layer)


__all__ = [
    "AlexNet",
    "BasicBlock",
    "Bottleneck",
    "ResNet",
    "alexnet",
    "conv1x1",
    "conv3x3",
    "resnet18",
    "resnet50",
]
