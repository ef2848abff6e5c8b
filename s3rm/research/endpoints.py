"""The OpenAI-compatible rerank and chat calls of ``s3rm research-query``.

Contract: docs/research-tools.md#rerank, docs/research-tools.md#synthesis.

**Rerank** (:func:`rerank`). One POST whose body is accepted by llama.cpp's
server (``/v1/rerank``), Hugging Face TEI (``/rerank``) and vLLM
(``/v1/rerank``)::

    {"model": M, "query": Q, "documents": [D...], "texts": [D...], "top_n": n, "return_documents": false}

``documents`` is the field llama.cpp and vLLM read (Jina/Cohere shape),
``texts`` the one TEI reads (llama.cpp then answers in TEI's shape); each
server ignores the other's field. Both answer shapes are read:
``{"results": [{"index", "relevance_score"}]}`` and ``[{"index", "score"}]``.

**Chat** (:func:`chat`). ``POST /v1/chat/completions`` with ``model``,
``messages``, ``max_tokens`` (the token cap), ``temperature: 0``,
``stream: false``; the answer is ``choices[0].message.content``.

Both: one timeout per call (``S3RM_RESEARCH_TIMEOUT_SECONDS``), no retries, no
redirects, the Bearer key only when configured. :class:`EndpointError` names
the endpoint kind, its host and an HTTP status or exception type — never the
query, a document, a key or the server's message. Nothing here logs.
"""
from __future__ import annotations

from typing import Any, Sequence
from urllib.parse import urlsplit

from s3rm.errors import S3rmError
from s3rm.settings import Endpoint

__all__ = ["EndpointError", "rerank", "chat", "MAX_RESPONSE_BYTES"]

#: Larger answers are refused (a chat answer is capped by max_tokens anyway).
MAX_RESPONSE_BYTES = 2_000_000


class EndpointError(S3rmError):
    """A rerank or chat call failed; ``str()`` is safe to print (no content, no key)."""


def _post(kind: str, endpoint: Endpoint, body: dict[str, Any], timeout: float) -> Any:
    import requests

    host = urlsplit(endpoint.url).netloc
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if endpoint.api_key:
        headers["Authorization"] = f"Bearer {endpoint.api_key}"
    try:
        response = requests.post(endpoint.url, json=body, headers=headers, timeout=timeout, allow_redirects=False)
    except requests.Timeout:
        raise EndpointError(f"{kind} endpoint {host} timed out after {timeout:g} s") from None
    except requests.RequestException as exc:
        raise EndpointError(f"{kind} endpoint {host} failed ({type(exc).__name__})") from None
    if response.status_code != 200:
        raise EndpointError(f"{kind} endpoint {host} answered HTTP {response.status_code}")
    if len(response.content) > MAX_RESPONSE_BYTES:
        raise EndpointError(f"{kind} endpoint {host} answered more than {MAX_RESPONSE_BYTES} bytes")
    try:
        return response.json()
    except ValueError:
        raise EndpointError(f"{kind} endpoint {host} did not answer JSON") from None


def rerank(endpoint: Endpoint, query: str, documents: Sequence[str], *, timeout: float) -> list[float]:
    """Relevance scores for ``documents`` (same order as given; higher = more relevant).

    Raises :class:`EndpointError` on transport failure or when the answer does
    not score every document exactly once.
    """
    docs = list(documents)
    body = {"model": endpoint.model, "query": query, "documents": docs, "texts": docs, "top_n": len(docs),
            "return_documents": False}
    data = _post("rerank", endpoint, body, timeout)
    items = data.get("results") if isinstance(data, dict) else data
    host = urlsplit(endpoint.url).netloc
    if not isinstance(items, list):
        raise EndpointError(f"rerank endpoint {host} answered an unknown shape")
    scores: dict[int, float] = {}
    for item in items:
        if not isinstance(item, dict):
            raise EndpointError(f"rerank endpoint {host} answered an unknown shape")
        index, score = item.get("index"), item.get("relevance_score", item.get("score"))
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(docs) \
                or not isinstance(score, (int, float)) or isinstance(score, bool) or index in scores:
            raise EndpointError(f"rerank endpoint {host} answered an invalid index or score")
        scores[index] = float(score)
    if len(scores) != len(docs):
        raise EndpointError(f"rerank endpoint {host} scored {len(scores)} of {len(docs)} documents")
    return [scores[i] for i in range(len(docs))]


def chat(endpoint: Endpoint, messages: list[dict[str, str]], *, max_tokens: int, timeout: float) -> str:
    """The assistant's text for ``messages`` (``max_tokens`` caps the answer).

    Raises :class:`EndpointError` on transport failure or a malformed answer.
    """
    body = {"model": endpoint.model, "messages": messages, "max_tokens": max_tokens, "temperature": 0,
            "stream": False}
    data = _post("chat", endpoint, body, timeout)
    try:
        content = data["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        content = None
    if not isinstance(content, str):
        raise EndpointError(f"chat endpoint {urlsplit(endpoint.url).netloc} answered without message content")
    return content
