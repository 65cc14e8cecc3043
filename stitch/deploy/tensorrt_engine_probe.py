"""Subprocess body of ``tensorrt_engine``: parse ONNX with TensorRT's ONNX parser and build a
serialized engine (no GPU needed with TensorRT-RTX). Prints one ``ENGINE {json}`` line.

    python stitch/deploy/tensorrt_engine_probe.py MODEL.onnx ENGINE_OUT PROFILES_JSON

Run as a script: it imports nothing from stitch (nor torch), only TensorRT.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter


def _tensorrt():
    try:
        import tensorrt_rtx as trt  # builds without a GPU
        return trt, "tensorrt_rtx"
    except ImportError:
        import tensorrt as trt  # standard TensorRT: needs a GPU to build
        return trt, "tensorrt"


def main(model_path: str, engine_path: str, profiles_json: str) -> None:
    trt, flavour = _tensorrt()
    messages: list[str] = []

    class Logger(trt.ILogger):
        def __init__(self) -> None:
            trt.ILogger.__init__(self)

        def log(self, severity, msg) -> None:
            if severity <= trt.ILogger.Severity.WARNING:
                messages.append(f"{severity.name}: {msg}")

    logger = Logger()
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    result = {"flavour": flavour, "version": trt.__version__, "refusals": [], "layers": {},
              "conditionals": 0, "loops": 0, "bytes": 0, "build_seconds": None,
              "messages": messages}
    if not parser.parse_from_file(model_path):
        for i in range(parser.num_errors):
            error = parser.get_error(i)
            result["refusals"].append({"node": error.node_name(), "index": error.node(),
                                       "operator": error.node_operator(),
                                       "why": error.desc(), "code": str(error.code())})
        print("ENGINE " + json.dumps(result))
        return
    kinds = Counter(network.get_layer(i).type.name for i in range(network.num_layers))
    result["layers"] = dict(sorted(kinds.items()))
    result["conditionals"] = kinds.get("CONDITION", 0)
    result["loops"] = kinds.get("TRIP_LIMIT", 0)
    result["inputs"] = [{"name": network.get_input(i).name,
                         "shape": list(network.get_input(i).shape),
                         "dtype": network.get_input(i).dtype.name}
                        for i in range(network.num_inputs)]
    config = builder.create_builder_config()
    profiles = json.loads(profiles_json)
    if profiles:
        profile = builder.create_optimization_profile()
        for name, (low, opt, high) in profiles.items():
            profile.set_shape(name, low, opt, high)
        config.add_optimization_profile(profile)
    start = time.perf_counter()
    engine = builder.build_serialized_network(network, config)
    result["build_seconds"] = round(time.perf_counter() - start, 3)
    if engine is None:
        result["refusals"].append({"node": "", "index": -1, "operator": "",
                                   "why": "the builder returned no engine: "
                                   + "; ".join(messages[-3:]), "code": "BUILD"})
    else:
        data = bytes(engine)
        with open(engine_path, "wb") as f:
            f.write(data)
        result["bytes"] = len(data)
    print("ENGINE " + json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
