"""Static type check of soul's public surface: mypy over code that uses it as an app would.

    python .ci/typecheck.py [FILE ...]     # default: .ci/public_surface.py

Why not `mypy pipeline/`: the folders are not the import names (`pipeline/` installs as
`soul`, `steps/` as `soul.steps`, ...: pyproject's `[tool.setuptools.package-dir]`), and
mypy maps files to modules by path, so it would check `pipeline.runtime` instead of
`soul.runtime` and find no `soul` at all. An editable install does not help either: mypy
cannot follow setuptools' import hook. So this lays the packages out under their import
names in a temporary directory — each listed package's modules and `py.typed`, copied from
the folder pyproject maps it to, as a wheel installs them — and runs mypy on FILE with that
directory as MYPYPATH. The settings are pyproject's `[tool.mypy]`: strict on FILE; soul's
own modules are read for their types but their errors are not reported (follow_imports =
silent), so the check is of what the surface promises, not of the code behind it.

Exits with mypy's status (0: no errors). Takes a few seconds (mypy reads the whole package).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / ".ci" / "public_surface.py"
COPIED = ("*.py", "*.pyi", "py.typed")


def folder_of(package: str, package_dir: dict[str, str]) -> Path:
    """The folder setuptools installs `package` from (the longest mapped prefix wins)."""
    parts = package.split(".")
    for cut in range(len(parts), 0, -1):
        prefix = ".".join(parts[:cut])
        if prefix in package_dir:
            return ROOT / package_dir[prefix] / Path(*parts[cut:])
    return ROOT / Path(*parts)


def lay_out(target: Path) -> None:
    """Copy every listed package's modules to `target/<import path>`."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    for package in setuptools["packages"]:
        source = folder_of(package, setuptools["package-dir"])
        destination = target / Path(*package.split("."))
        destination.mkdir(parents=True, exist_ok=True)
        for pattern in COPIED:
            for path in source.glob(pattern):
                shutil.copy2(path, destination / path.name)


def check(files: list[Path]) -> subprocess.CompletedProcess[str]:
    """Run mypy on `files` against the laid-out package; its output and status."""
    with tempfile.TemporaryDirectory(prefix="soul-typecheck-") as tmp:
        tree = Path(tmp) / "site"
        lay_out(tree)
        command = [
            sys.executable, "-m", "mypy",
            "--config-file", str(ROOT / "pyproject.toml"),
            "--cache-dir", str(Path(tmp) / "cache"),
            *map(str, files),
        ]  # fmt: skip
        env = {**os.environ, "MYPYPATH": str(tree)}
        return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)


def main(argv: list[str]) -> int:
    files = [Path(a).resolve() for a in argv] or [SAMPLE]
    result = check(files)
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
