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
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from string import punctuation
from typing import TYPE_CHECKING, Any

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


def _punctuation_ends(token: str) -> bool:
    """Whether ``token`` begins and ends with ASCII punctuation (where BERT's pre-tokenizer
    splits whatever is around it)."""
    return len(token) >= 2 and token[0] in punctuation and token[-1] in punctuation


class QuickTokenizer:
    """The tokenizer of a ``tokenizer.json``: ``encode`` and ``encode_batch_fast`` as
    ``tokenizers.Tokenizer``'s, and its settings (``truncation``, ``padding``, the
    ``enable_``/``no_`` methods, ``pre_tokenizer``, ``normalizer``, ``model``'s settings,
    ``token_to_id``, ``get_vocab_size``); any other attribute is the whole tokenizer's."""

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer

        self._path = path
        text = path.read_text(encoding="utf-8")
        spec = json.loads(text)
        self._lock = threading.RLock()
        self._full: Tokenizer | None = None
        self._part: Tokenizer | None = None
        self._settings: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self._used = 0
        model: Any = spec.get("model") if isinstance(spec, dict) else None
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
            self._full = Tokenizer.from_str(text)
            self._shell = self._full
            return
        self._vocab: dict[str, int] = model["vocab"]
        self._prefix = str(model.get("continuing_subword_prefix") or "")
        self._max_chars = int(model.get("max_input_chars_per_word") or 100)
        self._added = {str(t["content"]): int(t["id"]) for t in spec.get("added_tokens") or []}
        always = {t: self._vocab[t] for t in self._added if t in self._vocab}
        unk = model.get("unk_token")
        if unk in self._vocab:
            always[unk] = self._vocab[unk]
        self._spec: dict[str, Any] = spec
        self._model_spec: dict[str, Any] = model
        self._pieces: dict[str, int] = dict(always)
        self._seen: set[str] = set()
        self._shell = self._partial()
        self._part = self._shell

    # -- settings, kept on every tokenizer made -------------------------------------------
    def _apply(self, name: str, *args: Any, **kwargs: Any) -> None:
        with self._lock:
            self._settings.append((name, args, kwargs))
            for tok in {id(t): t for t in (self._shell, self._full, self._part) if t}.values():
                getattr(tok, name)(*args, **kwargs)

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
        return len(self._vocab.keys() | self._added.keys() if with_added_tokens else self._vocab)

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

    def encode(self, text: str, add_special_tokens: bool = True) -> Encoding:
        return self._for([text]).encode(text, add_special_tokens=add_special_tokens)

    def encode_batch_fast(
        self, texts: Sequence[str], add_special_tokens: bool = True
    ) -> list[Encoding]:
        tok = self._for(texts)
        return list(tok.encode_batch_fast(list(texts), add_special_tokens=add_special_tokens))

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
