"""A syrupy extension for soul transcripts: one readable Markdown file per snapshot.

    def test_greeting(soul_conversation, soul_snapshot):
        assert soul_conversation("my_soul.yaml", ["Hi"], replies=[...]) == soul_snapshot

The file holds every turn's rendered prompts, raw replies, parsed steps, state changes and
user-model diff (`Transcript.render`), with no timestamps, ids or timings, so it is stable
across runs and a reviewer can read what changed in a pull request.
"""

from __future__ import annotations

from typing import Any

from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode


class SoulSnapshotExtension(SingleFileSnapshotExtension):
    """Snapshots of `Transcript` / `TurnRecord` objects (or plain text) as `.md` files."""

    file_extension = "md"
    _file_extension = "md"  # the attribute's name before syrupy 5
    _write_mode = WriteMode.TEXT

    def serialize(self, data: Any, **kwargs: Any) -> Any:
        render = getattr(data, "render", None)
        text = render() if callable(render) else str(data)
        return super().serialize(text if text.endswith("\n") else text + "\n", **kwargs)
