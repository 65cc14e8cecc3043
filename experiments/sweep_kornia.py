"""kornia modules for the sweep: every ``nn.Module`` class that ``kornia.feature``,
``kornia.filters``, ``kornia.geometry``, ``kornia.enhance`` and ``kornia.color`` export,
built with its defaults (``ARGS`` gives the arguments a class requires, as its docstring
example does; ``pretrained=False`` wherever the class takes it), eval mode.

Left out (``EXCLUDED``): classes that are no image operation (Lie groups, quaternions, lines,
planes, RANSAC, the image registrator's models) and those made of other modules given to
them (``LocalFeature``, ``MultiResolutionDetector``...). Classes that load pretrained
weights in their constructor with no way to turn it off fail to build (the network is
closed), named as such.

Inputs: the first of ``TRY`` that the module runs eagerly at batch 1 (an RGB image, a
grayscale one, RGBA, a patch of the module's ``patch_size`` or 32 pixels, a volume), or the
inputs ``INPUTS`` names for modules of more than one input. Images are 64 pixels. The other
examples are optional, as some detectors take one image only: batch 2, then batch 1 at
48 x 80 pixels.
"""

from __future__ import annotations

import inspect

import torch
from sweep_hf import BuildError
from sweep_libs import Built, construct, eager, images

SUBMODULES = ("feature", "filters", "geometry", "enhance", "color")
EXCLUDED_MODULES = ("kornia.geometry.liegroup", "kornia.geometry.quaternion",
                    "kornia.geometry.plane", "kornia.geometry.line", "kornia.geometry.ransac",
                    "kornia.geometry.transform.image_registrator")
EXCLUDED = {"LocalFeature", "LocalFeatureMatcher", "MultiResolutionDetector", "BaseWarper",
            "DepthWarper", "GeometryAwareDescriptorMatcher", "LightGlueMatcher",
            "SIFTDescriptorFromPyramid", "LAFDescriptor", "InterpolateSparse2d",
            "XFeat",  # no forward: its entry points are detect/describe methods
            "ZCAWhitening"}  # needs fit() on images of the input's own size first
MEAN_STD = (torch.tensor([0.5, 0.5, 0.5]), torch.tensor([0.25, 0.25, 0.25]))


def _args() -> dict[str, tuple]:
    from kornia.color import CFA, ColorMap

    blur = ((5, 5), (1.5, 1.5))
    return {
        "CornerHarris": (0.04,), "FilterResponseNorm2d": (3,), "TLU": (3,),
        "BilateralBlur": (5, 0.1, (1.5, 1.5)), "JointBilateralBlur": (5, 0.1, (1.5, 1.5)),
        "BlurPool2D": (3,), "EdgeAwareBlurPool2D": (3,), "MaxBlurPool2D": (3,),
        "BoxBlur": ((3, 3),), "MedianBlur": ((3, 3),), "Laplacian": (3,),
        "GaussianBlur2d": blur, "UnsharpMask": blur, "GuidedBlur": (3, 0.1),
        "InRange": ((0.2, 0.2, 0.2), (0.8, 0.8, 0.8)), "MotionBlur": (5, 35.0, 0.5),
        "MotionBlur3D": (5, (0.0, 0.0, 35.0), 0.5), "CenterCrop2D": ((32, 32),),
        "HomographyWarper": (32, 32), "NonMaximaSuppression2d": ((3, 3),),
        "NonMaximaSuppression3d": ((3, 3, 3),), "Rescale": (0.5,), "Resize": ((32, 32),),
        "Rotate": (torch.tensor([30.0]),), "Translate": (torch.tensor([[2.0, 3.0]]),),
        "Scale": (torch.tensor([[0.8, 0.8]]),), "Shear": (torch.tensor([[0.1, 0.2]]),),
        "AddWeighted": (0.5, 0.5, 0.1), "AdjustBrightness": (0.2,),
        "AdjustBrightnessAccumulative": (0.2,), "AdjustContrast": (0.8,),
        "AdjustContrastWithMeanSubtraction": (0.8,), "AdjustGamma": (1.5,),
        "AdjustHue": (0.3,), "AdjustSaturation": (1.5,),
        "AdjustSaturationWithGraySubtraction": (1.5,), "Normalize": MEAN_STD,
        "Denormalize": MEAN_STD, "Threshold": (0.5,), "ApplyColorMap": (ColorMap("viridis"),),
        "BgrToRgba": (1.0,), "RgbToRgba": (1.0,), "RawToRgb": (CFA.BG,),
        "RawToRgb2x2Downscaled": (CFA.BG,), "RgbToRaw": (CFA.BG,),
        "LightGlue": (None,),  # features=None: default_conf, no weights
    }


