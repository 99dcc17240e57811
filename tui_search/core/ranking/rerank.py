"""The re-ranker: a small transformer sentence encoder re-orders the head of a hybrid ranking.

The static model (model2vec) finds the candidates in a few milliseconds; a 6-layer BERT
sentence encoder (all-MiniLM-L6-v2, shipped int8 in ``models/reranker``, built by
``scripts/build_reranker.py``) then reads the question and each section of the head as
sentences (the top ``depth``; for a short query also the semantic arm's best sections below
them, ``head_positions``, and the encoder's own best over every section, ``encoder_arm``), and
its cosine is mixed into their scores::

    score' = (1 - weight) x score + weight x cos' x best score

where ``cos'`` is the cosine min-max normalised over the head; ``depth`` and ``weight`` are
``RankingParams.rerank_depth`` and ``rerank_weight`` (docs/ranking.md#re-ranker).

Costs, and where the vectors are made:
- a section's vector takes ~10 ms of CPU with onnxruntime's int8 layers (``onnx_encoder``;
  ~26 ms with the numpy layers below; one core, packed batches, 128 tokens at most). The
  vectors are content-addressed (``rerank_vectors``, by the chunk's content hash) and made
  only by the background fill (``core.rerank_fill``: one detached process per index, on the
  other core), never while someone waits.
- the rule, the same on every surface (the app, the command line, the agent server, eval): a
  head is re-read only when every one of its sections has its vector; otherwise it keeps the
  static order and the outcome says how many are missing (``RerankOutcome``). So every
  surface orders a question alike at any moment, and a fresh index's first question costs
  what a repeat one does.
- the question's vector (~5-10 ms) is encoded by the numpy layers while the arms are
  searched (:meth:`Reranker.start`): a search process never imports onnxruntime.

No torch: the forward pass is written out below in numpy; its vectors match
sentence-transformers' to a cosine of 0.9993 on average (int8 weights; 1.000000 with the float
weights, measured against sentence-transformers when the encoder was built). The int8 layers'
vectors match the numpy layers' to a cosine of 0.998 on average, every judged set's hybrid
nDCG@10 within 0.003 (docs/results.md).
"""

from __future__ import annotations

import json
import math
import sqlite3
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tui_search.core.errors import ModelError
from tui_search.core.quick_tokenizer import QuickTokenizer
from tui_search.core.ranking import encoder_arm, encoder_weights
from tui_search.core.ranking.fusion import document_of
from tui_search.core.ranking.params import RankingParams
from tui_search.core.sections import embedding_text, section_of

if TYPE_CHECKING:
    from tui_search.core.ranking.fusion import Scored
    from tui_search.core.store import Store

DEFAULT_RERANKER_DIR = Path(__file__).resolve().parent.parent.parent / "models" / "reranker"


#: What runs the encoder's layers over a packed batch: (embedded rows, each text's token
#: count) -> the last layer's rows.
Layers = Callable[[np.ndarray, Sequence[int]], np.ndarray]

#: Tokens a batch of texts is packed to (its buffers, about 6 MB, stay in the caches).
PACK_TOKENS = 256

# Abramowitz and Stegun 7.1.26: erf(x) = 1 - t (a1 + t (a2 + ... + t a5)) exp(-x^2),
# t = 1 / (1 + p x), for x >= 0, error below 1.5e-7 (numpy has no erf)
_ERF_P = 0.3275911
_ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def _gelu(m: np.ndarray, s1: np.ndarray, s2: np.ndarray, s3: np.ndarray) -> None:
    """``m`` <- GELU(m) = m Phi(m), in place (``s1``-``s3``: scratch of ``m``'s shape).

    With e = 1 - erf(|m| / sqrt 2) from the formula above, m Phi(m) = max(m, 0) - |m| e / 2.
    """
    np.abs(m, out=s1)
    np.multiply(s1, np.float32(_ERF_P / math.sqrt(2.0)), out=s2)
    s2 += np.float32(1.0)
    np.reciprocal(s2, out=s2)  # t
    np.multiply(s2, np.float32(_ERF_A[4]), out=s3)
    for a in reversed(_ERF_A[:4]):
        s3 += np.float32(a)
        s3 *= s2
    np.square(s1, out=s2)
    s2 *= np.float32(-0.5)
    np.exp(s2, out=s2)
    s3 *= s2  # 1 - erf(|m| / sqrt 2)
    s3 *= s1
    s3 *= np.float32(0.5)
    m += s1
    m *= np.float32(0.5)  # max(m, 0)
    m -= s3


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    """``x`` normalised per row, scaled by ``w`` and shifted by ``b``, in place."""
    x -= x.mean(-1, keepdims=True)
    var = np.einsum("ij,ij->i", x, x)
    var *= np.float32(1.0 / x.shape[1])
    var += np.float32(eps)
    np.sqrt(var, out=var)
    x /= var[:, None]
    x *= w
    x += b
    return x


