"""Embedders: the protocol the indexer and search use, and the model2vec implementation."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any, Protocol, cast, runtime_checkable

import numpy as np

from tui_search.core.errors import ModelError

#: The model shipped inside the package (built by scripts/build_model.py).
DEFAULT_MODEL_DIR = Path(__file__).resolve().parent.parent / "models" / "default"


@runtime_checkable
class Embedder(Protocol):
    @property
    def dim(self) -> int: ...

    @property
    def fingerprint(self) -> str:
        """Changes whenever vectors made by this embedder stop being comparable."""
        ...

    def encode(self, texts: list[str]) -> np.ndarray:
        """float32 array (len(texts), dim), rows L2-normalised (zero rows stay zero)."""
        ...


@runtime_checkable
class TokenEmbedder(Protocol):
    """An embedder whose sentence vector is a mean of per-token vectors (model2vec), which
    makes soft term matching possible (see ``core.softmatch``)."""

    def token_ids(self, texts: list[str]) -> list[np.ndarray]:
        """The distinct token ids of each text (int32, sorted)."""
        ...

    def query_tokens(self, text: str) -> list[tuple[int, int, int]]:
        """(token id, start char, end char) of each token of ``text``."""
        ...

    def token_vectors(self, ids: np.ndarray) -> np.ndarray:
        """L2-normalised float32 vectors of token ``ids``, one row each."""
        ...

    def encode_with_tokens(self, texts: list[str]) -> tuple[np.ndarray, list[np.ndarray]]:
        """``encode(texts)`` and ``token_ids(texts)`` from one tokenisation."""
        ...


def normalize_rows(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim == 1:
        vectors = vectors[None, :]
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms


def _dir_fingerprint(path: Path) -> str:
    h = hashlib.sha256()
    for name in sorted(os.listdir(path)):
        p = path / name
        if p.is_file():
            st = p.stat()
            h.update(f"{name}:{st.st_size}".encode())
            if p.suffix == ".json" or st.st_size < 1_000_000:
                h.update(p.read_bytes())
            else:
                with open(p, "rb") as fh:
                    h.update(fh.read(65536))
    return h.hexdigest()[:16]


#: A text longer than ``max_length`` x this many characters is tokenised from a prefix.
PREFIX_CHARS_PER_TOKEN = 16
_WHITESPACE_SPLITTERS = {"BertPreTokenizer", "Whitespace", "WhitespaceSplit"}


def _prefix_tokens(model: object) -> int | None:
    """The model's ``max_length`` when its tokenizer truncates there and splits words at
    whitespace first (then a prefix cut at whitespace tokenises as the start of the text);
    None otherwise."""
    limit = getattr(model, "max_length", None)
    tokenizer = getattr(model, "tokenizer", None)
    if not isinstance(limit, int) or limit <= 0 or tokenizer is None:
        return None
    truncation = getattr(tokenizer, "truncation", None)
    if not truncation or truncation.get("max_length") != limit:
        return None
    kind = type(getattr(tokenizer, "pre_tokenizer", None)).__name__
    return limit if kind in _WHITESPACE_SPLITTERS else None


def _prefix(text: str, chars: int) -> str:
    """``text`` cut at the last whitespace before ``chars`` (whole when short or unbroken)."""
    if len(text) <= chars:
        return text
    cut = max(text.rfind(" ", 0, chars), text.rfind("\n", 0, chars), text.rfind("\t", 0, chars))
    return text[:cut] if cut > 0 else text


#: The files of a model2vec model folder (``StaticModel.save_pretrained``'s layout).
MODEL2VEC_FILES = ("config.json", "model.safetensors", "tokenizer.json")


@functools.cache
def _light_model_class() -> Any:
    """A ``StaticModel`` whose constructor skips two costs of ``StaticModel.__init__`` (about
    80 ms of every command-line search): a deep copy of the tokenizer (ours was just read from
    the file and nobody else holds it) and sorting the vocabulary into ``tokens`` (read here
    only when asked: ``median_token_length`` needs it in ``encode``). Otherwise the same
    attributes, set the same way; a test compares it with ``StaticModel.from_pretrained``.
    None when model2vec's helpers have moved (then ``StaticModel`` itself is used)."""
    try:
        from model2vec import StaticModel
        from model2vec.model import _disable_padding, _get_unk_token_id
    except ImportError:  # pragma: no cover - another model2vec layout
        return None

    class LightStaticModel(StaticModel):
        def __init__(
            self,
            vectors: np.ndarray,
            tokenizer: Any,
            config: dict[str, Any],
            normalize: bool,
            weights: np.ndarray | None,
            token_mapping: np.ndarray | None,
            max_length: int | None,
        ) -> None:
            if token_mapping is None and len(vectors) != tokenizer.get_vocab_size():
                raise ValueError(
                    f"{tokenizer.get_vocab_size()} tokens but {len(vectors)} vectors, no mapping"
                )
            self.embedding = vectors
            self.weights = weights
            self.token_mapping = token_mapping
            self.tokenizer = tokenizer
            _disable_padding(self.tokenizer)
            self.unk_token_id = _get_unk_token_id(self.tokenizer)
            self.config = cast(Any, {**config})
            self.base_model_name = None
            self.language = None
            self.max_length = max_length
            self.normalize = normalize

        @functools.cached_property
        def tokens(self) -> tuple[str, ...]:  # type: ignore[override]
            vocab = sorted(self.tokenizer.get_vocab().items(), key=lambda x: x[1])
            return tuple(token for token, _ in vocab)

        @functools.cached_property
        def median_token_length(self) -> int:  # type: ignore[override]
            return int(np.median([len(token) for token in self.tokens]))

    return LightStaticModel


