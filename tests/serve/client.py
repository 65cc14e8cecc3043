"""Client half of the serving tests; runs under .venv-serve (tritonclient, numpy<2).

    python client.py CONFIG.json     # writes CONFIG["out"] (npz) and CONFIG["out"].json

Sends every example over HTTP and gRPC (request ids ``http-i`` / ``grpc-i``), then the bad
requests, then a client that disconnects mid-request, then one more good request.
"""

import json
import socket
import sys
import time

import numpy as np
import tritonclient.grpc as tgrpc
import tritonclient.http as thttp
from tritonclient.utils import InferenceServerException


def infer(module, client, model, name, array, datatype, rid):
    tensor = module.InferInput(name, list(array.shape), datatype)
    tensor.set_data_from_numpy(array)
    result = client.infer(model, [tensor], request_id=rid, parameters={"request_id": rid})
    return result.as_numpy(OUTPUT)


def error_of(call):
    try:
        call()
    except InferenceServerException as e:
        return str(e)
    return None


def disconnect_mid_request(host, port, model):
    body = json.dumps({"inputs": [{"name": INPUT, "shape": [1, 32], "datatype": "FP32",
                                   "data": [0.0] * 32}]}).encode()
    head = (f"POST /v2/models/{model}/infer HTTP/1.1\r\nHost: {host}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body) * 4}\r\n\r\n")
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(head.encode() + body[: len(body) // 2])  # half a body, then gone
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(head.replace(str(len(body) * 4), str(len(body))).encode() + body)
        # a whole request, but the client leaves before the answer
    time.sleep(0.5)


def main(config_path):
    global INPUT, OUTPUT
    config = json.load(open(config_path))
    INPUT, OUTPUT, model = config["input"], config["output"], config["model"]
    examples = np.load(config["inputs"])
    http = thttp.InferenceServerClient(f"{config['host']}:{config['http_port']}")
    grpc = tgrpc.InferenceServerClient(f"{config['host']}:{config['grpc_port']}")
    outputs, report = {}, {}
    for i in range(len(examples.files)):
        x = examples[f"x{i}"]
        outputs[f"http-{i}"] = infer(thttp, http, model, INPUT, x, "FP32", f"http-{i}")
        outputs[f"grpc-{i}"] = infer(tgrpc, grpc, model, INPUT, x, "FP32", f"grpc-{i}")
    x = examples["x0"]
    report["errors"] = {
        "wrong_name": error_of(lambda: infer(thttp, http, model, "nope", x, "FP32", "bad-1")),
        "wrong_dtype": error_of(lambda: infer(thttp, http, model, INPUT, x.astype(np.float64),
                                              "FP64", "bad-2")),
        "wrong_shape": error_of(lambda: infer(thttp, http, model, INPUT, x[:, :-1].copy(),
                                              "FP32", "bad-3")),
        "batch_too_large": error_of(lambda: infer(
            thttp, http, model, INPUT, np.zeros((config["too_large"], x.shape[1]), np.float32),
            "FP32", "bad-4")),
        "model_check": error_of(lambda: infer(thttp, http, model, INPUT,
                                              np.full(x.shape, 1e9, np.float32), "FP32",
                                              "bad-5")),
    }
    disconnect_mid_request(config["host"], config["http_port"], model)
    outputs["after"] = infer(thttp, http, model, INPUT, x, "FP32", "after")
    report["live"] = http.is_server_live() and http.is_model_ready(model)
    np.savez(config["out"], **outputs)
    json.dump(report, open(config["out"] + ".json", "w"))


if __name__ == "__main__":
    main(sys.argv[1])
