"""topicpulse: follow research topics on arXiv from Telegram.

Pipeline: ingest (arXiv API) → store (SQLite) → topics/matching → momentum → delivery → bot.
"""

__version__ = "0.1.0"