class SentenceEncoder:
    """all-MiniLM-L6-v2 with numpy: mean-pooled, unit-length sentence vectors.

    Texts are encoded together (:meth:`encode_many`): sorted by token count and packed into
    batches of about ``PACK_TOKENS`` tokens, the dense layers run once over a batch's tokens
    laid end to end (no padding: a token's dense layers do not depend on its neighbours), and
    attention runs per run of texts of equal length. Each batch works in buffers of its own,
    written in place, so a layer allocates nothing.
    """

    def __init__(self, folder: Path = DEFAULT_RERANKER_DIR, cache_dir: Path | None = None) -> None:
        """The encoder in ``folder``; its float32 weights are made once and mapped from
        ``cache_dir`` (by default the per-user cache; ``encoder_weights``)."""
        if cache_dir is None:
            from tui_search.core.options import user_cache_dir

            cache_dir = user_cache_dir()
        try:
            config = (folder / "config.json").read_text(encoding="utf-8")
            cfg = json.loads(config)
            self.layers = int(cfg["num_hidden_layers"])
            weights = encoder_weights.load(folder, config, self.layers, cache_dir)
            # the question alone is tokenized with a partial tokenizer (``QuickTokenizer``)
            self._tok = QuickTokenizer(folder / "tokenizer.json")
        except (OSError, ValueError, KeyError) as exc:
            raise ModelError(f"cannot load the re-ranker's encoder from {folder}: {exc}") from exc
        self.max_length = int(cfg["max_length"])
        self._tok.enable_truncation(self.max_length)
        self._tok.no_padding()
        self.heads = int(cfg["num_attention_heads"])
        self.eps = float(cfg.get("layer_norm_eps", 1e-12))
        self.dim = int(cfg["hidden_size"])
        # the token table stays int8 (11 MB): rows are scaled when looked up
        self._words = weights["words"]
        self._word_scale = weights["word_scale"]
        self._positions = weights["positions"]
        self._type0 = weights["type0"]
        self._emb_norm = (weights["emb_norm_w"], weights["emb_norm_b"])
        self._layers: list[dict[str, np.ndarray]] = [
            {part: weights[f"{i}.{part}"] for part in encoder_weights.LAYER_PARTS}
            for i in range(self.layers)
        ]

    def warm_up(self) -> None:
        """Load the whole tokenizer now (a process that encodes sections or searches on)."""
        self._tok.whole()

    def encode(self, text: str) -> np.ndarray:
        """The unit vector of ``text`` (cut to ``max_length`` tokens)."""
        return self.encode_many([text])[0]

    def encode_many(self, texts: Sequence[str], layers: Layers | None = None) -> np.ndarray:
        """The unit vectors of ``texts`` (one row each, in order; each cut to ``max_length``
        tokens). A text's vector does not depend on the texts encoded with it. ``layers``:
        what runs the six layers over a packed batch's embedded rows (``onnx_encoder``'s int8
        layers), numpy's float32 by default."""
        if len(texts) > 1:  # (the same ids as one ``encode`` a text, without their offsets)
            encodings = self._tok.encode_batch_fast(texts)
        else:
            encodings = [self._tok.encode(t) for t in texts]
        ids = [np.asarray(e.ids, dtype=np.int64) for e in encodings]
        out = np.empty((len(ids), self.dim), dtype=np.float32)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        start = 0
        while start < len(order):
            end, tokens = start + 1, len(ids[order[start]])
            while end < len(order) and tokens + len(ids[order[end]]) <= PACK_TOKENS:
                tokens += len(ids[order[end]])
                end += 1
            batch = order[start:end]
            out[batch] = self._forward([ids[i] for i in batch], layers or self._run_layers)
            start = end
        return out

    def _forward(self, batch: list[np.ndarray], layers: Layers) -> np.ndarray:
        """Unit vectors of a batch of token id arrays sorted by length."""
        lengths = [len(ids) for ids in batch]
        every = np.concatenate(batch)
        x = self._words[every].astype(np.float32)
        x *= self._word_scale[every, None]
        x += self._positions[np.concatenate([np.arange(k) for k in lengths])]
        x += self._type0
        _layer_norm(x, *self._emb_norm, self.eps)
        x = layers(x, lengths)
        starts = np.cumsum([0, *lengths[:-1]])
        pooled = np.add.reduceat(x, starts, axis=0) / np.asarray(lengths, np.float32)[:, None]
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)

    def _run_layers(self, x: np.ndarray, lengths: Sequence[int]) -> np.ndarray:
        """The six layers in numpy over a packed batch's embedded rows (``x``, texts of
        ``lengths`` tokens end to end; the last layer's rows, ``x`` is overwritten)."""
        n, dim, h = len(x), self.dim, self.heads
        d = dim // h
        # (first row, texts, tokens each) of each run of texts of one length
        runs: list[tuple[int, int, int]] = []
        row = 0
        for k in lengths:
            if runs and runs[-1][2] == k:
                first, count, _ = runs[-1]
                runs[-1] = (first, count + 1, k)
            else:
                runs.append((row, 1, k))
            row += k
        qkv = np.empty((n, 3 * dim), dtype=np.float32)
        context = np.empty((n, dim), dtype=np.float32)
        y = np.empty((n, dim), dtype=np.float32)
        up = np.empty((n, self._layers[0]["up"].shape[1]), dtype=np.float32)
        scratch = (np.empty_like(up), np.empty_like(up), np.empty_like(up))
        scale = np.float32(1.0 / math.sqrt(d))
        for L in self._layers:
            np.matmul(x, L["qkv"], out=qkv)
            qkv += L["qkv_b"]
            for first, count, k in runs:
                # (texts, tokens, q/k/v, heads, head dim) -> (texts, heads, tokens, head dim)
                block = qkv[first : first + count * k].reshape(count, k, 3, h, d)
                q = block[:, :, 0].transpose(0, 2, 1, 3)
                keys = block[:, :, 1].transpose(0, 2, 3, 1)
                v = block[:, :, 2].transpose(0, 2, 1, 3)
                a = q @ keys
                a *= scale
                a -= a.max(-1, keepdims=True)
                np.exp(a, out=a)
                a /= a.sum(-1, keepdims=True)
                context[first : first + count * k].reshape(count, k, h, d)[:] = (a @ v).transpose(
                    0, 2, 1, 3
                )
            np.matmul(context, L["out"], out=y)
            y += L["out_b"]
            y += x
            x, y = _layer_norm(y, L["n1_w"], L["n1_b"], self.eps), x
            np.matmul(x, L["up"], out=up)
            up += L["up_b"]
            _gelu(up, *scratch)
            np.matmul(up, L["down"], out=y)
            y += L["down_b"]
            y += x
            x, y = _layer_norm(y, L["n2_w"], L["n2_b"], self.eps), x
        return x


