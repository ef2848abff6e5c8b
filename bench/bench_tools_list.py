#!/usr/bin/env python3
"""tools/list size on the wire: both protocol eras, raw and gzip, and where the bytes go (docs/transport.md#compression).

Not a CI test; no network. Builds the real app (``create_app``) over the
generated ``schema/tools`` and POSTs ``tools/list`` through Flask's test
client, as a 2025-11-25 client and as a 2026-07-28 client, with and without
``Accept-Encoding: gzip``. Sizes are deterministic (the median/p95 columns
are the serialisation time over ``--runs`` requests, for scale). Then per
tool: description bytes, and the JSON bytes of the input and output schema
with the share of them that is ``description`` text. Last, the two budgets of a lean
tools/list beside the figures before it was made lean (docs/transport.md#tools-list-size):
model-facing text (every tool description + inputSchema) and the whole 2025-11-25 body;
and the whole body's growth since the trust fields were added (standing, explain, index_as_of
and index_lag_seconds, hint, revise_lesson's duplicate_candidates), which may be at most 2 KB.

    python -m bench.bench_tools_list [--runs 30]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from gateway.app import create_app
from gateway.config import DEFAULT_SCHEMA_DIR, GatewayConfig
from gateway.core.jsonio import encode_json

#: The budgets (KiB) and the figures before the lean tools/list (35.2 KiB model-facing, 72.0 KiB on the wire).
TARGET_MODEL_FACING_KB = 20.0
TARGET_TOTAL_KB = 36.0
BASELINE_MODEL_FACING_KB = 35.2
BASELINE_TOTAL_KB = 72.0
#: The whole 2025-11-25 body before the trust fields (commit 62ae1ab) and the growth they may cost.
BEFORE_TRUST_FIELDS_BYTES = 47823
TRUST_FIELDS_GROWTH_MAX_BYTES = 2048

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def _app():
    env = {"S3RM_SCHEMA_DIR": str(DEFAULT_SCHEMA_DIR), "S3RM_MCP_WRITE_TOKEN_SHA256": "0" * 64,
           "S3RM_JOBRUNNER_STATE_FILE": str(Path(tempfile.mkdtemp()) / "jobrunner.json")}
    return create_app(GatewayConfig.from_env(env), wiki_probe=lambda: False)


def _request(client, era: str, gzip: bool):
    headers = {"Host": "127.0.0.1:8080", "Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}
    body: dict = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    if era == "2026-07-28":
        headers.update({"MCP-Protocol-Version": era, "Mcp-Method": "tools/list"})
        body["params"] = {"_meta": META}
    else:
        headers["MCP-Protocol-Version"] = era
    if gzip:
        headers["Accept-Encoding"] = "gzip"
    return client.post("/mcp", data=json.dumps(body), headers=headers)


def _desc_bytes(node) -> int:
    if isinstance(node, dict):
        return sum(len(encode_json(v)) if k == "description" and isinstance(v, str) else _desc_bytes(v)
                   for k, v in node.items())
    if isinstance(node, list):
        return sum(_desc_bytes(v) for v in node)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args(argv)
    client = _app().test_client()

    print("| request | body bytes | ratio vs 2025 raw | median ms | p95 ms |")
    print("| --- | ---: | ---: | ---: | ---: |")
    baseline = None
    tools = None
    for era in ("2025-11-25", "2026-07-28"):
        for gz in (False, True):
            times = []
            for _ in range(max(1, args.runs)):
                started = time.perf_counter()
                response = _request(client, era, gz)
                times.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200, response.data[:300]
            size = len(response.data)
            if baseline is None:
                baseline = size
                tools = json.loads(response.data)["result"]["tools"]
            times.sort()
            p95 = times[min(len(times) - 1, int(0.95 * len(times)))]
            label = f"{era}{' gzip' if gz else ''}"
            print(f"| {label} | {size} | {size / baseline:.3f} | {statistics.median(times):.2f} | {p95:.2f} |")

    print()
    print("| tool | description | inputSchema | of it descriptions | outputSchema | of it descriptions |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    totals = [0, 0, 0, 0, 0]
    for tool in tools or []:
        row = [len(tool["description"].encode()), len(encode_json(tool["inputSchema"])), _desc_bytes(tool["inputSchema"]),
               len(encode_json(tool.get("outputSchema", {}))), _desc_bytes(tool.get("outputSchema", {}))]
        totals = [a + b for a, b in zip(totals, row)]
        print(f"| {tool['name']} | " + " | ".join(str(v) for v in row) + " |")
    print("| **all tools** | " + " | ".join(f"**{v}**" for v in totals) + " |")

    model_facing = (totals[0] + totals[1]) / 1024
    total = baseline / 1024
    print()
    print("| budget | before | now | target | within |")
    print("| --- | ---: | ---: | ---: | :---: |")
    for label, before, now, target in (
            ("model-facing (descriptions + inputSchemas)", BASELINE_MODEL_FACING_KB, model_facing,
             TARGET_MODEL_FACING_KB),
            ("whole tools/list (2025-11-25, uncompressed)", BASELINE_TOTAL_KB, total, TARGET_TOTAL_KB)):
        within = "yes" if now <= target else "no"
        print(f"| {label} | {before:.1f} KB | {now:.1f} KB | ≤ {target:.0f} KB | {within} |")
    growth = baseline - BEFORE_TRUST_FIELDS_BYTES
    print(f"| whole tools/list growth since the trust fields | {BEFORE_TRUST_FIELDS_BYTES} B | {growth:+d} B | "
          f"≤ {TRUST_FIELDS_GROWTH_MAX_BYTES} B | {'yes' if growth <= TRUST_FIELDS_GROWTH_MAX_BYTES else 'no'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
