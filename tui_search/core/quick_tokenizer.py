"""A ``tokenizer.json`` tokenizer that a process tokenizing a few short texts loads in part.

Loading a WordPiece tokenizer whole (``tokenizers.Tokenizer.from_file``) builds its vocabulary
of ~30,000 pieces: ~22 ms of CPU, twice in a one-shot search (the static model's tokenizer
and the re-ranker's), which then tokenizes a single question with each. WordPiece looks a
word up only by its own substrings: the longest piece at the word's start, then the longest
at each later position with the continuing prefix (``##``), or the unknown token for a word
over ``max_input_chars_per_word`` characters or with no piece at some position. So a
tokenizer built from the same file with only the vocabulary pieces that are substrings of a
text's words (and the special tokens) gives that text the same ids and offsets, and it loads
in well under a millisecond.

:class:`QuickTokenizer` does that for texts while their characters add up to ``QUICK_CHARS``;
past that (a process that indexes, or encodes sections) it loads the whole tokenizer once
and uses it from then on. The words are found with the file's own normalizer and
pre-tokenizer, run over the whole text: BERT's normalizer changes text character by
character and its pre-tokenizer splits at every punctuation mark (the special tokens, such
as ``[SEP]``, begin and end with one), so the words of the text cut at the special tokens are
among them. Other tokenizers (not WordPiece, or another normalizer or pre-tokenizer) are
loaded whole at once. A test compares both on every section of the test corpora.

Parsing ``tokenizer.json`` (its vocabulary: a dict of ~30,000 pieces) costs ~7 ms a tokenizer,
and a search loads two. So the vocabulary is kept, the first time a file is read, in the
per-user cache as a :class:`SortedVocab` (``marshal``: one string of the pieces in order, their
offsets and ids), with the file's other settings, and looked up there by bisection: read in
under a millisecond, nothing made per piece. A kept table is used while the file has the
size and modification time it was made from; otherwise (missing, unreadable, stale) the file
is parsed and the table written again (a temporary file renamed); where the cache cannot be
written, the parsed file is used as it is.

A text of printable ASCII alone (spaces, tabs and line breaks aside) that holds no added token
(``[SEP]``, ``<pad>``...) is tokenized here without the library (``_PlainWordPiece``): on such
text BERT's normalizer only lowercases, its pre-tokenizer splits at whitespace and isolates
each ASCII punctuation mark, and WordPiece takes the longest piece at each position, all of
which is a few lines of Python; the library (its import and a partial tokenizer for each,
~8 ms of a one-shot search) is loaded for the first text that is not such text, or that a
setting would truncate or pad. The test compares both on the same texts.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import marshal
import os
import re
import threading
from array import array
from collections.abc import Sequence
from itertools import accumulate
from pathlib import Path
from string import punctuation
from typing import TYPE_CHECKING, Any

from tui_search.core.cache_dir import user_cache_dir

if TYPE_CHECKING:
    from tokenizers import Encoding, Tokenizer

#: How many characters a process tokenizes with partial tokenizers before it loads the whole
#: one: a one-shot search's question, a few dozen, tokenized three times; a process that
#: searches on (the app, the agent server) or encodes sections soon loads the whole one, and
#: no longer makes a partial tokenizer for each new word.
QUICK_CHARS = 1_000
_QUICK_PARTS = {
    "normalizer": {"BertNormalizer"},
    "pre_tokenizer": {"BertPreTokenizer"},
}


#: The layout of a kept vocabulary table (``SortedVocab``); a file of another is made again.
TABLE_LAYOUT = "1"


class SortedVocab:
    """A vocabulary (piece -> id) as one string of its pieces in sorted order, the offset
    where each starts and their ids (``array`` buffers, read as they are): ``get`` bisects."""

    def __init__(self, text: str, starts: bytes, ids: bytes) -> None:
        self._text = text
        self._starts = memoryview(starts).cast("I")
        self._ids = memoryview(ids).cast("I")
        if len(self._starts) != len(self._ids) + 1 or self._starts[-1] != len(text):
            raise ValueError("inconsistent vocabulary table")

    @classmethod
    def of(cls, vocab: dict[str, int]) -> SortedVocab:
        pieces = sorted(vocab)
        starts = array("I", accumulate((len(p) for p in pieces), initial=0))
        ids = array("I", (vocab[p] for p in pieces))
        return cls("".join(pieces), starts.tobytes(), ids.tobytes())

    def parts(self) -> tuple[str, bytes, bytes]:
        return self._text, self._starts.tobytes(), self._ids.tobytes()

    def __len__(self) -> int:
        return len(self._ids)

    def get(self, piece: str) -> int | None:
        text, starts = self._text, self._starts
        lo, hi = 0, len(self._ids)
        while lo < hi:
            mid = (lo + hi) // 2
            if text[starts[mid] : starts[mid + 1]] < piece:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(self._ids) and text[starts[lo] : starts[lo + 1]] == piece:
            return int(self._ids[lo])
        return None

    def __contains__(self, piece: object) -> bool:
        return isinstance(piece, str) and self.get(piece) is not None


def table_file(path: Path, cache_dir: Path) -> Path:
    """Where the vocabulary table of the tokenizer file ``path`` is kept (one per file)."""
    key = hashlib.sha256(str(path.resolve()).encode("utf-8", "surrogateescape")).hexdigest()
    return cache_dir / "tokenizers" / f"vocab-{key[:16]}.marshal"


def _stamp(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


def _read_table(path: Path, cache_dir: Path) -> tuple[dict[str, Any], SortedVocab] | None:
    """The kept settings and vocabulary of ``path``, when a table made from the file as it
    is now is kept; else None."""
    try:
        stamp = _stamp(path)
        with open(table_file(path, cache_dir), "rb") as f:
            layout, size, mtime_ns, spec, text, starts, ids = marshal.loads(f.read())
        if (layout, (size, mtime_ns)) != (TABLE_LAYOUT, stamp) or not isinstance(spec, dict):
            return None
        return spec, SortedVocab(text, starts, ids)
    except (OSError, ValueError, EOFError, TypeError):
        return None  # missing, unreadable or made by something else: parsed again


def _write_table(
    path: Path, cache_dir: Path, stamp: tuple[int, int], spec: dict[str, Any], vocab: SortedVocab
) -> None:
    """Keep ``vocab`` and ``spec`` (the file's settings without its vocabulary) for ``path``,
    whole or not at all; nothing when the cache cannot be written."""
    target = table_file(path, cache_dir)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(marshal.dumps((TABLE_LAYOUT, *stamp, spec, *vocab.parts())))
        os.replace(tmp, target)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()


def _pads(padding: Any) -> bool:
    """Whether a ``tokenizer.json``'s padding could add tokens to a text (not when off, or
    padding to a fixed length of 0)."""
    if padding is None:
        return False
    strategy = padding.get("strategy") if isinstance(padding, dict) else None
    return not (isinstance(strategy, dict) and strategy.get("Fixed") == 0)


def _punctuation_ends(token: str) -> bool:
    """Whether ``token`` begins and ends with ASCII punctuation (where BERT's pre-tokenizer
    splits whatever is around it)."""
    return len(token) >= 2 and token[0] in punctuation and token[-1] in punctuation


#: Text the plain path tokenizes: printable ASCII, spaces, tabs and line breaks.
_PLAIN_TEXT = re.compile(r"[ -~\t\n\r]*\Z")
_SPLIT_WORDS = re.compile(r"[A-Za-z0-9]+|[!-/:-@\[-`{-~]")


class PlainEncoding:
    """What the plain path gives for a text: ``ids`` and ``offsets``, as an ``Encoding``'s."""

    __slots__ = ("ids", "offsets")

    def __init__(self, ids: list[int], offsets: list[tuple[int, int]]) -> None:
        self.ids = ids
        self.offsets = offsets


