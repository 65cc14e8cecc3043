"""lower: turn the stitched ExportedProgram into something that runs fast.

Backends (``BACKENDS``, one builder each): ``eager`` (the graph module), ``inductor``
(torch.compile of it, one graph), ``aoti`` (AOTInductor package), ``tensorrt`` (needs a GPU;
``tensorrt_plan`` works without one).
"""

from .backends import BACKENDS, Built, build
from .tensorrt import TensorRTPlan, tensorrt_plan

__all__ = ["BACKENDS", "Built", "TensorRTPlan", "build", "tensorrt_plan"]
