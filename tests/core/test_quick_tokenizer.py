"""``core.quick_tokenizer``: the partial tokenizers give every text the whole tokenizer's ids
and offsets (both shipped tokenizers; the repository's markdown, the test data's questions
and texts, hard cases), whether the vocabulary comes from the file or from the table kept in
the cache; the settings hold on both, a process that tokenizes much loads the whole
tokenizer, and a kept table is made again when it no longer fits the file."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, models, pre_tokenizers

from tui_search.core import quick_tokenizer
from tui_search.core.quick_tokenizer import QuickTokenizer, SortedVocab, table_file

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "tui_search" / "models"
DATA = ROOT / "tests" / "data"
HARD = [
    "how do I link to a heading",
    "[SEP] x[CLS]y <pad> a<pad>b [UNK]z [MASK]",
    "Café naïve Ångström ﬁ ß İstanbul Ｆｕｌｌｗｉｄｔｈ",
    "数据库备份 and 東京タワー 한국어",
    "😀 emoji \x00 control \u200b zero width \ufffd",
    "a" * 99,
    "b" * 100,
    "c" * 101,
    "x" + "é" * 150,
    "##ing ## # unaffable",
    "don't can't e.g. i.e. U.S.A. getUserById snake_case a.b.c",
    "\t\n  \r",
    "",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "COVID-19 R&D 3.14159 1,000,000 $HOME ~/.ssh/authorized_keys",
]


def _texts() -> list[str]:
    out = list(HARD)
    out += json.loads((DATA / "rerank_reference.json").read_text(encoding="utf-8"))["texts"]
    for queries in sorted(DATA.rglob("queries.jsonl")):
        out += [json.loads(line)["text"] for line in queries.read_text("utf-8").splitlines()]
    for path in sorted([*DATA.rglob("*.md"), *(ROOT / "docs").glob("*.md"), ROOT / "README.md"]):
        text = path.read_text(encoding="utf-8", errors="replace")
        out += [text[i : i + 700] for i in range(0, len(text), 700)]
    return out


@pytest.mark.parametrize("kept", [False, True], ids=["parsed", "kept"])
@pytest.mark.parametrize("model", ["default", "reranker"])
def test_partial_tokenizers_give_the_whole_ones_ids_and_offsets(
    model: str, kept: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(quick_tokenizer, "QUICK_CHARS", 10**12)  # never the whole one
    path = MODELS / model / "tokenizer.json"
    whole = Tokenizer.from_file(str(path))
    if kept:
        QuickTokenizer(path)  # parses the file, keeps the table
        # (the file is not parsed again)
        monkeypatch.setattr(quick_tokenizer, "json", SimpleNamespace(dumps=json.dumps))
    quick = QuickTokenizer(path)
    for tok in (whole, quick):
        tok.enable_truncation(128)
    texts = _texts()
    assert len(texts) > 200
    for text in texts:
        for special in (True, False):
            want = whole.encode(text, add_special_tokens=special)
            got = quick.encode(text, add_special_tokens=special)
            assert (got.ids, got.offsets) == (want.ids, want.offsets), text
    batch = texts[:40]
    assert [e.ids for e in quick.encode_batch_fast(batch, add_special_tokens=False)] == [
        e.ids for e in whole.encode_batch_fast(batch, add_special_tokens=False)
    ]
    assert quick._full is None  # all of it from partial tokenizers
    assert len(quick._pieces) < whole.get_vocab_size() / 2
    assert quick.get_vocab_size() == whole.get_vocab_size()
    assert quick.truncation == whole.truncation and quick.padding == whole.padding
    unk = whole.model.unk_token
    assert quick.model.unk_token == unk and quick.token_to_id(unk) == whole.token_to_id(unk)


def test_settings_hold_on_the_whole_tokenizer_loaded_later(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(quick_tokenizer, "QUICK_CHARS", 50)
    path = MODELS / "reranker" / "tokenizer.json"
    whole = Tokenizer.from_file(str(path))
    whole.enable_truncation(8)
    whole.no_padding()
    quick = QuickTokenizer(path)
    quick.enable_truncation(8)
    quick.no_padding()
    short = "how do I link to a heading"
    assert quick.encode(short).ids == whole.encode(short).ids
    assert quick._full is None
    long = "a long text about notes and links and headings and vaults " * 3
    assert quick.encode(long).ids == whole.encode(long).ids
    assert quick._full is not None and len(quick.encode(long).ids) == 8


def test_a_tokenizer_that_is_not_wordpiece_is_loaded_whole(tmp_path: Path) -> None:
    tok = Tokenizer(models.WordLevel({"[UNK]": 0, "notes": 1, "links": 2}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    quick = QuickTokenizer(path)
    assert quick._full is not None
    assert quick.encode("notes and links").ids == [1, 0, 2]


def test_a_garbled_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_text("{not json")
    with pytest.raises(ValueError):
        QuickTokenizer(path)
    spec = json.loads((MODELS / "default" / "tokenizer.json").read_text())
    assert spec["model"]["type"] == "WordPiece"  # (the shipped ones take the partial path)


def test_the_sorted_vocabulary_finds_every_piece_and_nothing_else() -> None:
    vocab = json.loads((MODELS / "reranker" / "tokenizer.json").read_text())["model"]["vocab"]
    table = SortedVocab.of(vocab)
    assert len(table) == len(vocab)
    assert all(table.get(piece) == i for piece, i in vocab.items())
    for miss in ("", "zzzzzz", "##", "\uffff", "[sep]", "a" * 200):
        assert (table.get(miss), miss in table) == (vocab.get(miss), miss in vocab)
    assert SortedVocab.of({}).get("a") is None


def test_a_table_that_no_longer_fits_its_file_is_made_again(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    text = (MODELS / "default" / "tokenizer.json").read_text()
    path.write_text(text)
    cache = tmp_path / "cache"
    question = "list open network ports"
    want = Tokenizer.from_file(str(path)).encode(question).ids
    assert QuickTokenizer(path, cache).encode(question).ids == want
    kept = table_file(path, cache)
    made = kept.stat().st_mtime_ns
    # a changed file (another id for "network"): its table is made again
    spec = json.loads(text)
    vocab = spec["model"]["vocab"]
    vocab["network"], vocab["##s"] = vocab["##s"], vocab["network"]
    path.write_text(json.dumps(spec))
    want = Tokenizer.from_file(str(path)).encode(question).ids
    assert QuickTokenizer(path, cache).encode(question).ids == want
    assert kept.stat().st_mtime_ns != made
    # an unreadable table: the file is parsed, the table written again
    kept.write_bytes(b"garbage")
    assert QuickTokenizer(path, cache).encode(question).ids == want
    assert kept.read_bytes() != b"garbage"
    # a cache that cannot be written: the file is used as it is
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder would be")
    assert QuickTokenizer(path, blocked).encode(question).ids == want


PLAIN_HARD = [
    "how do I link to a heading",
    "HOW Do i LINK to A heading?!",
    "copy my public key to a remote server",
    "~/.ssh/authorized_keys user@host:22 -p 2222 --port=22",
    "getUserById snake_case CamelCase a.b.c 3.14159 1,000,000 x86_64 i18n",
    "don't can't e.g. i.e. U.S.A. (parens) [brackets] {braces} <angle> `tick`",
    "[sep] [cls] <PAD> [unk] [mask]",  # an added token's name in another case: plain words
    "a" * 99 + " " + "b" * 100 + " " + "c" * 101,
    "qzxqzxqzxqzx zzzzzzzzzzzzzzzzzzzzzzzzzzzz xkcd",
    "##ing ## # unaffable",
    "tabs\tand\nnewlines\r\nand   runs   of  spaces  ",
    "!!!---???",
    "",
    " ",
    "word " * 200,  # past the truncation: the library's
]


@pytest.mark.parametrize("model", ["default", "reranker"])
def test_plain_text_is_tokenized_without_the_library_as_the_library_does(
    model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Printable ASCII text is tokenized by ``_PlainWordPiece`` (no library tokenizer made):
    the same ids and offsets as the whole tokenizer, with and without special tokens, on the
    test data's questions, every plain chunk of the repository's markdown and hard cases; a
    text that is not plain, or that truncation cuts, goes to the library."""
    monkeypatch.setattr(quick_tokenizer, "QUICK_CHARS", 10**12)
    path = MODELS / model / "tokenizer.json"
    whole = Tokenizer.from_file(str(path))
    quick = QuickTokenizer(path)
    for tok in (whole, quick):
        tok.enable_truncation(128)
        if model == "reranker":
            tok.no_padding()  # (as the re-ranker does)
    plain = [t for t in [*PLAIN_HARD, *_texts()] if quick_tokenizer._PLAIN_TEXT.match(t)]
    assert len(plain) > 150
    went_plain = 0
    for text in plain:
        for special in (True, False):
            want = whole.encode(text, add_special_tokens=special)
            ours = quick._plain.encode(text, special) if quick._plain else None
            if ours is not None and len(ours.ids) <= 128:
                went_plain += 1
                assert (ours.ids, ours.offsets) == (want.ids, want.offsets), text
            got = quick.encode(text, add_special_tokens=special)
            assert (got.ids, got.offsets) == (want.ids, want.offsets), text
    assert went_plain > 100
    short = [t for t in plain if len(t) < 300][:40]
    for special in (True, False):
        assert [e.ids for e in quick.encode_batch_fast(short, add_special_tokens=special)] == [
            e.ids for e in whole.encode_batch_fast(short, add_special_tokens=special)
        ]


