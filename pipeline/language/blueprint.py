"""Blueprint: the typed form of a soul's YAML, with the source map of where everything was.

`read()` finds the file (`finding.py`: a path, a folder or a name) and parses it with positions;
`build()` turns the plain data into frozen dataclasses. `build` is tolerant: parts the schema
has already rejected are skipped, so the graph rules can still report on the rest in the same
pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from soul.errors import BlueprintNotFound, BlueprintTooLarge
from soul.language.dialogue import Dialogue, build_dialogue
from soul.language.files import TemplateFiles, confine, read_text
from soul.language.finding import locate
from soul.language.sourcemap import KeyPath, Loaded, SourceMap, load_yaml
from soul.language.tools import (
    McpServerDecl,
    StepTools,
    ToolDecl,
    build_mcp_servers,
    build_step_tools,
    build_tools,
)

MAX_BYTES = 1024 * 1024
DEFAULT_MODEL = "local"
BUILTIN_REGION_ORDER = ("core", "summary", "context", "default")
SUMMARY_SLOT = "cheap"  # the model slot summaries use, by convention, when the blueprint has one

Mode = Literal["fused", "chained"]


@dataclass(frozen=True)
class ModelSlot:
    """A named model: a provider/model string and its options."""

    name: str
    provider: str
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StateVar:
    """A persistent soul-state key with its default."""

    name: str
    type: str
    default: Any
    values: tuple[str, ...] = ()
    description: str = ""


@dataclass(frozen=True)
class Retry:
    attempts: int = 1
    backoff_seconds: float = 0.0


@dataclass(frozen=True)
class Step:
    """One cognitive step as written; `path` is its key path in the blueprint."""

    name: str
    uses: str
    path: KeyPath
    params: dict[str, Any] = field(default_factory=dict)
    after: tuple[str, ...] = ()
    when: str | None = None
    every: int | None = None
    model: str | None = None
    template: str | None = None
    stream: bool = False
    retry: Retry = Retry()
    description: str = ""
    history: dict[str, Any] | None = None  # what of the conversation it sees: turns, share
    tools: StepTools | None = None  # the tools its call may use (language/tools.py)


@dataclass(frozen=True)
class Subprocess:
    name: str
    steps: dict[str, Step]
    when: str | None = None
    every: int | None = None
    description: str = ""


@dataclass(frozen=True)
class Process:
    name: str
    steps: dict[str, Step]
    loop: str = "continuous"
    options: dict[str, Any] = field(default_factory=dict)
    model: str | None = None
    persona: str | None = None
    description: str = ""


@dataclass(frozen=True)
class Trigger:
    name: str
    kind: str
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Blueprint:
    """A soul as written: what `soul validate` checks and `soul.compiler.graph` compiles."""

    name: str
    source: SourceMap
    folder: Path | None
    version: int = 1
    description: str = ""
    persona: str | None = None
    model: str = DEFAULT_MODEL
    models: dict[str, ModelSlot] = field(default_factory=dict)
    mode: Mode = "fused"
    state: dict[str, StateVar] = field(default_factory=dict)
    regions: tuple[str, ...] = BUILTIN_REGION_ORDER
    memory_ttl_hours: float | None = None
    region_limits: dict[str, int] = field(default_factory=dict)  # working_memory.limits
    summary: dict[str, Any] = field(default_factory=dict)  # working_memory.summary: model, max_words
    steps: dict[str, Step] = field(default_factory=dict)
    memory: dict[str, Any] | None = None
    chetana: dict[str, Any] | None = None
    subprocesses: dict[str, Subprocess] = field(default_factory=dict)
    processes: dict[str, Process] = field(default_factory=dict)
    triggers: dict[str, Trigger] = field(default_factory=dict)
    dialogue: dict[str, Any] | None = None
    dialogue_spec: Dialogue | None = None  # the `dialogue:` block, typed (language/dialogue.py)
    tools: dict[str, ToolDecl] = field(default_factory=dict)  # the `tools:` block (language/tools.py)
    mcp: dict[str, McpServerDecl] = field(default_factory=dict)  # its MCP server entries (language/tools.py)
    observer: dict[str, Any] | None = None  # the `observer:` block: Fixy as a gate on replies

    @property
    def file(self) -> str:
        return self.source.file

    def summary_model(self) -> str | None:
        """The slot (or provider/model) that writes the summaries of older turns:
        `working_memory.summary.model`, else a slot named `cheap`; None when the blueprint names
        neither (older turns then fold into a digest: no model call its author did not ask for)."""
        declared = self.summary.get("model")
        if declared:
            return str(declared)
        return SUMMARY_SLOT if SUMMARY_SLOT in self.models else None

    def persona_path(self) -> Path | None:
        return self.folder / self.persona if self.folder and self.persona else None

    def read_file(self, name: str, what: str) -> str:
        """The text of a file the blueprint names (a persona), beside it: raises
        `soul.errors.BlueprintError` (FileRefused) when it resolves outside the blueprint's
        folder, is not a regular UTF-8 file, or is over 1 MiB."""
        if self.folder is None:
            raise BlueprintNotFound(f"{what} '{name}': the blueprint has no folder to find it in")
        return read_text(confine(self.folder, name, what), what, name)

    def persona_text(self) -> str | None:
        """The persona file's text, or None when the blueprint names none."""
        return self.read_file(self.persona, "persona") if self.persona else None

    def template_source(self, name: str) -> str:
        """The text of template `name` as prompts load it (the blueprint's folder, then the
        built-in templates): BlueprintError (FileRefused) when it resolves outside them or is
        over 1 MiB, jinja2.TemplateNotFound when absent."""
        return TemplateFiles(self.folder).get_source(None, name)[0]


