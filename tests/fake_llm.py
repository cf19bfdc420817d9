"""A local fake of an OpenAI-compatible chat-completions endpoint (``POST /v1/chat/completions``).

``FakeLLM`` is an aiohttp server on 127.0.0.1 (a free port). It checks the request as a real
server would (JSON body with ``model`` and a list of ``messages`` with roles and string contents;
a Bearer key when ``key`` is set, else 401) and answers with a chat completion whose content is
``reply`` — a string, or a function of the request's messages. ``status`` makes it answer with
that HTTP error instead; ``hang`` makes it never answer (until the server closes), for timeouts;
``malformed`` answers 200 with a body that is not a chat completion. ``requests`` records each
request's headers and body.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

Reply = str | Callable[[list[dict[str, str]]], str]


@dataclass
class FakeLLM:
    reply: Reply = "Nothing to say [1]."
    key: str | None = None
    status: int | None = None
    hang: bool = False
    malformed: bool = False
    requests: list[dict[str, Any]] = field(default_factory=list)
    _runner: web.AppRunner | None = None
    _closing: asyncio.Event = field(default_factory=asyncio.Event)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._complete)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None and server.sockets  # type: ignore[attr-defined]
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    async def close(self) -> None:
        self._closing.set()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _complete(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError:
            return web.json_response({"error": {"message": "invalid JSON"}}, status=400)
        self.requests.append({"headers": dict(request.headers), "body": body})
        messages = body.get("messages") if isinstance(body, dict) else None
        if (
            not isinstance(body.get("model"), str)
            or not isinstance(messages, list)
            or not all(
                isinstance(m, dict)
                and m.get("role") in ("system", "user", "assistant")
                and isinstance(m.get("content"), str)
                for m in messages
            )
        ):
            return web.json_response({"error": {"message": "bad request"}}, status=400)
        if self.key is not None and request.headers.get("Authorization") != f"Bearer {self.key}":
            return web.json_response({"error": {"message": "invalid api key"}}, status=401)
        if self.hang:
            await self._closing.wait()
        if self.status is not None:
            return web.json_response({"error": {"message": "failed"}}, status=self.status)
        if self.malformed:
            return web.json_response({"choices": []})
        content = self.reply(messages) if callable(self.reply) else self.reply
        return web.json_response(
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
            }
        )
