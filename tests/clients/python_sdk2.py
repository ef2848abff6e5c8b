"""Drive the gateway with python-sdk 2.x ``mcp.Client`` (run inside the 2.x venv, tests/gateway/test_clients.py).

Usage: python python_sdk2.py URL MODE TOKEN READ_ARGS_JSON WRITE_ARGS_JSON   (MODE: auto | legacy | 2026-07-28)
Prints one JSON object: the negotiated protocol version, the tool names, the
``search_lessons`` result, the ``create_lesson_draft`` result, and every HTTP
request the client sent (method, MCP-Protocol-Version, Mcp-Method, Mcp-Name, status).
"""
import asyncio
import json
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def main(url: str, mode: str, token: str, read_args: dict, write_args: dict) -> dict:
    exchange: list[dict] = []

    async def on_response(response: httpx2.Response) -> None:
        request = response.request
        exchange.append({
            "method": request.method,
            "protocol_version": request.headers.get("mcp-protocol-version"),
            "mcp_method": request.headers.get("mcp-method"),
            "mcp_name": request.headers.get("mcp-name"),
            "status": response.status_code,
        })

    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, event_hooks={"response": [on_response]}, timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            listed = await client.list_tools()
            read = await client.call_tool("search_lessons", read_args)  # validates structuredContent
            write = await client.call_tool("create_lesson_draft", write_args)
            out = {
                "protocol_version": client.protocol_version,
                "server_name": client.server_info.name if client.server_info else None,
                "tools": [tool.name for tool in listed.tools],
                "read": read.model_dump(by_alias=True, exclude_none=True, mode="json"),
                "write": write.model_dump(by_alias=True, exclude_none=True, mode="json"),
            }
    out["exchange"] = exchange
    return out


if __name__ == "__main__":
    url, mode, token, read_args, write_args = sys.argv[1:6]
    print(json.dumps(asyncio.run(main(url, mode, token, json.loads(read_args), json.loads(write_args)))))