#: How ``passage_text`` and the pooling make a vector (with the encoder's config, the recipe
#: the stored vectors are checked against: vectors made otherwise are dropped).
PASSAGE_RECIPE = "title > heading path, text; mean pooled, unit length"


def recipe(folder: Path = DEFAULT_RERANKER_DIR) -> str:
    """What the stored vectors must have been made from (the encoder's config: its weights'
    name and token limit, then ``PASSAGE_RECIPE``); the runtime that made them follows it in
    the index (``made_by``), and a search reads vectors of this recipe by either runtime."""
    try:
        config = (folder / "config.json").read_text(encoding="utf-8")
    except OSError:
        config = "(no encoder)"
    return f"all-MiniLM-L6-v2 int8 {' '.join(config.split())} {PASSAGE_RECIPE}"


#: The runtimes that make the sections' vectors (``core.rerank_fill``): onnxruntime's int8
#: layers, or numpy's float32 layers where onnxruntime cannot load.
NUMPY_RUNTIME = "numpy float32 layers"


def made_by(runtime: str, folder: Path = DEFAULT_RERANKER_DIR) -> str:
    """The recipe an index's vectors are recorded with when ``runtime`` makes them (one
    runtime's vectors at a time: a fill by another runtime drops them first)."""
    return f"{recipe(folder)}; {runtime}"


