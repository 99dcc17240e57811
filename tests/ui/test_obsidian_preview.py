"""Obsidian's markdown in the preview: callouts as titled boxes, note embeds as the embedded
section's text (one level deep), images and attachments as a line."""

from __future__ import annotations

from pathlib import Path

import pytest
from apphelpers import AppFactory, ready, search, settle, write_workspace

from tui_search.ui.render import Embedded, obsidian_blocks, render_preview

pytestmark = pytest.mark.anyio

NOTE = """\
# Embeds

> [!tip]- Drag and drop
> Drag a **note** into the editor to embed it.

```markdown
![[Not an embed, a code example]]
> [!note] nor a callout
```

![[Other#Part]]

![[shot.png]]

![450](https://example.org/a/diagram.png)
"""


def test_blocks_are_found_outside_code() -> None:
    kinds = [b[0] for b in obsidian_blocks(NOTE)]
    assert kinds == ["md", "callout", "md", "embed", "image", "image"]
    callout = obsidian_blocks(NOTE)[1]
    assert callout[1:4] == ("tip", "-", "Drag and drop")
    assert [b[1] for b in obsidian_blocks(NOTE) if b[0] == "image"] == ["shot.png", "diagram.png"]


def test_rendered_lines() -> None:
    asked: list[tuple[str, str]] = []

    def embed(target: str, anchor: str) -> Embedded | None:
        asked.append((target, anchor))
        return Embedded(f"{target}.md#{anchor}", "The embedded part.\n\n![[Deeper]]")

    lines = [s.text for s in render_preview(NOTE, file_path="n.md", width=60, embed=embed).lines]
    text = "\n".join(lines)
    assert asked == [("Other", "Part")]
    assert "╭─ ▸ Drag and drop (folded)" in text and "[!tip]" not in text
    assert "Drag a note into the editor to embed it." in text
    assert "╭─ ⤷ Other.md#Part" in text and "The embedded part." in text
    assert "⤷ Deeper" in text  # an embed inside an embed: one level is shown
    assert "▣ shot.png" in text and "▣ diagram.png" in text
    assert "![[Not an embed, a code example]]" in text  # code stays code


async def test_the_preview_shows_an_embedded_section(
    tmp_path: Path, app_factory: AppFactory
) -> None:
    ws = write_workspace(
        tmp_path / "vault",
        {
            "Embed files.md": "# Embed files\n\nThe sourdough steps:\n\n![[Recipe#Steps]]\n",
            "Recipe.md": "# Recipe\n\nIntro.\n\n## Steps\n\nFeed the starter twice.\n\n"
            "## Notes\n\nNot embedded.\n",
        },
    )
    app = app_factory(ws)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await search(pilot, "sourdough steps")
        await settle(pilot)
        assert app.search_screen.results.current.file_path == "Embed files.md"
        text = "\n".join(app.search_screen.preview.text_lines)
    assert "⤷ Recipe.md#Steps" in text and "Feed the starter twice." in text
    assert "Not embedded." not in text