def read(name_or_path: str | Path) -> tuple[Loaded, Path]:
    """Locate and parse a blueprint with positions; raises only when it cannot be read at all."""
    path = locate(name_or_path)
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise BlueprintTooLarge(
            f"{path}: {size:,} bytes; a blueprint may be at most {MAX_BYTES:,} bytes (1 MiB) — "
            "move long prompts into template or persona files beside it"
        )
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BlueprintNotFound(f"{path}: not UTF-8 text (byte {exc.start})") from exc
    return load_yaml(text, display_path(path)), path


def display_path(path: Path) -> str:
    """The file name as errors show it: relative to the working directory when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _infer_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "mapping"
    return "string"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _build_step(name: str, raw: Any, path: KeyPath) -> Step | None:
    if not isinstance(raw, dict) or not isinstance(raw.get("uses"), str):
        return None
    after = raw.get("after", ())
    if isinstance(after, str):
        after = (after,)
    after = tuple(a for a in after if isinstance(a, str)) if isinstance(after, list | tuple) else ()
    retry_raw = raw.get("retry", 1)
    if isinstance(retry_raw, dict):
        retry = Retry(
            _int(retry_raw.get("attempts")) or 0,
            float(retry_raw.get("backoff_seconds", 0) or 0),
        )
    else:
        retry = Retry(_int(retry_raw) if _int(retry_raw) is not None else 1)
    return Step(
        name=name,
        uses=raw["uses"],
        path=path,
        params=_dict(raw.get("with")),
        after=after,
        when=_str(raw.get("when")),
        every=_int(raw.get("every")),
        model=_str(raw.get("model")),
        template=_str(raw.get("template")),
        stream=raw.get("stream") is True,
        retry=retry,
        description=_str(raw.get("description")) or "",
        history=raw["history"] if isinstance(raw.get("history"), dict) else None,
        tools=build_step_tools(raw.get("tools")),
    )


def _build_steps(raw: Any, path: KeyPath) -> dict[str, Step]:
    steps = {}
    for name, value in _dict(raw).items():
        step = _build_step(name, value, (*path, name))
        if step is not None:
            steps[name] = step
    return steps


def build(data: Any, source: SourceMap, folder: Path | None) -> Blueprint:
    """The typed blueprint from loaded data; malformed parts are skipped, not fatal."""
    data = _dict(data)
    models = {}
    for name, slot in _dict(data.get("models")).items():
        if isinstance(slot, str):
            models[name] = ModelSlot(name, slot)
        elif isinstance(slot, dict) and isinstance(slot.get("provider"), str):
            options = {k: v for k, v in slot.items() if k != "provider"}
            models[name] = ModelSlot(name, slot["provider"], options)
    state = {}
    for key, spec in _dict(data.get("state")).items():
        if isinstance(spec, dict) and "default" in spec:
            default = spec["default"]
            state[key] = StateVar(
                key,
                _str(spec.get("type")) or _infer_type(default),
                default,
                tuple(v for v in spec.get("values", ()) if isinstance(v, str)),
                _str(spec.get("description")) or "",
            )
        elif not isinstance(spec, dict):
            state[key] = StateVar(key, _infer_type(spec), spec)
    wm = _dict(data.get("working_memory"))
    listed = [r for r in wm.get("regions", ()) if isinstance(r, str)]
    regions = tuple(listed) + tuple(r for r in BUILTIN_REGION_ORDER if r not in listed)
    subprocesses = {
        name: Subprocess(
            name,
            _build_steps(sp.get("steps"), ("subprocesses", name, "steps")),
            _str(sp.get("when")),
            _int(sp.get("every")),
            _str(sp.get("description")) or "",
        )
        for name, sp in _dict(data.get("subprocesses")).items()
        if isinstance(sp, dict)
    }
    processes = {
        name: Process(
            name,
            _build_steps(pr.get("steps"), ("processes", name, "steps")),
            _str(pr.get("loop")) or "continuous",
            {k: v for k, v in pr.items() if k not in {"steps", "loop", "model", "persona", "description"}},
            _str(pr.get("model")),
            _str(pr.get("persona")),
            _str(pr.get("description")) or "",
        )
        for name, pr in _dict(data.get("processes")).items()
        if isinstance(pr, dict)
    }
    triggers = {
        name: Trigger(name, tr["kind"], {k: v for k, v in tr.items() if k != "kind"})
        for name, tr in _dict(data.get("triggers")).items()
        if isinstance(tr, dict) and isinstance(tr.get("kind"), str)
    }
    mode = data.get("mode") if data.get("mode") in ("fused", "chained") else "fused"
    ttl = wm.get("ttl_hours")
    return Blueprint(
        name=_str(data.get("soul")) or "soul",
        source=source,
        folder=folder,
        version=_int(data.get("version")) or 1,
        description=_str(data.get("description")) or "",
        persona=_str(data.get("persona")),
        model=_str(data.get("model")) or DEFAULT_MODEL,
        models=models,
        mode=mode,
        state=state,
        regions=regions,
        memory_ttl_hours=float(ttl) if isinstance(ttl, int | float) and not isinstance(ttl, bool) else None,
        region_limits={k: v for k, v in _dict(wm.get("limits")).items() if isinstance(v, int) and not isinstance(v, bool)},
        summary=_dict(wm.get("summary")),
        steps=_build_steps(data.get("steps"), ("steps",)),
        memory=data["memory"] if isinstance(data.get("memory"), dict) else None,
        chetana=data["chetana"] if isinstance(data.get("chetana"), dict) else None,
        subprocesses=subprocesses,
        processes=processes,
        triggers=triggers,
        dialogue=data["dialogue"] if isinstance(data.get("dialogue"), dict) else None,
        dialogue_spec=build_dialogue(data.get("dialogue")),
        tools=build_tools(data.get("tools")),
        mcp=build_mcp_servers(data.get("tools")),
        observer=data["observer"] if isinstance(data.get("observer"), dict) else None,
    )