def readable(stored: str | None, folder: Path = DEFAULT_RERANKER_DIR) -> bool:
    """Whether vectors recorded with ``stored`` are this encoder's (by either runtime)."""
    base = recipe(folder)
    return stored is not None and (stored == base or stored.startswith(base + "; "))


#: ``like:DOC``'s question is read from the document's first this many chunks (its title and
#: opening say what it is about).
LIKE_SECTIONS = 8


def passage_text(title: str, heading_path: tuple[str, ...], content: str) -> str:
    """What the encoder reads of a section: as the static model, its title and heading path,
    then its text (cut to the encoder's ``max_length`` tokens)."""
    return embedding_text(title, heading_path, content)


@dataclass(frozen=True)
class RerankOutcome:
    """What one search's re-ranking did: ``applied`` when the head was re-ordered;
    ``missing`` sections of the head had no vector yet (the background fill owes them)."""

    applied: bool
    missing: int = 0


def mix(scores: list[float], cosines: np.ndarray, weight: float, floor: float) -> list[float]:
    """The head's new scores: ``(1 - weight) x score + weight x cos' x best score``, ``cos'``
    the cosines min-max over the head; never below ``floor`` (the best score after the head,
    which stays below it)."""
    lo, hi = float(cosines.min()), float(cosines.max())
    norm = (cosines - lo) / (hi - lo) if hi > lo else np.zeros_like(cosines)
    top = max(scores)
    return [
        max((1 - weight) * s + weight * float(c) * top, floor + 1e-9)
        for s, c in zip(scores, norm, strict=True)
    ]


def head_positions(ranked: Sequence[Scored], depth: int, semantic_depth: int) -> list[int]:
    """The positions in ``ranked`` (sorted, best first) of the sections the encoder re-reads:
    the best ``depth``, and every section further down that the semantic arm ranks within
    ``semantic_depth``. A section its meaning finds but none of the question's words (a
    setting one heading deep in a long page: "Font size" for "make the text bigger") takes
    no keyword score in the fusion and ranks far below its cosine; read by the encoder, it
    is weighed by what it says (docs/ranking.md#deep-answers)."""
    if depth <= 0:
        return []
    at = list(range(min(depth, len(ranked))))
    if semantic_depth > 0:
        at += [
            i
            for i in range(len(at), len(ranked))
            if (r := ranked[i].semantic_rank) is not None and r <= semantic_depth
        ]
    return at


def withdraw_names(head: list[Scored], cosines: np.ndarray, share: float) -> None:
    """The name match read again by the encoder: a document whose name the query says gained
    it when the static model found that it answers (``signals.answers``); where the encoder
    reads it as not answering (its best cosine in the head below ``share`` of the head's
    best), the gain is withdrawn before the head is mixed: the page ``link`` for "create a
    symbolic link", ``file`` for "search for a word inside files" (docs/ranking.md#name-match)."""
    if share <= 0 or not any(s.name_factor > 1.0 for s in head):
        return
    top = float(cosines.max())
    best: dict[str, float] = {}
    for s, c in zip(head, cosines.tolist(), strict=True):
        d = document_of(s.key)
        best[d] = max(best.get(d, -1.0), c)
    for s in head:
        if s.name_factor > 1.0 and best[document_of(s.key)] < share * top:
            s.score /= s.name_factor
            s.name_factor = 1.0


