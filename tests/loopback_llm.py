"""A loopback OpenAI-compatible ``/v1/chat/completions`` server for tests: the only stand-in
the tests allow (for a paid LLM API). Subclasses say what the assistant replies."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

from tests.conftest import eventually


class LoopbackOpenAI:
    """Serves ``/v1/chat/completions`` on 127.0.0.1 (``port``); every request body is kept in
    ``requests``; the reply's message content is :meth:`content`."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        #: Seconds between the bytes of a reply (0: all at once): a reply that trickles in.
        self.drip = 0.0
        self.server = None
        self.port = 0

    async def content(self, body: dict) -> str:
        """The assistant's reply to ``body`` (override)."""
        raise NotImplementedError

    async def start(self) -> None:
        import uvicorn

        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> Any:
            body = await request.json()
            self.requests.append(body)
            content = await self.content(body)
            reply = {"id": "x", "object": "chat.completion", "created": int(time.time()), "model": body["model"],
                     "choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": content}}],
                     "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
            if not self.drip:
                return reply
            drip, data = self.drip, json.dumps(reply).encode()

            async def trickle():
                for i in range(len(data)):
                    yield data[i:i + 1]
                    await asyncio.sleep(drip)
            return StreamingResponse(trickle(), media_type="application/json")

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        sock.close()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                                    lifespan="off", timeout_graceful_shutdown=1))
        self.task = asyncio.create_task(self.server.serve())
        await eventually(lambda: asyncio.sleep(0, self.server.started))

    async def stop(self) -> None:
        self.server.should_exit = True
        await asyncio.wait_for(self.task, 10)
