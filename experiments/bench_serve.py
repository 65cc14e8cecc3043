"""``make bench-serve``: stitch serve (PyTriton / Triton) vs a plain FastAPI endpoint, same
artifact, loopback, one run. Runs under .venv-serve.

For 1, 4 and 8 concurrent clients (threads, one HTTP connection each, a fixed number of
requests each) it records per-request latency (median, p99) and throughput. Both servers run
the same artifact through the same request path (check, graph, epilogue logged with the
request id); the difference is the server. Results: experiments/results/serve.json and
serve.md. Bounded: every request has a timeout, every server is stopped by its handle.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "serve"))
from serving import Server, free_ports  # noqa: E402

CLIENTS = [1, 4, 8]
REQUESTS = int(os.environ.get("STITCH_SERVE_REQUESTS", "200"))  # per client
BATCH = 4

BASELINE = '''
import logging, sys
import numpy as np
from fastapi import FastAPI, Request, Response
import uvicorn
from stitch.serve import logs
from stitch.serve.server import ServeOptions, prepare

logs.install("INFO")
runner, variant = prepare(sys.argv[1], ServeOptions())
spec = runner.spec
app = FastAPI()

@app.post("/infer")
async def infer(request: Request):
    shape = [int(d) for d in request.headers["x-shape"].split(",")]
    x = np.frombuffer(await request.body(), np.float32).reshape(shape)
    try:
        out = runner({spec.inputs[0].name: x}, request.headers.get("x-request-id"))
    except Exception as e:
        return Response(f"{type(e).__name__}: {e}", status_code=400)
    y = out[spec.outputs[0].name]
    return Response(y.tobytes(), media_type="application/octet-stream",
                    headers={"x-shape": ",".join(map(str, y.shape))})

@app.get("/ready")
def ready():
    return {"ready": True}

uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
'''


def build_artifact(path: str) -> None:
    subprocess.run([sys.executable, "-m", "stitch", "export", "stitch.demo_model:make_demo",
                    "-o", path, "--backend", "aoti", "--dynamic-batch", "16"],
                   check=True, cwd=REPO, capture_output=True, timeout=600)


def triton_client(port: int, model: str = "stitched"):
    """Triton's HTTP protocol with the binary tensor extension, over http.client: the same
    client library as the FastAPI baseline, so the comparison is between servers."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def call(x: np.ndarray, rid: str) -> np.ndarray:
        raw = x.tobytes()
        header = json.dumps({"id": rid, "parameters": {"request_id": rid}, "inputs": [{
            "name": "INPUT__0", "shape": list(x.shape), "datatype": "FP32",
            "parameters": {"binary_data_size": len(raw)}}], "outputs": [{
                "name": "OUTPUT__0", "parameters": {"binary_data": True}}]}).encode()
        conn.request("POST", f"/v2/models/{model}/infer", body=header + raw, headers={
            "Inference-Header-Content-Length": str(len(header)),
            "Content-Type": "application/octet-stream"})
        r = conn.getresponse()
        body = r.read()
        if r.status != 200:
            raise RuntimeError(body[:300].decode(errors="replace"))
        n = int(r.getheader("Inference-Header-Content-Length"))
        meta = json.loads(body[:n])["outputs"][0]
        return np.frombuffer(body[n:], np.float32).reshape(meta["shape"])
    return call


def repo_client(port: int):
    return triton_client(port, "demo")


def fastapi_client(port: int):
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def call(x: np.ndarray, rid: str) -> np.ndarray:
        conn.request("POST", "/infer", body=x.tobytes(), headers={
            "x-shape": ",".join(map(str, x.shape)), "x-request-id": rid,
            "content-type": "application/octet-stream"})
        r = conn.getresponse()
        body = r.read()
        if r.status != 200:
            raise RuntimeError(body.decode())
        return np.frombuffer(body, np.float32).reshape(
            [int(d) for d in r.getheader("x-shape").split(",")])
    return call


def load(make_client, port: int, clients: int, x: np.ndarray, want: np.ndarray) -> dict:
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients + 1)

    def worker(k: int) -> None:
        call = make_client(port)
        call(x, f"warm-{k}")
        barrier.wait(60)
        mine = []
        for i in range(REQUESTS):
            start = time.perf_counter()
            try:
                got = call(x, f"c{k}-{i}")
                if not np.allclose(got, want, rtol=1e-5, atol=1e-5):
                    raise AssertionError("wrong output")
            except Exception as e:  # noqa: BLE001 - counted and reported
                with lock:
                    errors.append(f"{type(e).__name__}: {e}"[:200])
                continue
            mine.append(time.perf_counter() - start)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(clients)]
    for t in threads:
        t.start()
    barrier.wait(60)
    start = time.perf_counter()
    for t in threads:
        t.join(600)
    wall = time.perf_counter() - start
    ms = sorted(v * 1e3 for v in latencies)
    return {"clients": clients, "requests": clients * REQUESTS, "ok": len(ms),
            "errors": len(errors), "first_error": errors[0] if errors else None,
            "median_ms": round(statistics.median(ms), 3) if ms else None,
            "p99_ms": round(ms[min(len(ms) - 1, int(0.99 * len(ms)))], 3) if ms else None,
            "throughput_rps": round(len(ms) / wall, 1)}