# modules of more than one input: what they take
INPUTS = {"AddWeighted": "two_rgb", "JointBilateralBlur": "two_rgb", "GuidedBlur": "two_rgb",
          "HomographyWarper": "rgb_homography", "Yuv420ToRgb": "yuv420",
          "Yuv422ToRgb": "yuv422", "DescriptorMatcher": "descriptors", "LoFTR": "gray_pair",
          "LightGlue": "keypoints_pair", "JPEGCodecDifferentiable": "rgb_quality",
          **dict.fromkeys(["LAFOrienter", "LAFAffineShapeEstimator", "LAFAffNetShapeEstimator",
                           "PassLAF"], "lafs_gray")}
TRY = ("rgb", "gray", "rgba", "patch", "volume")
SIZES = ((64, 64), (48, 80))


def architectures() -> dict[str, str]:
    import kornia

    found = {}
    for sub in SUBMODULES:
        namespace = getattr(kornia, sub)
        for name in dir(namespace):
            cls = getattr(namespace, name)
            if (inspect.isclass(cls) and issubclass(cls, torch.nn.Module)
                    and name not in EXCLUDED and not cls.__module__.startswith(EXCLUDED_MODULES)):
                found[name] = sub
    return dict(sorted(found.items()))


def build(name: str) -> Built:
    import kornia

    cls = getattr(getattr(kornia, architectures()[name]), name)
    options = {}
    if "pretrained" in inspect.signature(cls.__init__).parameters:
        options["pretrained"] = None if name == "LoFTR" else False
    model = construct(cls, *_args().get(name, ()), **options)
    patch = getattr(model, "patch_size", 32)
    errors = []
    for kind in [INPUTS[name]] if name in INPUTS else TRY:
        first = inputs(kind, 1, *SIZES[0], seed=0, patch=patch)
        try:
            eager(model, first)
        except Exception as e:
            errors.append(f"{kind}: {type(e).__name__}: {str(e).splitlines()[0][:120]}")
            continue
        return Built(model, [first], [inputs(kind, 2, *SIZES[0], seed=1, patch=patch),
                                      inputs(kind, 1, *SIZES[1], seed=2, patch=patch)])
    raise BuildError("no input fits: " + "; ".join(errors))


def inputs(kind: str, batch: int, height: int, width: int, seed: int,
           patch: int = 32) -> tuple[tuple, dict]:
    g = torch.Generator().manual_seed(seed)

    def image(channels, h=height, w=width):
        return images(channels, [(batch, h, w)], seed=seed, low=0.05)[0]

    if kind in ("rgb", "gray", "rgba"):
        return (image({"rgb": 3, "gray": 1, "rgba": 4}[kind]),), {}
    if kind == "patch":
        return (image(1, patch, patch),), {}
    if kind == "rgb_quality":
        return (image(3), torch.full((batch,), 75.0)), {}
    if kind == "lafs_gray":  # 5 local affine frames (LAFs) per image: centre, scale, angle
        from kornia.feature import laf_from_center_scale_ori

        centres = torch.tensor([width - 1.0, height - 1.0]) * (
            0.25 + 0.5 * torch.rand(batch, 5, 2, generator=g))
        lafs = laf_from_center_scale_ori(centres, torch.full((batch, 5, 1, 1), 8.0),
                                         360 * torch.rand(batch, 5, 1, generator=g))
        return (lafs, image(1)), {}
    if kind == "volume":
        return (image(1, 4, height).reshape(batch, 1, 4, height, 1).expand(-1, -1, -1, -1,
                                                                            width),), {}
    if kind == "two_rgb":
        return (image(3), images(3, [(batch, height, width)], seed=seed + 10)[0]), {}
    if kind == "rgb_homography":
        homography = torch.eye(3) + 0.05 * torch.randn(batch, 3, 3, generator=g)
        return (image(3), homography), {}
    if kind in ("yuv420", "yuv422"):
        rows = height // 2 if kind == "yuv420" else height
        return (image(1), image(2, rows, width // 2) - 0.5), {}
    if kind == "descriptors":  # one set of descriptors per "batch" of 8 keypoints
        return (torch.randn(8 * batch, 128, generator=g),
                torch.randn(8 * batch + 3, 128, generator=g)), {}
    if kind == "gray_pair":
        return ({"image0": image(1), "image1": image(1)},), {}
    if kind == "keypoints_pair":
        def side(n):
            return {"keypoints": torch.rand(batch, n, 2, generator=g),
                    "descriptors": torch.randn(batch, n, 256, generator=g),
                    "image_size": torch.tensor([[width, height]] * batch)}
        return ({"image0": side(12), "image1": side(9)},), {}
    raise KeyError(kind)
