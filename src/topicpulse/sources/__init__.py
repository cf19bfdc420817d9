"""Sources: where papers enter. The arXiv client and parser (``arxiv``) and the ingestion
rounds that poll, backfill and import into the store (``ingest``)."""