class _PlainWordPiece:
    """BERT's normalizer, pre-tokenizer and WordPiece over a text of printable ASCII alone,
    with a single text's post-processing template: the library's ids and offsets for it."""

    def __init__(self, spec: dict[str, Any], vocab: SortedVocab, added: dict[str, int]) -> None:
        model = spec["model"]
        self._vocab = vocab
        self._lower = bool(spec["normalizer"].get("lowercase", True))
        self._prefix = str(model.get("continuing_subword_prefix") or "")
        self._max_chars = int(model.get("max_input_chars_per_word") or 100)
        unk = model.get("unk_token")
        self._unk = vocab.get(unk) if isinstance(unk, str) else None
        self._added = [t.lower() for t in added]
        self._template = self._template_of(spec.get("post_processor"))
        self._cache: dict[str, list[tuple[int, int, int]]] = {}

    @staticmethod
    def _template_of(post: Any) -> list[int | None] | None:
        """A single text's template: the special tokens' ids around the text (None where
        the text goes); [] without a post-processor; None for any other post-processor."""
        if post is None:
            return []
        if not isinstance(post, dict) or post.get("type") != "TemplateProcessing":
            return None
        out: list[int | None] = []
        specials = post.get("special_tokens") or {}
        for item in post.get("single") or []:
            if "Sequence" in item and item["Sequence"].get("id") == "A":
                out.append(None)
            elif "SpecialToken" in item:
                ids = specials.get(item["SpecialToken"].get("id"), {}).get("ids")
                if not isinstance(ids, list) or len(ids) != 1:
                    return None
                out.append(int(ids[0]))
            else:
                return None
        return out if out.count(None) == 1 else None

    def encode(self, text: str, special: bool) -> PlainEncoding | None:
        """The text's encoding, or None when this path does not tokenize it."""
        if self._unk is None or not _PLAIN_TEXT.match(text):
            return None
        if self._added and any(t in text.lower() for t in self._added):
            return None
        template = self._template if special else []
        if template is None:
            return None
        norm = text.lower() if self._lower else text
        ids: list[int] = []
        offsets: list[tuple[int, int]] = []
        for m in _SPLIT_WORDS.finditer(norm):
            at = m.start()
            for tid, a, b in self._word(m.group()):
                ids.append(tid)
                offsets.append((at + a, at + b))
        if template:
            i = template.index(None)
            ids = [t for t in template[:i] if t is not None] + ids
            ids += [t for t in template[i + 1 :] if t is not None]
            offsets = [(0, 0)] * i + offsets + [(0, 0)] * (len(template) - i - 1)
        return PlainEncoding(ids, offsets)

    def _word(self, word: str) -> list[tuple[int, int, int]]:
        """WordPiece over one word: (id, start, end) of each piece, the longest at each
        position; the unknown token for the whole word when some position has none."""
        found = self._cache.get(word)
        if found is not None:
            return found
        n = len(word)
        unk = [(self._unk or 0, 0, n)]
        pieces: list[tuple[int, int, int]] = []
        if n > self._max_chars:
            pieces = unk
        start = 0
        while start < n and pieces is not unk:
            lead = self._prefix if start else ""
            for end in range(n, start, -1):
                tid = self._vocab.get(lead + word[start:end])
                if tid is not None:
                    pieces.append((tid, start, end))
                    start = end
                    break
            else:
                pieces = unk
        self._cache[word] = pieces
        return pieces


