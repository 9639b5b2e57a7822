"""SDKs load only when a spec names them: `soul validate` and `soul run --script` never pay."""

from __future__ import annotations

import subprocess
import sys

SDKS = ("anthropic", "openai", "litellm", "httpx", "httpx2")


def loaded_after(code: str) -> list[str]:
    probe = f"import sys\n{code}\nprint(sorted({{m.split('.')[0] for m in sys.modules}} & set({SDKS!r})))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return eval(out.strip().splitlines()[-1])


def test_validate_imports_no_sdk() -> None:
    assert loaded_after("from soul.cli import main; main(['validate', '-q', 'claudius'])") == []


def test_resolving_a_scripted_or_replay_model_imports_no_sdk() -> None:
    assert loaded_after("import soul.providers, soul.providers.replay, soul.testing") == []