def test_plain_questions_load_no_library_tokenizer() -> None:
    """A one-shot search's plain question: neither the static model's tokenizer nor the
    re-ranker's makes a library tokenizer, nor reads its settings from one."""
    for model in ("default", "reranker"):
        quick = QuickTokenizer(MODELS / model / "tokenizer.json")
        quick.enable_truncation(128)
        quick.no_padding()
        ids = quick.encode("how do I link to a heading?").ids
        assert ids and quick._shell_made is None and quick._part is None and quick._full is None
        assert quick.file_setting("pre_tokenizer") == {"type": "BertPreTokenizer"}
        quick.encode("Ångström")  # not plain: the library's partial tokenizer
        assert quick._part is not None and quick._full is None


_WHOLE: dict[str, Tokenizer] = {}
_QUICK: dict[str, QuickTokenizer] = {}

# printable ASCII, whitespace, and pieces that stress WordPiece (subwords, "##", long runs)
_PLAIN_ALPHABET = st.sampled_from(
    [chr(c) for c in range(32, 127)] + ["\t", "\n", "\r", "##", "ing", "un", "able", "a" * 40]
)


@pytest.mark.parametrize("model", ["default", "reranker"])
@settings(max_examples=300, deadline=None)
@given(text=st.lists(_PLAIN_ALPHABET, max_size=60).map("".join))
def test_any_plain_text_is_tokenized_as_the_library_does(model: str, text: str) -> None:
    """Whatever printable ASCII text: the plain path, where it takes the text, gives the
    library's ids and offsets, with and without special tokens."""
    if model not in _WHOLE:
        path = MODELS / model / "tokenizer.json"
        _WHOLE[model] = Tokenizer.from_file(str(path))
        _QUICK[model] = QuickTokenizer(path)
        for tok in (_WHOLE[model], _QUICK[model]):
            tok.enable_truncation(128)
            tok.no_padding()
    whole, quick = _WHOLE[model], _QUICK[model]
    assert quick._plain is not None
    for special in (True, False):
        ours = quick._plain.encode(text, special)
        want = whole.encode(text, add_special_tokens=special)
        if ours is not None and len(ours.ids) <= 128:
            assert (ours.ids, ours.offsets) == (want.ids, want.offsets)
