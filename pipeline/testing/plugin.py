"""The pytest plugin for soul authors (entry point `pytest11`: `soul = "soul.testing.plugin"`).

Fixtures:
- `soul_conversation(blueprint, messages, *, replies=None, cassette=None, user="user",
  model=None)` runs a scripted conversation in a fresh session under the test's temporary
  data home and returns its `Transcript` (`soul.testing`). A relative cassette path is taken
  from the test file's folder. With `pytest --soul-record` the cassette is (re)written from
  `replies`, or from the live models the blueprint names when no replies are given; without
  it the cassette is replayed and `replies` are not used.
- `soul_snapshot`: syrupy's `snapshot` with `SoulSnapshotExtension` — readable `.md` files.

Set `SOUL_REPLAY=strict` in CI so that any call to a live model is an error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # soul.testing loads the runtime; only tests that use the fixtures pay for it
    from soul.testing.kit import Transcript


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("soul", "soul: testing souls")
    group.addoption(
        "--soul-record", action="store_true", default=False,
        help="write the cassettes of soul_conversation calls (from their replies, or live models) instead of replaying them",
    )


@pytest.fixture
def soul_conversation(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., Transcript]:
    """Run a scripted conversation with a soul; returns its Transcript."""
    record = bool(request.config.getoption("soul_record", default=False))
    here = Path(str(request.path)).parent
    count = 0

    def run(
        blueprint: str | Path,
        messages: Sequence[str],
        *,
        replies: Sequence[str] | None = None,
        cassette: str | Path | None = None,
        user: str = "user",
        model: str | None = None,
    ) -> Transcript:
        from soul.testing.kit import converse

        nonlocal count
        count += 1
        home = tmp_path / f"soul-home-{count}"
        target = blueprint
        if isinstance(blueprint, Path) or "/" in str(blueprint) or str(blueprint).endswith((".yaml", ".yml")):
            target = Path(blueprint) if Path(blueprint).is_absolute() else here / blueprint
        if cassette is None:
            return converse(target, messages, replies=replies, user=user, home=home, model=model)
        path = Path(cassette) if Path(cassette).is_absolute() else here / cassette
        if record:
            return converse(target, messages, replies=replies, cassette=path, record=True, user=user, home=home, model=model)
        if not path.exists():
            pytest.fail(f"cassette {path} does not exist — record it with `pytest --soul-record`", pytrace=False)
        return converse(target, messages, cassette=path, user=user, home=home, model=model)

    return run


@pytest.fixture
def soul_snapshot(request: pytest.FixtureRequest) -> Any:
    """syrupy's snapshot, writing soul transcripts as readable Markdown files."""
    try:
        snapshot = request.getfixturevalue("snapshot")
    except pytest.FixtureLookupError:
        pytest.fail("soul_snapshot needs syrupy — pip install syrupy", pytrace=False)
    from soul.testing.extension import SoulSnapshotExtension

    return snapshot.use_extension(SoulSnapshotExtension)
