"""`soul serve` under load: N concurrent WebSocket clients, each holding its own session and
sending turns one after another to a zero-latency provider (scripted replies).

The server runs as `soul serve` in a subprocess (uvicorn, one process, as a user runs it) on
127.0.0.1 with a temporary data home; the clients run in this process. For each turn:

- end-to-end: from the client sending the message to its `TurnDone` event (client's clock);
- server overhead: the `TurnDone` event's `server_ms - provider_ms` — the hub receiving the
  turn to its commit, minus the model calls (here ~0: the scripted provider answers at once),
  so it is what the framework, the store and the event fan-out cost a turn.

A turn is lost when no `TurnDone` arrives within the timeout; an error is a `TurnFailed`,
an `Error` event or a broken connection. Usage:

    python benchmarks/serve.py                 # 10, 100, 500 clients, 5 turns each
    python benchmarks/serve.py --clients 100 --turns 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import websockets

BLUEPRINT = """\
soul: bench
version: 1
description: one streamed reply a turn, for the serve benchmark
persona: bench.md
model: local
steps:
  reply: {uses: external_dialogue, stream: true}
"""
REPLY = '<external_dialogue verb="said">A short reply, streamed in pieces as a model would.</external_dialogue>'
TURN_TIMEOUT = 120.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(folder: Path, turns: int) -> tuple[subprocess.Popen[bytes], str]:
    (folder / "bench.yaml").write_text(BLUEPRINT)
    (folder / "bench.md").write_text("You are a benchmark.\n")
    (folder / "script.json").write_text(json.dumps([REPLY] * turns))
    port = free_port()
    env = {**os.environ, "SOUL_HOME": str(folder / "home")}
    env.pop("SOUL_MODEL", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "soul.cli", "serve", str(folder / "bench.yaml"), "--port", str(port),
         "--script", str(folder / "script.json")],
        env=env, stdout=subprocess.DEVNULL, stderr=(folder / "serve.log").open("w"),
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(url + "/api/soul", timeout=1).raise_for_status()
            return proc, url
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"the server did not start: {(folder / 'serve.log').read_text()}")


async def client(url: str, session: str, turns: int, results: dict[str, list[float]], counts: dict[str, int]) -> None:
    ws_url = url.replace("http", "ws", 1) + f"/api/sessions/{session}/events"
    try:
        async with websockets.connect(ws_url, max_size=None, open_timeout=60) as ws:
            await ws.recv()  # Hello
            for _ in range(turns):
                sent = time.perf_counter()
                await ws.send(json.dumps({"type": "message", "text": "hello"}))
                try:
                    while True:
                        event = json.loads(await asyncio.wait_for(ws.recv(), TURN_TIMEOUT))
                        if event["type"] == "TurnDone":
                            results["e2e"].append((time.perf_counter() - sent) * 1000)
                            results["overhead"].append(event["server_ms"] - event["provider_ms"])
                            counts["done"] += 1
                            break
                        if event["type"] in ("TurnFailed", "Error"):
                            counts["errors"] += 1
                            break
                except TimeoutError:
                    counts["lost"] += 1
    except (OSError, websockets.WebSocketException):
        counts["errors"] += 1


async def run(url: str, clients: int, turns: int) -> dict[str, float]:
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        sessions = [(await http.post("/api/sessions", json={})).json()["id"] for _ in range(clients)]
    results: dict[str, list[float]] = {"e2e": [], "overhead": []}
    counts = {"done": 0, "lost": 0, "errors": 0}
    started = time.perf_counter()
    await asyncio.gather(*(client(url, s, turns, results, counts) for s in sessions))
    wall = time.perf_counter() - started
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        stored = sum(s["turns"] for s in (await http.get("/api/sessions")).json())
    return {
        "turns_s": counts["done"] / wall,
        "e2e_p50": pct(results["e2e"], 50), "e2e_p95": pct(results["e2e"], 95),
        "over_p50": pct(results["overhead"], 50), "over_p95": pct(results["overhead"], 95),
        # lost: sent and never answered, or answered but not in the store
        "lost": max(counts["lost"], clients * turns - stored), "errors": counts["errors"],
    }


def pct(values: list[float], p: int) -> float:
    if not values:
        return float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1] if len(values) > 1 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="*", default=[10, 100, 500])
    parser.add_argument("--turns", type=int, default=5, help="turns per client")
    args = parser.parse_args()
    print("| clients | turns | turns/s | end-to-end p50 / p95 (ms) | server overhead p50 / p95 (ms) | lost | errors |")
    print("|---|---|---|---|---|---|---|")
    for n in args.clients:
        with tempfile.TemporaryDirectory(prefix="soul-serve-bench-") as tmp:
            proc, url = start_server(Path(tmp), n * args.turns)
            try:
                row = asyncio.run(run(url, n, args.turns))
            finally:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
        print(f"| {n} | {n * args.turns} | {row['turns_s']:.0f} | {row['e2e_p50']:.1f} / {row['e2e_p95']:.1f} "
              f"| {row['over_p50']:.2f} / {row['over_p95']:.2f} | {row['lost']:.0f} | {row['errors']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
