"""Embedders: the protocol the indexer and search use, and the model2vec implementation."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from tui_search.core.errors import ModelError
from tui_search.core.safetensors_map import map_safetensors

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
    setting = getattr(tokenizer, "file_setting", None)
    if callable(setting):  # a ``QuickTokenizer``: its file's settings, the library not loaded
        truncation = setting("truncation")
        kind = (setting("pre_tokenizer") or {}).get("type")
    else:
        truncation = getattr(tokenizer, "truncation", None)
        kind = type(getattr(tokenizer, "pre_tokenizer", None)).__name__
    if not truncation or truncation.get("max_length") != limit:
        return None
    return limit if kind in _WHITESPACE_SPLITTERS else None


def _prefix(text: str, chars: int) -> str:
    """``text`` cut at the last whitespace before ``chars`` (whole when short or unbroken)."""
    if len(text) <= chars:
        return text
    cut = max(text.rfind(" ", 0, chars), text.rfind("\n", 0, chars), text.rfind("\t", 0, chars))
    return text[:cut] if cut > 0 else text


#: The files of a model2vec model folder (``StaticModel.save_pretrained``'s layout).
MODEL2VEC_FILES = ("config.json", "model.safetensors", "tokenizer.json")


class FolderModel:
    """A model2vec model read from its folder (``StaticModel.save_pretrained``'s layout): the
    parts of ``StaticModel`` that embedding uses, the same values (a test compares them with
    ``StaticModel.from_pretrained``), without importing the ``model2vec`` package, which
    brings ``joblib`` and ``tqdm`` (36 ms of every command-line search) for batch encoding
    that the indexer does itself. ``tokenize`` is ``StaticModel.tokenize``: the tokenizer's
    ids without special tokens, the unknown token dropped. Models from the hub are loaded by
    model2vec itself."""

    def __init__(self, folder: Path) -> None:
        from tui_search.core.quick_tokenizer import QuickTokenizer

        tensors = _mapped_tensors(folder / "model.safetensors")
        self.embedding: np.ndarray = tensors["embeddings"]
        self.weights: np.ndarray | None = tensors.get("weights")
        self.token_mapping: np.ndarray | None = tensors.get("mapping")
        self.config: dict[str, Any] = json.loads(
            (folder / "config.json").read_text(encoding="utf-8")
        )
        self.normalize = bool(self.config.get("normalize", False))
        self.max_length: int | None = self.config.get("max_length", 512)
        # a search tokenizes its question with a partial tokenizer, the indexer with the whole
        self.tokenizer = QuickTokenizer(folder / "tokenizer.json")
        if self.token_mapping is None and len(self.embedding) != self.tokenizer.get_vocab_size():
            raise ValueError(
                f"{self.tokenizer.get_vocab_size()} tokens but {len(self.embedding)} vectors, "
                "and no token mapping"
            )
        # no padding, the pad token kept (as model2vec); the file's settings are read without
        # loading the tokenizer library (``QuickTokenizer.file_setting``)
        padding = self.tokenizer.file_setting("padding")
        if padding is not None:
            self.tokenizer.enable_padding(
                pad_id=padding["pad_id"],
                pad_token=padding["pad_token"],
                pad_type_id=padding["pad_type_id"],
                length=0,
            )
        self.unk_token_id = self._unk_token_id()

    def _unk_token_id(self) -> int | None:
        model = self.tokenizer.file_setting("model") or {}
        if "unk_token" in model:  # WordPiece, BPE, WordLevel
            token = model["unk_token"]
            return None if token is None else self.tokenizer.token_to_id(token)
        unk = model.get("unk_id")  # Unigram
        return None if unk is None else int(unk)

    @property
    def dim(self) -> int:
        return int(self.embedding.shape[1])

    def tokenize(self, sentences: list[str]) -> list[list[int]]:
        encodings = self.tokenizer.encode_batch_fast(sentences, add_special_tokens=False)
        unk = self.unk_token_id
        if unk is None:
            return [e.ids for e in encodings]
        return [[i for i in e.ids if i != unk] for e in encodings]


def _mapped_tensors(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a ``.safetensors`` file as read-only memory maps of the file
    (``core.safetensors_map``): no copy of the embedding table; a search reads the rows of its
    own tokens. A file whose header does not describe it exactly is not mapped but read by
    ``safetensors`` itself, which says what is wrong."""
    try:
        return map_safetensors(path)[1]
    except (OSError, ValueError):
        from safetensors import safe_open

        with safe_open(str(path), framework="numpy") as tensors:
            return {name: tensors.get_tensor(name) for name in tensors.keys()}  # noqa: SIM118


def _from_pretrained(name: str) -> Any:
    """``StaticModel.from_pretrained``: a hub id (only when the user asks for one) or a folder
    in another layout."""
    try:
        from model2vec import StaticModel
    except ImportError as exc:  # pragma: no cover - a packaging error
        raise ModelError(f"model2vec is not installed: {exc}") from exc
    import logging

    # model2vec reads a model card through huggingface_hub, which warns about cards without
    # metadata; that is noise to a user
    for logger in ("model2vec", "huggingface_hub", "huggingface_hub.repocard"):
        logging.getLogger(logger).setLevel(logging.ERROR)
    return StaticModel.from_pretrained(name)


class Model2VecEmbedder:
    """A model2vec ``StaticModel``. Loads the shipped model unless told otherwise."""

    def __init__(
        self, model: str | os.PathLike[str] | None = None, *, batch_size: int = 1024
    ) -> None:
        self.batch_size = batch_size
        self._lock = threading.Lock()
        source = Path(model).expanduser() if model is not None else DEFAULT_MODEL_DIR
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
                self._model: Any = FolderModel(source)
            else:
                self._model = _from_pretrained(str(source) if source.exists() else str(model))
        except Exception as exc:
            raise ModelError(f"cannot load model2vec model {self.name!r}: {exc}") from exc
        self._dim = int(self._model.dim)
        self._prefix_tokens = _prefix_tokens(self._model)

    @property
    def dim(self) -> int:
        return self._dim

    def warm_up(self) -> None:
        """Load the whole tokenizer now (a process that searches on: the app, the agent
        server), not partial ones for its first questions (``core.quick_tokenizer``)."""
        whole = getattr(getattr(self._model, "tokenizer", None), "whole", None)
        if callable(whole):
            with self._lock:
                whole()

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
        and each divided by its own norm: no float32 copy of the whole table and no table of
        every token's norm (20 ms of a process's first search), only the rows asked for. The
        rows are divided in place (a search's few thousand rows are megabytes: a second array
        cost its pages' first-touch faults); a zero row stays zero."""
        rows = self._rows(np.asarray(ids, dtype=np.int64))
        norms = np.sqrt(np.einsum("ij,ij->i", rows, rows))
        norms[norms == 0] = 1.0
        rows /= norms[:, None]
        return rows
