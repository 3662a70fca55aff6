"""A model server under steady load, with the Kafka broker killed mid-run.

Runs two copies of an example model server (``examples/fastapi_server.py``
or ``examples/wsgi_server.py``: a scikit-learn model logging every prediction
through the SDK) as child processes, each against its own real Kafka-protocol
broker (Tansu, a child process from ``service.embedded``), and sends both
the same requests at a fixed rate from keep-alive connections, request by
request (alternating which goes first). Halfway through, one server's broker
is SIGKILLed. Because both servers run side by side on the same schedule, a
burst of load from elsewhere on the machine hits both alike: the comparison
is within one run. Each round starts fresh brokers and servers; latencies
are pooled over rounds.

Reported: request latency (client side: send to full response) p50 and p99
of each server, over the whole run and over each half; the ratios killed/up
of the p99s (the first-half ratio, with both brokers still up, is the
control: what the machine's noise alone gives); failed requests (non-200
answers, connection errors) and the SDK's counters read from each server's
``/stats`` at the end.

Run::

    .venv/bin/python benchmarks/sdk_outage.py [--server fastapi|wsgi] [--rate 200] [--seconds 20] [--rounds 3]

The last line is JSON.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from sklearn.datasets import load_breast_cancer, load_iris

from service.embedded import free_port, kafka_broker, wait_for_port

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SERVERS = {"fastapi": ("fastapi_server.py", load_breast_cancer), "wsgi": ("wsgi_server.py", load_iris)}
CONNECTIONS = 8
GOAL_RATIO = 1.1


def request_bodies(load) -> list[bytes]:
    data = load()
    names = [str(n) for n in data.feature_names]
    return [json.dumps({"features": dict(zip(names, map(float, row), strict=True))}).encode()
            for row in data.data]


Latencies = list[tuple[float, float]]  # (seconds since start, latency in ms)


def steady_load(ports: list[int], bodies: list[bytes], rate: float, seconds: float,
                at_half: Callable[[], None] = lambda: None) -> tuple[list[Latencies], list[int]]:
    """Send ``rate`` requests per second to each port for ``seconds``; call ``at_half`` halfway.

    Returns
    -------
    latencies : per port, (seconds since start, latency in ms) of each answered request
    failures : per port, requests that failed
    """
    total = int(rate * seconds)
    start = time.perf_counter() + 0.1
    next_index = itertools.count()
    lock = threading.Lock()
    latencies: list[Latencies] = [[] for _ in ports]
    failures = [0 for _ in ports]

    def send(conns: list, k: int, body: bytes) -> float | None:
        t0 = time.perf_counter()
        try:
            conns[k].request("POST", "/predict", body, {"Content-Type": "application/json"})
            response = conns[k].getresponse()
            response.read()
            if response.status == 200:
                return (time.perf_counter() - t0) * 1e3
        except (OSError, http.client.HTTPException):
            conns[k].close()
            conns[k] = http.client.HTTPConnection("127.0.0.1", ports[k], timeout=30)
        return None

    def worker() -> None:
        conns = [http.client.HTTPConnection("127.0.0.1", p, timeout=30) for p in ports]
        mine: list[Latencies] = [[] for _ in ports]
        failed = [0 for _ in ports]
        while (i := next(next_index)) < total:
            scheduled = start + i / rate
            time.sleep(max(0.0, scheduled - time.perf_counter()))
            order = range(len(ports)) if i % 2 == 0 else reversed(range(len(ports)))
            for k in order:
                ms = send(conns, k, bodies[i % len(bodies)])
                if ms is None:
                    failed[k] += 1
                else:
                    mine[k].append((scheduled - start, ms))
        for conn in conns:
            conn.close()
        with lock:
            for k, values in enumerate(mine):
                latencies[k].extend(values)
                failures[k] += failed[k]

    threads = [threading.Thread(target=worker) for _ in range(CONNECTIONS)]
    for t in threads:
        t.start()
    time.sleep(max(0.0, start + seconds / 2 - time.perf_counter()))
    at_half()
    for t in threads:
        t.join()
    return latencies, failures


def server_stats(port: int) -> dict:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/stats")
    stats = json.loads(conn.getresponse().read())
    conn.close()
    return stats


def start_server(script: str, broker_port: int, log: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, str(EXAMPLES / script), "--port", str(port), "--bootstrap",
                                 f"127.0.0.1:{broker_port}", "--topic", "bench.predictions"],
                                stdout=out, stderr=subprocess.STDOUT)
    return proc, port


def one_round(server: str, rate: float, seconds: float, workdir: Path) -> tuple[dict, dict]:
    """Two fresh servers, each with a fresh broker; the second's broker is killed halfway.

    Returns
    -------
    up, killed : dict
        ``{"latencies", "failures", "sdk"}`` of each server.
    """
    script, load = SERVERS[server]
    bodies = request_bodies(load)
    brokers = [kafka_broker(workdir / name) for name in ("up", "killed")]
    servers = []
    try:
        for broker in brokers:
            broker.start()
        servers = [start_server(script, b.port, workdir / f"{name}.log")
                   for b, name in zip(brokers, ("up", "killed"), strict=True)]
        ports = [port for _proc, port in servers]
        for port in ports:
            wait_for_port(port, 120)
        steady_load(ports, bodies, rate, 2.0)  # warm-up: connections, the producers, caches
        latencies, failures = steady_load(ports, bodies, rate, seconds, brokers[1].kill)
        stats = [server_stats(port) for port in ports]
    finally:
        for proc, _port in servers:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
        for broker in brokers:
            broker.stop()
    return tuple({"latencies": lat, "failures": failed, "sdk": st}  # type: ignore[return-value]
                 for lat, failed, st in zip(latencies, failures, stats, strict=True))


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(runs: list[dict], seconds: float) -> dict:
    def p99(first_half: bool | None) -> float:
        return round(quantile([ms for r in runs for t, ms in r["latencies"]
                               if first_half is None or (t < seconds / 2) == first_half], 0.99), 3)

    return {
        "requests": sum(len(r["latencies"]) for r in runs),
        "failed_requests": sum(r["failures"] for r in runs),
        "p50_ms": round(statistics.median(ms for r in runs for _t, ms in r["latencies"]), 3),
        "p99_ms": p99(None),
        "first_half_p99_ms": p99(True),
        "second_half_p99_ms": p99(False),
        "sdk_sent": sum(r["sdk"]["sent"] for r in runs),
        "sdk_dropped": {k: sum(r["sdk"][f"dropped_{k}"] for r in runs)
                        for k in ("buffer_full", "invalid", "send_failed", "closed")},
        "sdk_buffered_at_end": sum(r["sdk"]["buffered"] for r in runs),
    }


def ratio(killed: dict, up: dict, key: str) -> float:
    return round(killed[key] / up[key], 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", choices=sorted(SERVERS), default="fastapi")
    parser.add_argument("--rate", type=float, default=200.0, help="requests per second")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each run")
    parser.add_argument("--rounds", type=int, default=3, help="runs, each with fresh servers and brokers")
    args = parser.parse_args()
    up, killed = [], []
    with tempfile.TemporaryDirectory(prefix="fw-outage-") as tmp:
        for i in range(args.rounds):
            round_up, round_killed = one_round(args.server, args.rate, args.seconds, Path(tmp) / str(i))
            up.append(round_up)
            killed.append(round_killed)
    up_s, killed_s = summary(up, args.seconds), summary(killed, args.seconds)
    result = {
        "server": args.server, "rate_per_s": args.rate, "seconds_per_run": args.seconds,
        "rounds": args.rounds, "broker_up": up_s, "broker_killed": killed_s,
        "p99_ratio": ratio(killed_s, up_s, "p99_ms"),
        # both brokers up in the first half: the ratio the machine's noise alone gives
        "first_half_p99_ratio_control": ratio(killed_s, up_s, "first_half_p99_ms"),
        "second_half_p99_ratio": ratio(killed_s, up_s, "second_half_p99_ms"),
        "second_half_p99_ratio_per_round": [
            ratio(summary([k], args.seconds), summary([u], args.seconds), "second_half_p99_ms")
            for u, k in zip(up, killed, strict=True)],
        "goal_ratio": GOAL_RATIO,
    }
    print(f"{args.server}: p99 {up_s['p99_ms']} ms broker up, {killed_s['p99_ms']} ms broker killed "
          f"mid-run (ratio {result['p99_ratio']}; after the kill {result['second_half_p99_ratio']}, "
          f"before it {result['first_half_p99_ratio_control']}); failed requests "
          f"{up_s['failed_requests'] + killed_s['failed_requests']}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
