"""timm models for the sweep: one per family (the timm module that defines it), built as a
user builds one, ``timm.create_model(name, pretrained=False)``, eval mode.

Which model of a family: one of timm's own ``test_*`` models where the family has one (tiny
models timm keeps for its tests); otherwise the name that reads smallest (``SIZE_WORDS``:
atto < femto < pico < nano < xxs < xs < tiny < mini < small < medium < base < large < huge,
xl < giant, a name without a size word ranking between small and medium), then the smallest
numbers in the name (depth, width, patch size), then the shortest name. Building every model
to count its parameters would take minutes per listing; a chosen model over 30M parameters
is not built, with that reason.

Examples at the model's default input size (``pretrained_cfg['input_size']``): batch 1,
batch 2, and (optional: kept where the model takes it) batch 1 at 32 pixels more on each
side.
"""

from __future__ import annotations

import re

from sweep_libs import Built, construct, images

SIZE_WORDS = {"test": 0, "atto": 1, "femto": 2, "pico": 3, "nano": 4, "xxtiny": 5, "xxs": 5,
              "xx": 5, "xtiny": 6, "xs": 6, "tiny": 7, "t": 7, "ti": 7, "mini": 8, "small": 9,
              "s": 9, "medium": 11, "m": 11, "base": 12, "b": 12, "large": 13, "l": 13,
              "huge": 14, "h": 14, "xl": 14, "giant": 15, "g": 15}
UNSIZED = 10


def size_key(name: str) -> tuple:
    words = [re.sub(r"\d+", "", part) for part in name.split("_")]
    rank = min((SIZE_WORDS[w] for w in words if w in SIZE_WORDS), default=UNSIZED)
    return rank, tuple(int(n) for n in re.findall(r"\d+", name)), len(name), name


def architectures() -> dict[str, str]:
    """The chosen model name -> its family."""
    import timm
    from timm.models._registry import _model_to_module

    families: dict[str, list[str]] = {}
    for name in timm.list_models():
        families.setdefault(_model_to_module[name], []).append(name)
    chosen = {min(names, key=size_key): family for family, names in families.items()}
    return dict(sorted(chosen.items()))


def build(name: str) -> Built:
    import timm

    model = construct(timm.create_model, name, pretrained=False)
    _, height, width = model.pretrained_cfg.get("input_size", (3, 224, 224))
    channels = model.pretrained_cfg.get("input_size", (3,))[0]
    first, second, other = images(channels, [(1, height, width), (2, height, width),
                                             (1, height + 32, width + 32)])
    return Built(model, [((first,), {}), ((second,), {})], [((other,), {})])