def wait(url: str, server: Server, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(server.log()[-2000:])
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"not ready: {url}\n{server.log()[-2000:]}")


def main() -> int:
    import torch

    import stitch

    tmp = tempfile.mkdtemp(prefix="stitch-bench-serve-")
    artifact = os.path.join(tmp, "demo.pt2")
    build_artifact(artifact)
    x = np.random.default_rng(0).standard_normal((BATCH, 32)).astype(np.float32)
    with torch.no_grad():
        from stitch.demo_model import make_demo

        model = make_demo()[0]
        want = model(torch.from_numpy(x)).numpy()
    assert np.allclose(stitch.load(artifact)(torch.from_numpy(x)).numpy(), want, atol=1e-5)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    http, grpc, metrics, api, rh, rg, rm = free_ports(7)
    servers = {
        "serve_pytriton": (Server([sys.executable, "-m", "stitch", "serve", artifact,
                                 "--http-port", str(http), "--grpc-port", str(grpc),
                                 "--metrics-port", str(metrics), "--log-level", "INFO"],
                                http, os.path.join(tmp, "serve.log"), env=env),
                         f"http://127.0.0.1:{http}/v2/models/stitched/ready", triton_client,
                         http),
        "serve_repository": (Server([sys.executable, "-m", "stitch", "serve", artifact, "--engine",
                                "repository", "--model-name", "demo", "--http-port", str(rh),
                                "--grpc-port", str(rg), "--metrics-port", str(rm)],
                               rh, os.path.join(tmp, "repo.log"), env=env),
                        f"http://127.0.0.1:{rh}/v2/models/demo/ready", repo_client, rh),
        "fastapi": (Server([sys.executable, "-c", BASELINE, artifact, str(api)], api,
                           os.path.join(tmp, "fastapi.log"), env=env),
                    f"http://127.0.0.1:{api}/ready", fastapi_client, api),
    }
    rows = []
    try:
        for server, url, _, _ in servers.values():
            wait(url, server)
        for clients in CLIENTS:
            for name, (_, _, make_client, port) in servers.items():  # interleaved per level
                row = {"server": name, **load(make_client, port, clients, x, want)}
                print(json.dumps(row), flush=True)
                rows.append(row)
    finally:
        codes = {name: s.stop() for name, (s, _, _, _) in servers.items()}
    result = {
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                                 capture_output=True, text=True).stdout.strip(),
        "machine": {"cores": os.cpu_count(), "python": platform.python_version(),
                    "torch": torch.__version__, "omp_threads": 1},
        "model": "stitch.demo_model (GatedEncoder, batch 4, one log line per request)",
        "requests_per_client": REQUESTS, "server_exit_codes": codes, "rows": rows,
        "ratios": _ratios(rows)}
    out = os.path.join(HERE, "results")
    with open(os.path.join(out, "serve.json"), "w") as f:
        json.dump(result, f, indent=1)
    with open(os.path.join(out, "serve.md"), "w") as f:
        f.write(_markdown(result))
    print(_markdown(result))
    return 0


def _ratios(rows) -> dict:
    """Per server and client count: median latency and throughput over FastAPI's."""
    by = {(r["server"], r["clients"]): r for r in rows}
    out = {}
    for (name, c), s in by.items():
        b = by.get(("fastapi", c))
        if name != "fastapi" and b and s["median_ms"] and b["median_ms"]:
            out[f"{name}@{c}"] = {"latency_over_fastapi": round(s["median_ms"] /
                                                                b["median_ms"], 3),
                                  "throughput_over_fastapi": round(s["throughput_rps"] /
                                                                   b["throughput_rps"], 3)}
    return out


def _markdown(result) -> str:
    from tabulate import tabulate

    table = tabulate([[r["server"], r["clients"], r["ok"], r["errors"], r["median_ms"],
                       r["p99_ms"], r["throughput_rps"]] for r in result["rows"]],
                     headers=["server", "clients", "ok", "errors", "median ms", "p99 ms",
                              "req/s"], tablefmt="github")
    ratios = "\n".join(f"- {k.replace('@', ', ')} client(s): median latency / FastAPI's = "
                       f"{v['latency_over_fastapi']}, throughput / FastAPI's = "
                       f"{v['throughput_over_fastapi']}" for k, v in result["ratios"].items())
    return (f"# stitch serve vs FastAPI (commit {result['commit']})\n\n{result['model']}; "
            f"{result['requests_per_client']} requests per client over loopback HTTP; "
            f"{result['machine']['cores']} cores, one torch thread per server.\n\n{table}\n\n"
            f"{ratios}\n")


if __name__ == "__main__":
    raise SystemExit(main())
