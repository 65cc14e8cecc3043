"""Models whose module names torch otherwise: ``import torch as th`` and functions imported
from torch, with no name ``torch`` at all (test_torch_names.py)."""

import torch as th
from torch import cat, nn, split


class AttrDict(dict):
    """A config pattern: any missing attribute raises KeyError (not AttributeError)."""

    __getattr__ = dict.__getitem__


cfg = AttrDict(width=4)  # a module global torch_names must not read attributes of


class AliasedSplitMap(nn.Module):
    """Split by sizes from data, map, concatenate (split_map), through the aliases."""

    def forward(self, x, counts):
        counts = counts[counts >= 0]  # their number known only at run time
        parts = split(x, counts.tolist())
        return cat([p.softmax(0) * th.tensor(2.0) for p in parts])


class AliasedNumberList(nn.Module):
    """A list grown by ``.tolist()`` then made a tensor (number_list), through the aliases."""

    def forward(self, x, grid):
        bounds = [0]
        for t, n in grid.tolist():
            sizes = th.arange(n) % 3 + t  # n from data: a list of a length known at run time
            bounds.extend((sizes.cumsum(0) + bounds[-1]).tolist())
        bounds = th.tensor(bounds, dtype=th.int64)
        return x * bounds[-1] + bounds[1:].sum()
