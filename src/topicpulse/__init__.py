"""topicpulse: follow research topics on arXiv from Telegram.

The folders are the pipeline, in order (docs/architecture.md): ``sources`` (arXiv) → ``store``
(SQLite) → ``topics`` (queries, catalogue, matching) → ``insight`` (momentum, similar, ask) →
``delivery`` (chats, messages, the outbox) → ``web`` and ``bot``; ``cli`` drives them all.
"""

__version__ = "0.1.0"
