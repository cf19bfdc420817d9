"""Spike charts uploaded once: the first chat's send uploads the PNG, the other chats of the
spike wait for it and send the ``file_id`` Telegram gave it (no upload, for them or Telegram)."""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict

from topicpulse.delivery.messages import Outgoing
from topicpulse.delivery.protocol import MessageRejected, PermanentFailure, Sender

log = logging.getLogger(__name__)

CHARTS_KEPT = 64  # spike charts whose file_id is remembered


class ChartUploads:
    """The file ids of recent spike charts, by episode (``Outgoing.chart``)."""

    def __init__(self, kept: int = CHARTS_KEPT) -> None:
        self.kept = kept
        self._ids: OrderedDict[int, str] = OrderedDict()
        self._locks: dict[int, asyncio.Lock] = {}

    def file_id(self, episode_id: int) -> str | None:
        return self._ids.get(episode_id)

    async def send(self, sender: Sender, message: Outgoing, extra: dict[str, object]) -> bool:
        """Send the spike alert ``message`` (``extra``: the sender's keyword arguments). True
        if this send uploaded the chart."""
        assert message.photo is not None
        key = message.chart
        known = self._ids.get(key) if key is not None else None
        if known is None:
            if key is None:
                return await self._upload(sender, message, extra)
            async with self._locks.setdefault(key, asyncio.Lock()):  # the first upload first
                known = self._ids.get(key)
                if known is None:
                    return await self._upload(sender, message, extra)
        try:
            await sender.send_photo(message.chat_id, known, message.html, **extra)  # type: ignore[arg-type]
        except PermanentFailure as exc:
            if isinstance(exc, MessageRejected):
                raise
            # Telegram no longer knows the id (e.g. another bot token): upload it again
            log.info("spike chart %s: its file_id was refused (%s); uploading again", key, exc)
            self._ids.pop(key or 0, None)
            return await self._upload(sender, message, extra)
        return False

    async def _upload(self, sender: Sender, message: Outgoing, extra: dict[str, object]) -> bool:
        assert message.photo is not None
        file_id = await sender.send_photo(
            message.chat_id,
            message.photo,
            message.html,
            **extra,  # type: ignore[arg-type]
        )
        if file_id and message.chart is not None:
            self._ids[message.chart] = file_id
            while len(self._ids) > self.kept:
                old, _ = self._ids.popitem(last=False)
                self._locks.pop(old, None)
        return True