class Reranker:
    """Re-orders hybrid rankings' heads whose sections all have their vector.

    A search never makes a section's vector: a head that lacks some keeps the static order
    (the outcome says how many are missing) and ``on_missing`` is called, which starts the
    background fill (``core.rerank_fill``), so the app, the command line, the agent server
    and eval order a question alike at any moment. Only the question is encoded here, by the
    numpy layers.
    """

    def __init__(
        self,
        store: Store,
        params: RankingParams,
        *,
        encoder: Callable[[], SentenceEncoder] = SentenceEncoder,
        on_missing: Callable[[], None] = lambda: None,
    ) -> None:
        self.store = store
        self.params = params
        self._on_missing = on_missing
        self._make_encoder = encoder
        self._encoder: SentenceEncoder | None = None
        self._load_lock = threading.Lock()
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._pool: ThreadPoolExecutor | None = None
        self._any, self._any_checked = False, float("-inf")
        #: whether each of the latest searches' heads had all their vectors
        self._recent: deque[bool] = deque(maxlen=8)

    @property
    def encoder(self) -> SentenceEncoder:
        with self._load_lock:
            if self._encoder is None:
                self._encoder = self._make_encoder()
            return self._encoder

    def query_vector(self, text: str) -> np.ndarray:
        with self._load_lock:
            hit = self._queries.get(text)
            if hit is not None:
                self._queries.move_to_end(text)
                return hit
        vec = self.encoder.encode(text)
        with self._load_lock:
            self._queries[text] = vec
            while len(self._queries) > 256:
                self._queries.popitem(last=False)
        return vec

    def start(self, text: str) -> Future[np.ndarray] | str:
        """Encode the question on a thread of its own while the caller searches the arms;
        while no section has a vector yet, or the latest heads lacked some, nothing (the
        question is encoded later if the head turns out to have its vectors)."""
        if not self._has_vectors() or (self._recent and not any(self._recent)):
            # the encoding would most likely be wasted, and it would share the interpreter
            # with the search
            return text
        with self._load_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="rerank-query")
            pool = self._pool
        return pool.submit(self.query_vector, text)

    def _has_vectors(self) -> bool:
        """Whether the index holds any vector (asked again at most every 2 s until it does)."""
        now = time.monotonic()
        if not self._any and now - self._any_checked > 2.0:
            self._any_checked = now
            self._any = self.store.has_rerank_vectors() and self._readable()
        return self._any

    def _readable(self) -> bool:
        """Whether the index's vectors are this encoder's (``readable``)."""
        try:
            return readable(self.store.get_meta("rerank_recipe"))
        except sqlite3.Error:
            return False

    def documents_vector(self, paths: list[str], text: str | None = None) -> np.ndarray | None:
        """The question of ``like:DOC``: the mean of the encoder's vectors of each document's
        first ``LIKE_SECTIONS`` chunks (and of ``text``, ``similar:`` beside ``like:``), unit
        length; None while some have no vector."""
        keys: list[str] = []
        for path in paths:
            keys += [c.key for c in self.store.chunks_for_path(path)[:LIKE_SECTIONS]]
        vectors, hashes, _ = self._vectors(keys)
        if vectors is None:
            return None
        rows = [vectors[hashes[k]] for k in keys if hashes.get(k) in vectors]
        if text:
            rows.append(self.query_vector(text))
        if not rows:
            return None
        mean = np.mean(np.stack(rows), axis=0).astype(np.float32)
        norm = float(np.linalg.norm(mean))
        return mean / norm if norm > 0 else None

    def apply(
        self,
        query: Future[np.ndarray] | str | np.ndarray,
        ranked: list[Scored],
        semantic_depth: int = 0,
        encoder_depth: int = 0,
    ) -> RerankOutcome:
        """Re-score the head of ``ranked`` (sorted, best first) in place and sort it again;
        the head is the best ``rerank_depth``, the sections below them the semantic arm
        ranks within ``semantic_depth`` (``head_positions``), and those the encoder itself
        ranks within ``encoder_depth`` over every section (``encoder_arm``), each of these
        mixed from at least the static order's score at ``rerank_encoder_place``."""
        at = head_positions(ranked, self.params.rerank_depth, semantic_depth)
        arm: set[int] = set()
        if encoder_depth > 0 and len(at) >= 2:
            at, arm = self._join_encoder_arm(ranked, at, query, encoder_depth)
        head = [ranked[i] for i in at]
        if len(head) < 2 or self.params.rerank_weight <= 0:
            return RerankOutcome(False)
        cos, missing = self.cosines(query, [s.key for s in head])
        if cos is None:
            return RerankOutcome(False, missing)
        chosen = set(at)
        rest = [s for i, s in enumerate(ranked) if i not in chosen]
        floor = rest[0].score if rest else 0.0
        withdraw_names(head, cos, self.params.title_answer_share)
        scores = [s.score for s in head]
        place = self.params.rerank_encoder_place
        if place > 0 and arm:
            # the encoder's own candidates come in at least at the static order's score at
            # ``place``: at their own, the mix keeps them at the head's foot
            level = ranked[min(place, len(ranked)) - 1].score
            scores = [max(v, level) if i in arm else v for v, i in zip(scores, at, strict=True)]
        for s, value, raw in zip(
            head,
            mix(scores, cos, self.params.rerank_weight, floor),
            cos,
            strict=True,
        ):
            s.rerank_cosine, s.before_rerank, s.score = float(raw), s.score, value
        ranked[:] = sorted(head, key=lambda s: (-s.score, s.key)) + rest
        return RerankOutcome(True, missing)

    def _question(self, query: Future[np.ndarray] | str | np.ndarray) -> np.ndarray:
        if isinstance(query, Future):
            return query.result()
        if isinstance(query, np.ndarray):
            return query
        return self.query_vector(query)

    def _join_encoder_arm(
        self,
        ranked: list[Scored],
        at: list[int],
        query: Future[np.ndarray] | str | np.ndarray,
        depth: int,
    ) -> tuple[list[int], set[int]]:
        """(``at`` joined by the positions in ``ranked`` of the sections the encoder ranks
        within ``depth`` over every section, those positions; ``encoder_arm.best``). ``at``
        as it is while the encoder's matrix does not describe the index (the fill owes it:
        ``on_missing`` is called); only sections ``ranked`` holds join (its filters hold)."""
        if not self._readable():
            return at, set()
        best = encoder_arm.best(self.store, lambda: self._question(query), depth)
        if best is None:
            self._on_missing()
            return at, set()
        wanted = {section_of(c.key) for c in best}
        chosen = set(at)
        arm = {i for i, s in enumerate(ranked) if section_of(s.key) in wanted}
        extra = [i for i in arm if i not in chosen]
        return (sorted(at + extra) if extra else at), arm

    def _vectors(self, keys: list[str]) -> tuple[dict[str, np.ndarray] | None, dict[str, str], int]:
        """(content hash -> the encoder's vector, chunk key -> content hash, how many had no
        vector) for ``keys``; no vectors (None) when some have none (the background fill owes
        them: ``on_missing`` is called)."""
        hashes = self.store.content_hashes(keys)
        vectors = self.store.rerank_vectors(set(hashes.values())) if self._readable() else {}
        missing = [key for key in keys if hashes.get(key) not in vectors]
        self._recent.append(not missing)
        if missing:
            self._on_missing()
            return None, hashes, len(missing)
        return vectors, hashes, 0

    def cosines(
        self, query: Future[np.ndarray] | str | np.ndarray, keys: list[str]
    ) -> tuple[np.ndarray | None, int]:
        """(the encoder's cosine of the question with each section of ``keys``, or None when
        some have no vector yet; how many had none)."""
        vectors, hashes, missing = self._vectors(keys)
        if vectors is None:
            return None, missing
        q = self._question(query)
        return np.array([float(vectors[hashes[key]] @ q) for key in keys]), missing

    def owed(self) -> bool:
        """Whether some section text has no vector this encoder reads, or the encoder's
        matrix does not describe the index (the fill has work)."""
        return (
            not self._readable()
            or self.store.any_text_without_rerank_vector()
            or (self.params.rerank_encoder_depth > 0 and not encoder_arm.current(self.store))
        )

    def forget(self) -> None:
        """Look again for vectors at the next search (a fill has just made them)."""
        self._recent.clear()
        self._any, self._any_checked = False, float("-inf")

    def progress(self) -> tuple[int, int]:
        """(chunk texts with a vector, chunk texts)."""
        if not self._readable():
            return 0, self.store.rerank_progress()[1]
        return self.store.rerank_progress()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
