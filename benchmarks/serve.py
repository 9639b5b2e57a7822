"""`soul serve` under load: N concurrent WebSocket clients, each holding its own session and
sending turns one after another to a zero-latency provider (scripted replies).

The server runs as `soul serve` in a subprocess (uvicorn, one process, as a user runs it) on
127.0.0.1 with a temporary data home; the clients run in this process. For each turn:

- end-to-end: from the client sending the message to its `TurnDone` event (client's clock);
- server overhead: the `TurnDone` event's `server_ms - provider_ms` — the hub starting the
  turn to its commit, its events and its JSON, minus the model calls' wall time (the scripted
  provider answers at once), as the issue defines it (a message waiting for the busy loop
  before the hub's task starts is queueing: it shows in end-to-end only);
- the turn's loop time: the `TurnDone` event's `loop_ms`, the time the event loop spent running
  this turn's own code (`soul/serve/clock.py`), the streamed tokens' handling included and
  the other tasks that ran meanwhile left out.

What `server_ms - provider_ms` leaves out: `provider_ms` is the wall time of the model call
as the runtime times it (`Trace.total_ms - Trace.framework_ms`), so it also holds the
framework's handling of the streamed tokens (parsing the sections, redacting, encoding each
`Token` once and queueing it for the clients) and whatever other turns the event loop ran while
this one awaited its next chunk; and the WebSocket sends themselves run in each client's pump
task, outside any turn. So the table also gives the turn's loop time (above) and the
server's CPU time per turn: the server process's user + system CPU over the whole run (from
/proc) divided by the turns done — the average of everything the server does for a turn,
sends and HTTP included. The client process's CPU per turn is beside it: it runs on the
same cores, so the clients read only the events that end a turn (`TurnDone`, `TurnFailed`,
`Error`) and skip the rest unparsed. The load average is printed with each row: the machine
is shared, and other processes' CPU shows in the tail.

A turn is lost when no `TurnDone` arrives within the timeout; an error is a `TurnFailed`,
an `Error` event or a broken connection. Usage:

    python benchmarks/serve.py                 # 10, 100, 500 clients, 5 turns each
    python benchmarks/serve.py --clients 100 --turns 10
    python benchmarks/serve.py --clients 100 --profile serve.prof   # the server under cProfile
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
TURN_TIMEOUT = 120.0  # a turn with no TurnDone by then is lost
# The events that end a turn; the server writes `type` first (`soul.serve.wire`).
TURN_END = ('{"type":"TurnDone"', '{"type":"TurnFailed"', '{"type":"Error"')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(folder: Path, turns: int, profile: Path | None = None) -> tuple[subprocess.Popen[bytes], str]:
    (folder / "bench.yaml").write_text(BLUEPRINT)
    (folder / "bench.md").write_text("You are a benchmark.\n")
    (folder / "script.json").write_text(json.dumps([REPLY] * turns))
    port = free_port()
    env = {**os.environ, "SOUL_HOME": str(folder / "home")}
    env.pop("SOUL_MODEL", None)
    profiled = ["-m", "cProfile", "-o", str(profile.resolve())] if profile is not None else []
    proc = subprocess.Popen(
        [sys.executable, *profiled, "-m", "soul.cli", "serve", str(folder / "bench.yaml"), "--port", str(port),
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
                    async with asyncio.timeout(TURN_TIMEOUT):
                        while True:
                            raw = await ws.recv()
                            if not raw.startswith(TURN_END):  # the client's CPU is the server's too:
                                continue  # it reads only the events that end a turn
                            event = json.loads(raw)
                            if event["type"] == "TurnDone":
                                results["e2e"].append((time.perf_counter() - sent) * 1000)
                                results["overhead"].append(event["server_ms"] - event["provider_ms"])
                                results["loop"].append(event.get("loop_ms", float("nan")))  # servers before it: NaN
                                counts["done"] += 1
                                break
                            if event["type"] in ("TurnFailed", "Error"):
                                counts["errors"] += 1
                                break
                except TimeoutError:
                    counts["lost"] += 1
    except (OSError, websockets.WebSocketException):
        counts["errors"] += 1


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def run(url: str, pid: int, clients: int, turns: int) -> dict[str, float]:
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        sessions = [(await http.post("/api/sessions", json={})).json()["id"] for _ in range(clients)]
    results: dict[str, list[float]] = {"e2e": [], "overhead": [], "loop": []}
    counts = {"done": 0, "lost": 0, "errors": 0}
    cpu, mine = cpu_seconds(pid), cpu_seconds(os.getpid())
    started = time.perf_counter()
    await asyncio.gather(*(client(url, s, turns, results, counts) for s in sessions))
    wall = time.perf_counter() - started
    cpu, mine = cpu_seconds(pid) - cpu, cpu_seconds(os.getpid()) - mine
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        stored = sum(s["turns"] for s in (await http.get("/api/sessions")).json())
    return {
        "turns_s": counts["done"] / wall,
        "e2e_p50": pct(results["e2e"], 50), "e2e_p95": pct(results["e2e"], 95),
        "over_p50": pct(results["overhead"], 50), "over_p95": pct(results["overhead"], 95),
        "loop_p50": pct(results["loop"], 50), "loop_p95": pct(results["loop"], 95),
        "cpu_ms": cpu * 1000 / counts["done"] if counts["done"] else float("nan"),
        "client_cpu_ms": mine * 1000 / counts["done"] if counts["done"] else float("nan"),
        # lost: sent and never answered, or answered but not in the store
        "lost": max(counts["lost"], clients * turns - stored), "errors": counts["errors"],
    }


def pct(values: list[float], p: int) -> float:
    values = [v for v in values if v == v]  # NaN: not reported by this server
    if not values:
        return float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1] if len(values) > 1 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="*", default=[10, 100, 500])
    parser.add_argument("--turns", type=int, default=5, help="turns per client")
    parser.add_argument("--profile", type=Path, metavar="FILE",
                        help="run the server under cProfile and write its stats here (one --clients size)")
    args = parser.parse_args()
    if args.profile is not None and len(args.clients) != 1:
        parser.error("--profile profiles one run: give one --clients size")
    print("| clients | turns | turns/s | end-to-end p50 / p95 (ms) | server overhead p50 / p95 (ms) "
          "| turn's loop time p50 / p95 (ms) | server / client CPU per turn (ms) | lost | errors | load average |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in args.clients:
        with tempfile.TemporaryDirectory(prefix="soul-serve-bench-") as tmp:
            proc, url = start_server(Path(tmp), n * args.turns, args.profile)
            load = os.getloadavg()[0]
            try:
                row = asyncio.run(run(url, proc.pid, n, args.turns))
            finally:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
        print(f"| {n} | {n * args.turns} | {row['turns_s']:.0f} | {row['e2e_p50']:.1f} / {row['e2e_p95']:.1f} "
              f"| {row['over_p50']:.2f} / {row['over_p95']:.2f} | {row['loop_p50']:.2f} / {row['loop_p95']:.2f} "
              f"| {row['cpu_ms']:.2f} / {row['client_cpu_ms']:.2f} | {row['lost']:.0f} "
              f"| {row['errors']:.0f} | {load:.1f} → {os.getloadavg()[0]:.1f} |", flush=True)


if __name__ == "__main__":
    main()
