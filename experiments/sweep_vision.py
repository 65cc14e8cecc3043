"""torchvision models for the sweep: detection, instance segmentation, keypoints, video and
optical flow, from ``torchvision.models.list_models``, ``weights=None``, eval mode, small
inputs. Detection models get a small internal resize (``min_size``/``max_size``) so the
transform does not blow a 64-pixel image up to 800 pixels; SSD models resize to their own
fixed size (their builders set it). Inputs are the smallest each model accepts: RAFT needs
feature maps of 16 (128-pixel frames), S3D a 7x7x2 map before its last pooling (16 frames
of 224 pixels).
"""

from __future__ import annotations

import torch
from sweep_hf import BuildError

IMAGE = 64
# module of torchvision.models -> suite label
FAMILIES = {"detection": "detection", "video": "video", "optical_flow": "optical_flow"}


def architectures() -> dict[str, str]:
    """name -> family, for every model of the families above (the detection family holds
    instance segmentation (Mask R-CNN) and keypoint (Keypoint R-CNN) models too)."""
    import torchvision.models as tvm

    found = {}
    for module, family in FAMILIES.items():
        for name in tvm.list_models(module=getattr(tvm, module)):
            found[name] = family
    return dict(sorted(found.items()))


def build(name: str):
    """(model, args, kwargs) with seeded random weights."""
    import torchvision.models as tvm

    family = architectures().get(name)
    if family is None:
        raise BuildError(f"unknown torchvision model {name!r}")
    options: dict = {"weights": None}
    if family == "detection":
        options["weights_backbone"] = None
        if not name.startswith("ssd"):  # SSD passes its fixed size itself
            options.update(min_size=IMAGE, max_size=IMAGE)
        if name.startswith("keypointrcnn"):
            options["num_keypoints"] = 17
    torch.manual_seed(0)
    try:
        model = tvm.get_model(name, **options).eval()
    except Exception as e:
        raise BuildError(f"construct: {type(e).__name__}: {str(e).splitlines()[0][:200]}") from e
    return model, *inputs(name, family)


def inputs(name: str, family: str, seed: int = 0) -> tuple[tuple, dict]:
    g = torch.Generator().manual_seed(seed)
    if family == "detection":
        return ([torch.rand(3, IMAGE, IMAGE, generator=g)],), {}
    if family == "optical_flow":  # RAFT: two frames, feature maps (side / 8) of 16 at least
        return (torch.rand(1, 3, 2 * IMAGE, 2 * IMAGE, generator=g),
                torch.rand(1, 3, 2 * IMAGE, 2 * IMAGE, generator=g)), {}
    frames, side = (16, 224) if name.startswith("mvit") else (4, 64)
    if name.startswith("s3d"):
        frames, side = 16, 224
    if name.startswith("swin3d"):
        side = 64
    return (torch.rand(1, 3, frames, side, side, generator=g),), {}