class QuickTokenizer:
    """The tokenizer of a ``tokenizer.json``: ``encode`` and ``encode_batch_fast`` as
    ``tokenizers.Tokenizer``'s, and its settings (``truncation``, ``padding``, the
    ``enable_``/``no_`` methods, ``pre_tokenizer``, ``normalizer``, ``model``'s settings,
    ``token_to_id``, ``get_vocab_size``); any other attribute is the whole tokenizer's."""

    def __init__(self, path: Path, cache_dir: Path | None = None) -> None:
        """The tokenizer of ``path``; its vocabulary table is kept under ``cache_dir`` (by
        default the per-user cache)."""
        self._path = path
        self._lock = threading.RLock()
        self._full: Tokenizer | None = None
        self._part: Tokenizer | None = None
        self._shell_made: Tokenizer | None = None
        self._plain: _PlainWordPiece | None = None
        self._settings: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self._used = 0
        cache_dir = user_cache_dir() if cache_dir is None else cache_dir
        kept = _read_table(path, cache_dir)
        if kept is not None:
            spec, vocab = kept
            model: Any = spec["model"]
        else:
            stamp = _stamp(path)
            text = path.read_text(encoding="utf-8")
            spec = json.loads(text)
            model = spec.get("model") if isinstance(spec, dict) else None
            quick = (
                isinstance(model, dict)
                and model.get("type") == "WordPiece"
                and isinstance(model.get("vocab"), dict)
                and all(
                    isinstance(spec.get(part), dict) and spec[part].get("type") in kinds
                    for part, kinds in _QUICK_PARTS.items()
                )
                and all(_punctuation_ends(str(t.get("content", ""))) for t in spec["added_tokens"])
            )
            if not quick:
                from tokenizers import Tokenizer

                self._file = (
                    {k: v for k, v in spec.items() if k != "model"}
                    if isinstance(spec, dict)
                    else {}
                )
                if isinstance(model, dict):
                    self._file["model"] = {k: v for k, v in model.items() if k != "vocab"}
                self._full = Tokenizer.from_str(text)
                self._shell_made = self._full
                return
            vocab = SortedVocab.of(model["vocab"])
            model = {**model, "vocab": {}}
            spec = {**spec, "model": model}
            _write_table(path, cache_dir, stamp, spec, vocab)
        self._vocab = vocab
        self._prefix = str(model.get("continuing_subword_prefix") or "")
        self._max_chars = int(model.get("max_input_chars_per_word") or 100)
        self._added = {str(t["content"]): int(t["id"]) for t in spec.get("added_tokens") or []}
        always: dict[str, int] = {}
        for token in [*self._added, model.get("unk_token")]:
            found = vocab.get(token) if isinstance(token, str) else None
            if found is not None:
                always[token] = found
        self._spec: dict[str, Any] = spec
        self._file = spec
        self._model_spec: dict[str, Any] = model
        self._pieces: dict[str, int] = dict(always)
        self._seen: set[str] = set()
        self._plain = _PlainWordPiece(spec, vocab, self._added)
        # what the plain path must leave to the library: a length past which the file's or a
        # later setting truncates, and whether padding could add tokens
        truncation = spec.get("truncation")
        self._truncate_at: int | None = (
            int(truncation["max_length"]) if isinstance(truncation, dict) else None
        )
        self._pads = _pads(spec.get("padding"))

    @property
    def _shell(self) -> Tokenizer:
        """A library tokenizer with the file's and the later settings (partial: the pieces
        found so far), made when first needed."""
        with self._lock:
            if self._shell_made is None:
                self._shell_made = self._partial()
            return self._shell_made

    def file_setting(self, name: str) -> Any:
        """The file's own setting ``name`` as its JSON has it (``truncation``, ``padding``,
        ``pre_tokenizer``, ``normalizer``; ``model`` without its vocabulary), whatever was
        set since: read without loading the library."""
        return self._file.get(name)

    # -- settings, kept on every tokenizer made -------------------------------------------
    def _apply(self, name: str, *args: Any, **kwargs: Any) -> None:
        with self._lock:
            self._settings.append((name, args, kwargs))
            made = (self._shell_made, self._full, self._part)
            for tok in {id(t): t for t in made if t}.values():
                getattr(tok, name)(*args, **kwargs)
            if name == "enable_truncation":
                self._truncate_at = int(args[0] if args else kwargs["max_length"])
            elif name == "no_truncation":
                self._truncate_at = None
            elif name == "enable_padding":
                length = kwargs.get("length", args[4] if len(args) > 4 else None)
                multiple = kwargs.get("pad_to_multiple_of", args[5] if len(args) > 5 else None)
                self._pads = length != 0 or bool(multiple)
            elif name == "no_padding":
                self._pads = False

    def enable_truncation(self, *args: Any, **kwargs: Any) -> None:
        self._apply("enable_truncation", *args, **kwargs)

    def no_truncation(self) -> None:
        self._apply("no_truncation")

    def enable_padding(self, *args: Any, **kwargs: Any) -> None:
        self._apply("enable_padding", *args, **kwargs)

    def no_padding(self) -> None:
        self._apply("no_padding")

    @property
    def truncation(self) -> Any:
        return self._shell.truncation

    @property
    def padding(self) -> Any:
        return self._shell.padding

    @property
    def pre_tokenizer(self) -> Any:
        return self._shell.pre_tokenizer

    @property
    def normalizer(self) -> Any:
        return self._shell.normalizer

    @property
    def model(self) -> Any:
        """The model's settings (``unk_token``, ...); its vocabulary may be partial."""
        return self._shell.model

    def token_to_id(self, token: str) -> int | None:
        if self._full is not None:
            return self._full.token_to_id(token)
        return self._added.get(token, self._vocab.get(token))

    def get_vocab_size(self, with_added_tokens: bool = True) -> int:
        if self._full is not None:
            return int(self._full.get_vocab_size(with_added_tokens))
        added = sum(t not in self._vocab for t in self._added) if with_added_tokens else 0
        return len(self._vocab) + added

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)  # (copy and pickle probe for these before __init__)
        return getattr(self.whole(), name)

    # -- tokenizing -----------------------------------------------------------------------
    def whole(self) -> Tokenizer:
        """The whole tokenizer (loaded at the first call), with the settings made so far."""
        from tokenizers import Tokenizer

        with self._lock:
            if self._full is None:
                full = Tokenizer.from_file(str(self._path))
                for name, args, kwargs in self._settings:
                    getattr(full, name)(*args, **kwargs)
                self._full = full
            return self._full

    def encode(self, text: str, add_special_tokens: bool = True) -> Encoding | PlainEncoding:
        plain = self._plain_encodings([text], add_special_tokens)
        if plain is not None:
            return plain[0]
        return self._for([text]).encode(text, add_special_tokens=add_special_tokens)

    def encode_batch_fast(
        self, texts: Sequence[str], add_special_tokens: bool = True
    ) -> list[Encoding | PlainEncoding]:
        plain = self._plain_encodings(texts, add_special_tokens)
        if plain is not None:  # (the library's fast batch leaves the offsets out: (0, 0))
            return [PlainEncoding(e.ids, [(0, 0)] * len(e.ids)) for e in plain]
        tok = self._for(texts)
        return [*tok.encode_batch_fast(list(texts), add_special_tokens=add_special_tokens)]

    def _plain_encodings(self, texts: Sequence[str], special: bool) -> list[PlainEncoding] | None:
        """The texts' encodings by the plain path (``_PlainWordPiece``), or None when any
        is not for it: not plain text, truncated or padded by a setting, or past the
        characters a process tokenizes in part."""
        with self._lock:
            plain = self._plain
            if plain is None or self._full is not None or self._pads:
                return None
            if self._used + sum(len(t) for t in texts) > QUICK_CHARS:
                return None
            out: list[PlainEncoding] = []
            for text in texts:
                enc = plain.encode(text, special)
                limit = self._truncate_at
                if enc is None or (limit is not None and len(enc.ids) > limit):
                    return None
                out.append(enc)
            self._used += sum(len(t) for t in texts)
            return out

    def _for(self, texts: Sequence[str]) -> Tokenizer:
        """A tokenizer that gives ``texts`` the whole tokenizer's ids and offsets."""
        with self._lock:
            if self._full is not None:
                return self._full
            self._used += sum(len(t) for t in texts)
            if self._used > QUICK_CHARS:
                return self.whole()
            grown = False
            for text in texts:
                for word in self._words(text):
                    if word not in self._seen:
                        self._seen.add(word)
                        grown |= self._add_pieces(word)
            if grown or self._part is None:
                self._part = self._partial()
            return self._part

    def _words(self, text: str) -> list[str]:
        normalized = self._shell.normalizer.normalize_str(text)
        return [w for w, _ in self._shell.pre_tokenizer.pre_tokenize_str(normalized)]

    def _add_pieces(self, word: str) -> bool:
        """Add the vocabulary's pieces among ``word``'s substrings; whether any was new."""
        if len(word) > self._max_chars:
            return False  # the unknown token, whatever the vocabulary
        vocab, pieces, before = self._vocab, self._pieces, len(self._pieces)
        for start in range(len(word)):
            lead = self._prefix if start else ""
            for end in range(start + 1, len(word) + 1):
                piece = lead + word[start:end]
                found = vocab.get(piece)
                if found is not None:
                    pieces[piece] = found
        return len(pieces) > before

    def _partial(self) -> Tokenizer:
        """A tokenizer of the file with the vocabulary pieces found so far, and the settings."""
        from tokenizers import Tokenizer

        spec = {**self._spec, "model": {**self._model_spec, "vocab": self._pieces}}
        tok = Tokenizer.from_str(json.dumps(spec))
        for name, args, kwargs in self._settings:
            getattr(tok, name)(*args, **kwargs)
        return tok