def _load_model_folder(folder: Path) -> Any:
    """A ``StaticModel`` from a local model2vec folder: what ``StaticModel.from_pretrained``
    builds from one (the same tensors, tokenizer and config: a test compares them), without
    the hub lookup and the model-card parsing it does first, which cost a command-line search
    about 0.4 s of its start-up."""
    from model2vec import StaticModel
    from safetensors import safe_open
    from tokenizers import Tokenizer

    with safe_open(str(folder / "model.safetensors"), framework="numpy") as tensors:
        names = set(tensors.keys())
        embeddings = tensors.get_tensor("embeddings")
        weights = tensors.get_tensor("weights") if "weights" in names else None
        mapping = tensors.get_tensor("mapping") if "mapping" in names else None
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    light = _light_model_class()
    return (light or StaticModel)(
        vectors=embeddings,
        tokenizer=tokenizer,
        config=config,
        normalize=bool(config.get("normalize", False)),
        weights=weights,
        token_mapping=mapping,
        max_length=config.get("max_length", 512),
    )


class Model2VecEmbedder:
    """A model2vec ``StaticModel``. Loads the shipped model unless told otherwise."""

    def __init__(
        self, model: str | os.PathLike[str] | None = None, *, batch_size: int = 1024
    ) -> None:
        self.batch_size = batch_size
        self._lock = threading.Lock()
        source = Path(model).expanduser() if model is not None else DEFAULT_MODEL_DIR
        try:
            from model2vec import StaticModel
        except ImportError as exc:  # pragma: no cover - a packaging error
            raise ModelError(f"model2vec is not installed: {exc}") from exc
        import logging

        # model2vec reads a model card through huggingface_hub, which warns about cards
        # without metadata; that is noise to a user of the shipped model
        for name in ("model2vec", "huggingface_hub", "huggingface_hub.repocard"):
            logging.getLogger(name).setLevel(logging.ERROR)
        if source.exists():
            if not (source / "config.json").is_file():
                raise ModelError(f"{source} is not a model2vec model folder (no config.json)")
            self.name = str(source)
            self._fingerprint = _dir_fingerprint(source)
        elif model is None:
            raise ModelError(
                f"the shipped embedding model is missing from {source}; "
                "reinstall tui-search or rebuild it with scripts/build_model.py"
            )
        else:
            self.name = str(model)  # a hub id, only when the user asks for one
            self._fingerprint = hashlib.sha256(self.name.encode()).hexdigest()[:16]
        try:
            if source.exists() and all((source / f).is_file() for f in MODEL2VEC_FILES):
                self._model = _load_model_folder(source)
            else:
                self._model = StaticModel.from_pretrained(
                    str(source) if source.exists() else str(model)
                )
        except Exception as exc:
            raise ModelError(f"cannot load model2vec model {self.name!r}: {exc}") from exc
        self._dim = int(self._model.dim)
        self._inverse_norms: np.ndarray | None = None
        self._prefix_tokens = _prefix_tokens(self._model)

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    def encode(self, texts: list[str]) -> np.ndarray:
        """Mean-pooled, L2-normalised vectors: what ``StaticModel.encode`` computes (a test
        compares them), from the tokenisation ``encode_with_tokens`` makes; ``encode`` itself
        would first read and sort the whole vocabulary (50 ms of a command-line search) to cut
        texts at ``max_length`` times the median token length, a cut the tokenizer's own
        truncation at ``max_length`` tokens makes anyway for the texts searched."""
        return self.encode_with_tokens(texts)[0]

    # -- token level (TokenEmbedder) -------------------------------------------------------
    def _tokenize(self, texts: list[str]) -> list[list[int]]:
        """Token ids of each text, truncated to the model's ``max_length`` as in
        ``model.encode``. The tokenizer reads a whole text before it truncates, so a long text
        (a 5 MB one-line file is one chunk) is tokenised from a prefix that ends at whitespace:
        with a pre-tokenizer that splits at whitespace, the prefix's tokens are the text's
        first tokens, and a prefix that gives fewer than ``max_length`` is grown (up to the
        whole text), so the ids are exactly those of the whole text."""
        limit = self._prefix_tokens
        with self._lock:
            if limit is None:
                return list(self._model.tokenize(list(texts)))
            budget = limit * PREFIX_CHARS_PER_TOKEN
            work = [_prefix(t, budget) for t in texts]
            ids = list(self._model.tokenize(work))
            for i, text in enumerate(texts):
                grown = budget
                while len(work[i]) < len(text) and len(ids[i]) < limit:
                    grown *= 4
                    work[i] = _prefix(text, grown)
                    ids[i] = self._model.tokenize([work[i]])[0]
            return ids

    @staticmethod
    def _distinct(ids: list[list[int]]) -> list[np.ndarray]:
        return [np.unique(np.asarray(i, dtype=np.int32)) for i in ids]

    def token_ids(self, texts: list[str]) -> list[np.ndarray]:
        return self._distinct(self._tokenize(texts)) if texts else []

    def encode_with_tokens(self, texts: list[str]) -> tuple[np.ndarray, list[np.ndarray]]:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32), []
        ids = self._tokenize(texts)
        weights = getattr(self._model, "weights", None)
        if weights is not None:
            weights = np.asarray(weights, dtype=np.float32)
        out = np.zeros((len(ids), self._dim), dtype=np.float32)
        distinct: list[np.ndarray] = []
        for i, id_list in enumerate(ids):
            if not id_list:
                distinct.append(np.zeros(0, dtype=np.int32))
                continue
            # the mean of the token rows as a count-weighted sum of the distinct rows (the
            # distinct ids are what the soft match stores): about half the rows gathered
            uniq, counts = np.unique(np.asarray(id_list, dtype=np.int64), return_counts=True)
            w = counts.astype(np.float32)
            if weights is not None:
                w = w * weights[uniq]
            out[i] = (w @ self._rows(uniq)) / len(id_list)
            distinct.append(uniq.astype(np.int32))
        return normalize_rows(out), distinct

    def query_tokens(self, text: str) -> list[tuple[int, int, int]]:
        with self._lock:
            enc = self._model.tokenizer.encode(text, add_special_tokens=False)
        unk = self._model.unk_token_id
        return [
            (int(i), int(a), int(b))
            for i, (a, b) in zip(enc.ids, enc.offsets, strict=True)
            if i != unk
        ]

    def _rows(self, ids: np.ndarray) -> np.ndarray:
        mapping = getattr(self._model, "token_mapping", None)
        rows = ids if mapping is None else np.asarray(mapping)[ids]
        return np.asarray(self._model.embedding[rows], dtype=np.float32)

    def token_vectors(self, ids: np.ndarray) -> np.ndarray:
        """L2-normalised float32 rows of ``ids``, gathered from the model's own (int8) table
        and scaled by each token's inverse norm: no float32 copy of the whole table (75 MB,
        0.1-0.2 s to build on a process's first search)."""
        ids = np.asarray(ids, dtype=np.int64)
        if self._inverse_norms is None:
            with self._lock:
                if self._inverse_norms is None:
                    self._inverse_norms = self._token_inverse_norms()
        return self._rows(ids) * self._inverse_norms[ids][:, None]

    def _token_inverse_norms(self) -> np.ndarray:
        mapping = getattr(self._model, "token_mapping", None)
        size = len(mapping) if mapping is not None else len(self._model.embedding)
        out = np.zeros(size, dtype=np.float32)
        for start in range(0, size, 4096):  # in blocks: a float32 copy of 4,096 rows at a time
            rows = self._rows(np.arange(start, min(start + 4096, size)))
            norms = np.sqrt(np.einsum("ij,ij->i", rows, rows))
            out[start : start + len(rows)] = np.divide(
                1.0, norms, out=np.zeros_like(norms), where=norms > 0
            )
        return out
