"""lower: turn the stitched ExportedProgram into something that runs fast.

Backends (``BACKENDS``, one builder each): ``eager`` (the graph module), ``inductor``
(torch.compile of it, one graph), ``aoti`` (AOTInductor package), ``tensorrt`` (needs a GPU;
``stitch.tensorrt_plan`` works without one), ``onnxruntime`` (the graph as ONNX, run by ONNX
Runtime; every branch side checked forced).
"""

from .backends import BACKENDS, Built, build

__all__ = ["BACKENDS", "Built", "build"]
