"""CPU cost of specdash's streaming client per streamed token (the "Streaming
client cost" target: no more than SGLang's own Python client).

A minimal SGLang-format SSE server runs in a separate process (so its CPU is not
counted): raw asyncio, HTTP/1.1 keep-alive, chunked transfer encoding like uvicorn,
one ``data: <compact json>\\n\\n`` event per write with SGLang's shape (0.5.23 ``tokenizer_manager.py``:
cumulative ``text`` and ``output_ids``, ``meta_info`` with ``completion_tokens``; the
final event with ``e2e_latency`` and the ``spec_*`` fields), then ``data: [DONE]``.
The client process's CPU time (``time.process_time()``, all threads) over the whole
run is divided by the tokens received.

Regimes: full rate — 200 requests × 512 tokens, 2 tokens per event,
the server writing as fast as it can (shown at 1, 16 and 200 concurrent streams);
paced — an event every 10 ms per stream, 16 concurrent streams (64 requests × 512
tokens by default).  Connection reuse (issue 14): 256 and 512 streams sharing 2-3× as
many requests, full rate and paced, and a paced regime where each stream waits a seeded
0-7 s between requests, so that idle connections are taken again around the server's
keep-alive timeout (``--keep-alive``, 5 s as uvicorn's default: the fake server closes a
connection idle that long).  Failed requests (not ``ok``) are counted and their errors
printed.  Each figure is the median of ``--repeat`` runs, the clients
interleaved so that background load hits them alike; the minimum is shown beside it.

Clients: ``sglang`` (SGLang's own benchmark client, ``async_request_sglang_generate``, where
SGLang is importable: see :func:`_sglang_client`), ``specdash`` (``SGLangClient.generate_stream``), the same on httpx's stock
anyio transport, ``specdash-httpcore`` (the same on httpcore's own connection pool over the
asyncio backend: the client before issue 14, not in the default list), and a plain httpx reference (``aiter_lines`` + ``json.loads`` of every
event, the naive baseline).  Measured side by side on a quiet 2-core machine with SGLang
0.5.23's client (``benchmarks/results/client-cpu-2026-12-02.txt``): specdash 0.70–0.99× its CPU
per token in every regime, 0 failed requests of either.

Usage: ``python benchmarks/client_cpu.py [--requests N] [--paced-requests N] [--repeat N] [--quick]
[--only 'c=256;c=512'] [--clients specdash,naive] [--keep-alive 5]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpcore
import httpx
import orjson

from specdash.sglang.client import SGLangClient
from specdash.sglang.transport import AsyncioBackend

# ---------------------------------------------------------------------------- server


def _events(max_tokens: int, per_event: int) -> list[bytes]:
    """The HTTP chunks of one SGLang /generate stream (chunked transfer encoding)."""
    out, ids, text, ct = [], [], "", 0
    while ct < max_tokens:
        n = min(per_event, max_tokens - ct)
        for _ in range(n):
            ids.append(1000 + len(ids))
            text += f" w{len(ids)}"
        ct += n
        final = ct >= max_tokens
        meta = {
            "id": "bcdb55a72693429b9e1dca048bbe305b",
            "finish_reason": {"type": "length", "length": ct} if final else None,
            "prompt_tokens": 17, "weight_version": "default", "num_retractions": 0, "queue_time": 0.0,
            "reasoning_tokens": 0, "completion_tokens": ct, "cached_tokens": 15,
            "cached_tokens_details": {"device": 15, "host": 0}, "dp_rank": None,
        }
        if final:
            meta.update({
                "e2e_latency": 1.0, "spec_accept_rate": 0.33, "spec_accept_length": 2.0,
                "spec_num_correct_drafts": ct // 2, "spec_num_proposed_drafts": 3 * ct // 2,
                "spec_verify_ct": ct // 2, "spec_correct_drafts_histogram": [0, ct // 2],
            })
        payload = b"data: " + orjson.dumps({"text": text, "output_ids": ids, "meta_info": meta}) + b"\n\n"
        out.append(b"%x\r\n%s\r\n" % (len(payload), payload))
    done = b"data: [DONE]\n\n"
    out.append(b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done))
    return out


async def _serve_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, cache: dict,
                      keep_alive: float | None) -> None:
    served = 0
    try:
        while True:
            if served and keep_alive:
                # uvicorn's --timeout-keep-alive (SGLang leaves its default, 5 s): an idle
                # connection is closed that long after its last response.
                try:
                    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), keep_alive)
                except TimeoutError:
                    return
            else:
                head = await reader.readuntil(b"\r\n\r\n")
            served += 1
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            body = json.loads(await reader.readexactly(length)) if length else {}
            key = (int(body.get("sampling_params", {}).get("max_new_tokens", 128)),
                   int(body.get("bench_tokens_per_event", 2)))
            interval = float(body.get("bench_interval_s", 0.0))
            if key not in cache:
                cache[key] = _events(*key)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                         b"transfer-encoding: chunked\r\n\r\n")
            for chunk in cache[key]:  # one write per event, like uvicorn's StreamingResponse
                writer.write(chunk)
                await writer.drain()
                await asyncio.sleep(interval)
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        pass
    finally:
        writer.close()


async def _serve(port: int, keep_alive: float | None) -> None:
    cache: dict = {}
    server = await asyncio.start_server(lambda r, w: _serve_conn(r, w, cache, keep_alive), "127.0.0.1", port,
                                        backlog=4096)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


# ---------------------------------------------------------------------------- clients


async def _naive_one(http: httpx.AsyncClient, body: dict) -> int:
    """Plain httpx: aiter_lines + json.loads of every event (the naive reference)."""
    ct, last = 0, time.perf_counter()
    itl: list[float] = []
    async with http.stream("POST", "/generate", json=body) as r:
        async for line in r.aiter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            now = time.perf_counter()
            n = json.loads(data)["meta_info"]["completion_tokens"]
            if n > ct:
                itl.extend([(now - last) / (n - ct)] * (n - ct))
                ct, last = n, now
    return ct


_SGLANG: dict = {}


def _sglang_client():
    """SGLang's own benchmark request function (``async_request_sglang_generate`` of
    ``sglang/benchmark/serving.py`` from 0.5.2x, ``sglang/bench_serving.py`` before), with the
    module-level ``args`` its request function reads set as ``python -m sglang.bench_serving``'s
    defaults would (greedy, ``ignore_eos``, streaming, no logprobs).  It opens one aiohttp session
    (one connection) per request, so nothing is reused.

    Raises:
        SystemExit: SGLang's benchmark module is not importable here (how to get it named).
    """
    if not _SGLANG:
        try:
            try:
                import sglang.benchmark.serving as mod
            except ModuleNotFoundError as e:
                if not (e.name or "").startswith("sglang.benchmark"):
                    raise
                import sglang.bench_serving as mod
            import sglang
        except Exception as e:
            raise SystemExit(
                f"--clients sglang: SGLang's benchmark client is not importable ({type(e).__name__}: {e}). "
                "Install it beside specdash, e.g. `pip install --no-deps sglang==0.5.23` and the modules its "
                "import asks for (aiohttp, transformers, torch CPU, ...), or leave 'sglang' out of --clients."
            ) from None
        mod.args = argparse.Namespace(temperature=0.0, disable_ignore_eos=False, top_p=1.0, disable_stream=False,
                                      return_logprob=False, return_routed_experts=False, logprob_start_len=-1,
                                      top_logprobs_num=0, token_ids_logprob=None, cache_report=False, header=None)
        _SGLANG.update(mod=mod, version=sglang.__version__)
    return _SGLANG["mod"]


async def _run(kind: str, url: str, n_req: int, conc: int, max_tokens: int, per_event: int,
               interval: float, think: float = 0.0) -> tuple[float, float, int, int]:
    """One regime for one client → (CPU µs/token, wall s, tokens, failed requests).

    ``conc`` streams share ``n_req`` requests (more requests than streams: connections are
    reused); with ``think`` each stream waits a seeded uniform 0–``think`` s before its next
    request, so idle keep-alive connections are picked up again around the server's timeout."""
    extra = {"bench_tokens_per_event": per_event, "bench_interval_s": interval}
    sampling = {"max_new_tokens": max_tokens, "temperature": 0, "ignore_eos": True}
    errors: dict[str, int] = {}
    if kind == "sglang":
        sb = _sglang_client()
        inp = sb.RequestFuncInput(prompt="x", api_url=url + "/generate", prompt_len=1, output_len=max_tokens,
                                  model="bench", lora_name=None, image_data=None, extra_request_body=extra)

        class _NoClose:
            async def aclose(self) -> None:
                return None

        http = _NoClose()

        async def one() -> int:
            out = await sb.async_request_sglang_generate(inp)
            if not out.success:
                key = (out.error or "?").strip().splitlines()[-1].split(":")[0] or "?"
                errors[key] = errors.get(key, 0) + 1
                return -1
            return out.output_len
    elif kind == "naive":
        http = httpx.AsyncClient(base_url=url, timeout=60, limits=httpx.Limits(max_connections=None))
        body = {"text": "x", "sampling_params": sampling, "stream": True, **extra}

        async def one() -> int:
            try:
                return await _naive_one(http, body)
            except httpx.HTTPError as e:
                errors[type(e).__name__] = errors.get(type(e).__name__, 0) + 1
                return -1
    else:
        transport = None
        if kind == "specdash-anyio":
            transport = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=None))
        elif kind == "specdash-httpcore":  # the client before issue 14: httpcore's pool, 4 s expiry, no retry
            transport = httpx.AsyncHTTPTransport(trust_env=False)
            transport._pool = httpcore.AsyncConnectionPool(
                max_connections=None, max_keepalive_connections=None, keepalive_expiry=4.0,
                network_backend=AsyncioBackend())
        http = SGLangClient(url, timeout=60, transport=transport)

        async def one() -> int:
            res = await http.generate_stream("x", sampling, extra=extra)
            if not res.ok:
                key = (res.error or "?").split(":")[0]
                errors[key] = errors.get(key, 0) + 1
                return -1
            return res.completion_tokens

    total = failed = 0
    left = n_req
    rng = random.Random(1234)

    async def stream() -> None:
        nonlocal total, failed, left
        while left > 0:
            left -= 1
            n = await one()
            if n < 0:
                failed += 1
            else:
                total += n
            if think and left > 0:
                await asyncio.sleep(rng.uniform(0, think))

    try:
        await one()  # connect and warm up outside the measurement
        cpu0, wall0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(stream() for _ in range(conc)))
        cpu1, wall1 = time.process_time(), time.perf_counter()
    finally:
        await http.aclose()
    if errors:
        print(f"    {kind}: failed {dict(sorted(errors.items()))}", flush=True)
    return (cpu1 - cpu0) / max(total, 1) * 1e6, wall1 - wall0, total, failed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=200, help="requests per full-rate run (c ≤ 200)")
    ap.add_argument("--paced-requests", type=int, default=64, help="requests in the 10 ms regime")
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure (median reported)")
    ap.add_argument("--quick", action="store_true", help="32 paced requests, one run, skip c ≥ 200")
    ap.add_argument("--clients", default="specdash,specdash-anyio,naive")
    ap.add_argument("--only", default="", help="';'-separated substrings: run only the regimes whose name "
                    "contains one (e.g. 'c=256;c=512'; names hold commas)")
    ap.add_argument("--keep-alive", type=float, default=5.0,
                    help="the server closes a connection idle this long (uvicorn's default, 5 s; 0: never)")
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        asyncio.run(_serve(args.serve, args.keep_alive or None))
        return
    paced = 32 if args.quick else args.paced_requests
    repeat = 1 if args.quick else max(1, args.repeat)
    # (name, requests, streams, s between events, think s between a stream's requests)
    regimes = [
        ("full rate, c=1", args.requests, 1, 0.0, 0.0),
        ("full rate, c=16", args.requests, 16, 0.0, 0.0),
        ("full rate, c=64", args.requests, 64, 0.0, 0.0),
        ("full rate, c=200", args.requests, 200, 0.0, 0.0),
        ("10 ms/event, c=16", paced, 16, 0.01, 0.0),
        ("10 ms/event, c=64 x2", 128, 64, 0.01, 0.0),
        # More requests than streams: connections are reused (issue 14).
        ("full rate, c=256 x3", 768, 256, 0.0, 0.0),
        ("full rate, c=512 x2", 1024, 512, 0.0, 0.0),
        ("10 ms/event, c=256 x2", 512, 256, 0.01, 0.0),
        ("10 ms/event, c=512 x2", 1024, 512, 0.01, 0.0),
        # Idle reuse around the keep-alive timeout: each stream waits 0-7 s between requests.
        ("10 ms, think 0-7s, c=256 x3", 768, 256, 0.01, 7.0),
    ]
    if args.quick:
        regimes = [r for r in regimes if r[2] < 200]
    if args.only:
        keys = args.only.split(";")
        regimes = [r for r in regimes if any(k in r[0] for k in keys)]
    port = _free_port()
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(port), "--keep-alive", str(args.keep_alive)],
                              stdout=subprocess.PIPE)
    try:
        assert server.stdout.readline().strip() == b"ready"
        url = f"http://127.0.0.1:{port}"
        kinds = args.clients.split(",")
        if "sglang" in kinds:
            _sglang_client()
        sgl = f", SGLang {_SGLANG['version']} (aiohttp {__import__('aiohttp').__version__})" if _SGLANG else ""
        print(f"python {sys.version.split()[0]}, httpx {httpx.__version__}, httpcore {httpcore.__version__}{sgl}, "
              f"{os.cpu_count()} CPUs; server keep-alive {args.keep_alive:g} s; CPU-µs of the client process "
              "per streamed token (512 tokens/request, 2 tokens/event); tok/s = tokens / wall; failed = requests "
              "not ok, summed over the runs")
        print(f"{'regime':28s} {'client':16s} {'µs/token':>9s} {'(min)':>7s} {'wall s':>7s} {'tok/s':>8s} "
              f"{'tokens':>8s} {'failed':>6s}")
        for name, n_req, conc, interval, think in regimes:
            runs: dict[str, list[tuple[float, float, int, int]]] = {k: [] for k in kinds}
            for _ in range(repeat):
                for kind in kinds:
                    runs[kind].append(asyncio.run(_run(kind, url, n_req, conc, 512, 2, interval, think)))
            for kind in kinds:
                us = statistics.median(r[0] for r in runs[kind])
                wall = statistics.median(r[1] for r in runs[kind])
                tps = statistics.median(r[2] / r[1] for r in runs[kind])
                print(f"{name:28s} {kind:16s} {us:9.2f} {min(r[0] for r in runs[kind]):7.2f} {wall:7.2f} "
                      f"{tps:8.0f} {runs[kind][0][2]:8d} {sum(r[3] for r in runs[kind]):6d}", flush=True)
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
