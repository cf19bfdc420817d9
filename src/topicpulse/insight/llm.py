"""/ask's optional generated answer: a few sentences written by a language model from the
retrieved passages only, citing them as [1]…[5].

Any OpenAI-compatible chat-completions endpoint works (a hosted one, or a local Ollama, vLLM or
llama.cpp server): ``TOPICPULSE_LLM_URL`` is its base (``…/v1``) or the full
``…/chat/completions`` address. On a timeout, an HTTP error, a malformed reply or an answer that
cites no passage, ``write`` returns ``None`` and the bot sends the passages alone. The API key
goes only into the request's Authorization header; it is registered with the log redaction, and
failures are logged by kind and status, never with headers.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from topicpulse.config import Settings
from topicpulse.insight.ask import Passage
from topicpulse.logs import protect_secrets

log = logging.getLogger(__name__)

MAX_ANSWER = 1_200  # characters of a generated answer at most (cut at a sentence)
MAX_TOKENS = 350
CITATION = re.compile(r"\[(\d{1,2})\]")  # a passage cited in an answer: [n]

SYSTEM_PROMPT = (
    "You answer a researcher's question using ONLY the numbered passages below, which are"
    " quoted from arXiv abstracts. Write two to four plain sentences, no lists, no headings."
    " Cite the passage behind every claim with its number in square brackets, like [2]. Do not"
    " use anything you know beyond the passages. If they do not answer the question, say so in"
    " one sentence."
)


def endpoint(url: str) -> str:
    """The chat-completions address of a configured base URL (or of the full address)."""
    url = url.rstrip("/")
    return url if url.endswith("/chat/completions") else f"{url}/chat/completions"


def prompt(question: str, passages: Sequence[Passage]) -> str:
    lines = [f"Question: {question}", "", "Passages:"]
    for n, passage in enumerate(passages, 1):
        paper = passage.paper
        lines.append(f"[{n}] ({paper.title}, {paper.published[:10]}) {passage.text}")
    return "\n".join(lines)


def grounded(text: str, count: int) -> str | None:
    """The answer if it cites at least one passage and no passage that does not exist."""
    cited = {int(n) for n in CITATION.findall(text)}
    if not cited or not cited <= set(range(1, count + 1)):
        return None
    if len(text) > MAX_ANSWER:
        cut = text.rfind(". ", 0, MAX_ANSWER)
        text = text[: cut + 1] if cut > 0 else text[: MAX_ANSWER - 1] + "…"
    return text


@dataclass
class AnswerWriter:
    """A client of one chat-completions endpoint (kept for the bot's life; ``close`` at exit)."""

    url: str
    model: str
    api_key: str | None = None
    timeout: float = 20.0
    client: httpx.AsyncClient | None = None

    def __post_init__(self) -> None:
        if self.api_key:
            protect_secrets([self.api_key])
        if self.client is None:
            self.client = httpx.AsyncClient(timeout=self.timeout)

    async def write(self, question: str, passages: Sequence[Passage]) -> str | None:
        """A short answer grounded in ``passages``, or None (nothing to cite, or any failure)."""
        if not passages:
            return None
        assert self.client is not None
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        body = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": prompt(question, passages)},
            ],
            "temperature": 0.2,
            "max_tokens": MAX_TOKENS,
            "stream": False,
        }
        try:
            response = await self.client.post(
                endpoint(self.url), json=body, headers=headers, timeout=self.timeout
            )
            response.raise_for_status()
            text = response.json()["choices"][0]["message"]["content"]
        except httpx.HTTPStatusError as exc:
            log.warning("LLM answer failed: HTTP %d", exc.response.status_code)
            return None
        except httpx.HTTPError as exc:
            log.warning("LLM answer failed: %s", type(exc).__name__)
            return None
        except (ValueError, KeyError, IndexError, TypeError):
            log.warning("LLM answer failed: the reply is not a chat completion")
            return None
        if not isinstance(text, str) or not text.strip():
            return None
        answer = grounded(" ".join(text.split()), len(passages))
        if answer is None:
            log.info("LLM answer dropped: it cites no retrieved passage")
        return answer

    async def close(self) -> None:
        if self.client is not None:
            await self.client.aclose()


def answer_writer(settings: Settings) -> AnswerWriter | None:
    """/ask's language model, when the operator configured one (URL and model)."""
    if not (settings.llm_url and settings.llm_model):
        return None
    return AnswerWriter(
        settings.llm_url,
        settings.llm_model,
        api_key=settings.llm_api_key,
        timeout=settings.llm_timeout_seconds,
    )
