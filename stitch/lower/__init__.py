"""lower: turn the stitched ExportedProgram into something that runs fast.

Backends (``BACKENDS``, one builder each): ``eager`` (the graph module), ``inductor``
(torch.compile of it, one graph), ``aoti`` (AOTInductor package), ``tensorrt`` (needs a GPU;
``tensorrt_plan`` works without one), ``onnxruntime`` (the graph as ONNX, run by ONNX
Runtime; every branch side checked forced).
"""

from .backends import BACKENDS, Built, build
from .tensorrt import TensorRTPlan, tensorrt_plan
from .tensorrt_engine import TensorRTEngine, tensorrt_engine

__all__ = ["BACKENDS", "Built", "TensorRTEngine", "TensorRTPlan", "build", "tensorrt_engine",
           "tensorrt_plan"]
