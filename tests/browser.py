"""Headless Chromium for browser tests, driven over the Chrome DevTools Protocol (CDP).

A real browser process (Debian's ``chromium``, or ``TOPICPULSE_CHROMIUM``) with a throw-away
profile and no network of its own beyond 127.0.0.1, one page, and the few CDP commands a page
test needs: navigate and wait for the load event, evaluate JavaScript, type and press keys,
take a screenshot. Console errors, uncaught exceptions and failed loads are collected as
``errors``. The protocol is JSON over a WebSocket, spoken here with aiohttp (already a
dependency): no driver binary, nothing downloaded.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import re
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp

NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")
FLAGS = (
    "--headless",
    "--no-sandbox",  # CI runs as root
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--mute-audio",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
)
_LISTENING = re.compile(rb"DevTools listening on (ws://\S+)")


def find_chromium() -> str | None:
    """The browser to run: ``TOPICPULSE_CHROMIUM``, else the first of ``NAMES`` on PATH."""
    chosen = os.environ.get("TOPICPULSE_CHROMIUM")
    if chosen:
        return chosen if shutil.which(chosen) else None
    return next((found for name in NAMES if (found := shutil.which(name))), None)


class Browser:
    """One headless Chromium and one page in it. Use ``async with Browser.launch(path)``."""

    def __init__(self, process: asyncio.subprocess.Process, profile: str) -> None:
        self._process = process
        self._profile = profile
        self._session = aiohttp.ClientSession()
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._events: list[dict[str, Any]] = []
        self._arrived = asyncio.Condition()
        self._tasks: list[asyncio.Task[None]] = []
        self.errors: list[str] = []

    @classmethod
    @contextlib.asynccontextmanager
    async def launch(cls, path: str, *, timeout: float = 30) -> AsyncIterator[Browser]:
        profile = tempfile.mkdtemp(prefix="topicpulse-chromium-")
        process = await asyncio.create_subprocess_exec(
            path,
            *FLAGS,
            f"--user-data-dir={profile}",
            "about:blank",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        browser = cls(process, profile)
        try:
            await asyncio.wait_for(browser._connect(), timeout)
            for domain in ("Page", "Runtime", "Log"):
                await browser.send(f"{domain}.enable")
            yield browser
        finally:
            await browser._close()

    async def _connect(self) -> None:
        assert self._process.stderr is not None
        while True:
            line = await self._process.stderr.readline()
            if not line:
                raise RuntimeError("Chromium exited before it listened for DevTools")
            if match := _LISTENING.search(line):
                break
        self._tasks.append(asyncio.create_task(self._drain(self._process.stderr)))
        port = int(match.group(1).decode().split(":")[2].split("/")[0])
        async with self._session.get(f"http://127.0.0.1:{port}/json/list") as answer:
            targets = await answer.json()
        page = next(t for t in targets if t["type"] == "page")
        self._ws = await self._session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)
        self._tasks.append(asyncio.create_task(self._read()))

    @staticmethod
    async def _drain(stream: asyncio.StreamReader) -> None:
        while await stream.read(65536):  # Chromium's own chatter: read so it never blocks
            pass

    async def _read(self) -> None:
        assert self._ws is not None
        async for frame in self._ws:
            if frame.type != aiohttp.WSMsgType.TEXT:
                continue
            message = json.loads(frame.data)
            if "id" in message:
                waiter = self._waiting.pop(message["id"], None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(message)
                continue
            self._note_error(message)
            async with self._arrived:
                self._events.append(message)
                self._arrived.notify_all()

    def _note_error(self, event: dict[str, Any]) -> None:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.errors.append(" ".join(str(a.get("value", "")) for a in params.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            self.errors.append(str(params.get("exceptionDetails", {}).get("text")))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.errors.append(str(params["entry"].get("text")))

    async def _close(self) -> None:
        if self._ws is not None:
            await self._ws.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._session.close()
        if self._process.returncode is None:
            self._process.terminate()
            try:
                await asyncio.wait_for(self._process.wait(), 10)
            except TimeoutError:
                self._process.kill()
                await self._process.wait()
        shutil.rmtree(self._profile, ignore_errors=True)

    # ------------------------------------------------------------------ the protocol
    async def send(self, method: str, timeout: float = 30, **params: Any) -> dict[str, Any]:
        """One CDP command; its result (raises on a protocol error)."""
        assert self._ws is not None
        number = next(self._ids)
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[number] = waiter
        await self._ws.send_str(json.dumps({"id": number, "method": method, "params": params}))
        answer = await asyncio.wait_for(waiter, timeout)
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer.get("result", {})  # type: ignore[no-any-return]

    async def wait_event(
        self, method: str, *, after: int = 0, timeout: float = 30
    ) -> dict[str, Any]:
        """The first ``method`` event at or after position ``after`` of the event log."""

        def found() -> dict[str, Any] | None:
            return next((e for e in self._events[after:] if e.get("method") == method), None)

        async with self._arrived:
            await asyncio.wait_for(self._arrived.wait_for(found), timeout)
        event = found()
        assert event is not None
        return event

    async def loading(self, action: Callable[[], Any]) -> None:
        """Run ``action`` (something that navigates) and wait until the new page has loaded."""
        mark = len(self._events)
        await action()
        await self.wait_event("Page.loadEventFired", after=mark)

    # ------------------------------------------------------------------ what a test does
    async def open(self, url: str) -> None:
        await self.loading(lambda: self.send("Page.navigate", url=url))

    async def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression on the page."""
        result = await self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    async def type_text(self, text: str) -> None:
        """Type into whatever has the keyboard focus."""
        await self.send("Input.insertText", text=text)

    async def press_enter(self) -> None:
        key = {"key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13}
        await self.send("Input.dispatchKeyEvent", type="keyDown", text="\r", **key)
        await self.send("Input.dispatchKeyEvent", type="keyUp", **key)

    async def viewport(self, width: int, height: int) -> None:
        await self.send(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=width < 600,
        )

    async def screenshot(self) -> bytes:
        """A PNG of the viewport."""
        shot = await self.send("Page.captureScreenshot", format="png")
        return base64.b64decode(shot["data"])
