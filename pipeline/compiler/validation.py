"""Validation: every problem of a blueprint in one pass, sorted by position.

Stages: YAML with positions → JSON Schema → the typed Blueprint → the graph's own rules (step
kinds, `with:` parameters and the templates among them, `after`, cycles, reachability, gates and
template references, what a template always fails on, files, `memory.field`, model slots, fused
calls, model slots' keys and hosts) → warnings (dead steps, unused slots, hosts a blueprint chose).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from soul import textfiles
from soul.compiler.dialogue_rules import check_dialogue
from soul.compiler.model_rules import check_model_hosts
from soul.compiler.references import Scope, check_expression, check_includes, check_template
from soul.compiler.tool_rules import check_tools
from soul.compiler.topology import ancestors, find_cycles, reachable
from soul.diagnostics import Diagnostic, Position, did_you_mean, one_of, sort_diagnostics
from soul.errors import BlueprintError, BlueprintInvalid, FileRefused
from soul.kinds import Registry, StepKind, default_registry
from soul.language import (
    TEMPLATE_FORMAT,
    Blueprint,
    KeyPath,
    SourceMap,
    Step,
    attribute_pattern,
    build,
    check_schema,
    check_schema_at,
    column,
    field_folder,
    read,
)


@dataclass
class Checked:
    """The outcome of validation: the blueprint (None if unreadable) and every diagnostic."""

    blueprint: Blueprint | None
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "warning"]

    @property
    def ok(self) -> bool:
        return self.blueprint is not None and not self.errors

    def raise_for_errors(self) -> Blueprint:
        """The blueprint, or BlueprintInvalid carrying every diagnostic."""
        if not self.ok:
            raise BlueprintInvalid(self.diagnostics)
        assert self.blueprint is not None
        return self.blueprint


def validate(name_or_path: str | Path, registry: Registry | None = None, *, allow_field_paths: bool | None = None) -> Checked:
    """Load and check a blueprint file or built-in soul; never raises for a bad blueprint.

    `allow_field_paths=True` accepts a `memory.field` outside the blueprint's folder, False
    refuses it, None (the default) leaves it to ``SOUL_ALLOW_FIELD_PATHS=1``."""
    loaded, path = read(name_or_path)
    if loaded.data is None or loaded.diagnostics:
        return Checked(None, sort_diagnostics(loaded.diagnostics))
    diagnostics = check_schema(loaded.data, loaded.source)
    if not isinstance(loaded.data, dict):
        return Checked(None, sort_diagnostics(diagnostics))
    blueprint = build(loaded.data, loaded.source, path.parent)
    diagnostics.extend(check_rules(blueprint, registry or default_registry(), allow_field_paths=allow_field_paths))
    return Checked(blueprint, sort_diagnostics(diagnostics))


def load_valid(name_or_path: str | Path, registry: Registry | None = None, *, allow_field_paths: bool | None = None) -> Blueprint:
    """A valid blueprint, or BlueprintInvalid with every diagnostic (`allow_field_paths`: as
    in `validate`)."""
    return validate(name_or_path, registry, allow_field_paths=allow_field_paths).raise_for_errors()


def _is_provider(spec: str) -> bool:
    return "/" in spec or ":" in spec or spec == "local"


class _Rules:
    def __init__(self, blueprint: Blueprint, registry: Registry) -> None:
        self.bp = blueprint
        self.src: SourceMap = blueprint.source
        self.registry = registry
        self.out: list[Diagnostic] = []
        self.used_slots: set[str] = set()
        self.read_steps: set[tuple[str, str]] = set()  # (scope, step) read by someone

    def error(self, path: KeyPath, message: str, hint: str | None = None, *, key: bool = False) -> None:
        self.out.append(self.src.diagnostic(path, message, hint=hint, key=key))

    def warning(self, path: KeyPath, message: str, hint: str | None = None, *, key: bool = False) -> None:
        self.out.append(self.src.diagnostic(path, message, hint=hint, key=key, severity="warning"))

    # -- files ---------------------------------------------------------------------------
    def file_beside(self, rel: str, path: KeyPath, what: str) -> Path | None:
        """The file `rel` inside the blueprint's folder, or None with an error."""
        folder = self.bp.folder
        if folder is None:
            return None
        try:
            target: Path | None = textfiles.confine(folder, rel)
        except textfiles.Refused as exc:
            if exc.reason == "outside":
                self.error(path, f"{what} '{rel}' is outside the blueprint's folder", "keep templates and personas beside the blueprint")
                return None
            target = None  # an absolute path, a NUL: read_file below words the refusal
        if target is not None and not target.is_file():
            near = did_you_mean(Path(rel).name, [p.name for p in folder.iterdir() if p.is_file()])
            self.error(path, f"{what} '{rel}' not found in {folder}", near)
            return None
        if target is None or what in ("persona", "template"):
            try:  # read as the runtime reads it: a regular UTF-8 file of at most 1 MiB
                self.bp.read_file(rel, what)
            except BlueprintError as exc:
                self.error(path, f"{what} '{rel}' is refused: {getattr(exc, 'reason', exc)}", getattr(exc, "hint", None))
                return None
        return target

    def at_line(self, path: KeyPath, line: int, text: str, message: str, hint: str | None,
                near: str | None = None, col: int | None = None) -> None:
        """An error at line `line` of the string written at `path` (exact for `|` blocks;
        otherwise at the string, naming the line when there are several), at the column of
        `near` or `col` in it where the YAML shows that line as it is (no escapes)."""
        pos, exact = self.src.text_position(path, line)
        where = f" line {line}" if not exact and "\n" in text else ""
        lines = text.splitlines()
        if exact and (near or col) and 0 < line <= len(lines):
            written = (self.src.line_text(pos.line) or "")[pos.col - 1:]
            quote = 1 if written[:1] in ("'", '"') else 0
            if written[quote:].startswith(lines[line - 1]):
                pos = Position(pos.line, pos.col + quote + (col or column(lines[line - 1], near)) - 1)
        self.out.append(self.src.diagnostic(path, f"`{path[-1]}`{where} {message}", hint=hint, at=pos))

    def inline_templates(self, step: Step, kind: type[StepKind]) -> None:
        """A non-LLM step's template parameters: those its kind declares (`"format":
        "template"` in its params schema: memory.recall's `query`, memory.store's `content`)
        must compile; others that look like templates are checked only if they do. Then what
        they include, the Python internals they read and what always fails in them."""
        from soul.language import analyse_template

        properties = kind.params.get("properties", {})
        for key, value in step.params.items():
            schema = properties.get(key)
            declared = isinstance(schema, dict) and schema.get("format") == TEMPLATE_FORMAT
            if not isinstance(value, str) or not (declared or "{%" in value or "{{" in value):
                continue
            analysis = analyse_template(value)
            at = (*step.path, "with", key)
            if analysis.error:
                if declared:  # otherwise not necessarily a template: the kind reads it as it likes
                    self.at_line(at, analysis.error_line, value, f"does not compile: {analysis.error}", None,
                                 analysis.error_near, analysis.error_col)
                continue
            for attr, line in analysis.private:
                self.at_line(at, line, value, f"reads '{attr}', a Python internal the sandbox refuses",
                             "templates read only the names soul gives them", attribute_pattern(attr))
            for line, message, hint, near in analysis.refused:
                self.at_line(at, line, value, message, hint, near)
            check_includes(self, analysis, f"{step.name}.with.{key}", at)

    # -- models --------------------------------------------------------------------------
    def model_ref(self, spec: str | None, path: KeyPath) -> str | None:
        """The model a reference resolves to (slot name or provider), checking slots exist."""
        if spec is None:
            return None
        if spec in self.bp.models:
            self.used_slots.add(spec)
            return spec
        if _is_provider(spec):
            return spec
        self.error(
            path,
            f"model slot '{spec}' is not defined",
            did_you_mean(spec, self.bp.models) or f"defined slots: {one_of(self.bp.models)}; or write provider/model",
        )
        return None

    # -- steps ---------------------------------------------------------------------------
    def scope_steps(self, steps: dict[str, Step], scope: Scope) -> None:
        after = {name: step.after for name, step in steps.items()}
        for name, step in steps.items():
            kind = self.registry.get(step.uses)
            if kind is None:
                self.error(
                    (*step.path, "uses"),
                    f"unknown step kind '{step.uses}'",
                    did_you_mean(step.uses, self.registry.names())
                    or f"known kinds: {one_of(self.registry.names())}",
                )
            else:
                if step.params or kind.params.get("required"):
                    self.out.extend(check_schema_at(step.params, kind.params, self.src, (*step.path, "with")))
                if step.stream and not kind.streamable:
                    self.error((*step.path, "stream"), f"step kind '{kind.name}' cannot stream", "only reply-like steps (external_dialogue, internal_dialog) stream")
                if not kind.llm and (step.model or step.template):
                    which = "model" if step.model else "template"
                    self.error((*step.path, which), f"step kind '{kind.name}' makes no model call; '{which}' has no effect here")
                if not kind.llm and step.params:
                    self.inline_templates(step, kind)
                if kind.name == "chetana.context" and self.bp.chetana is None:
                    self.error((*step.path, "uses"), "chetana.context needs the soul's `chetana:` block", "add `chetana: {}` at the top level")
            for i, dep in enumerate(step.after):
                at = (*step.path, "after", i) if (*step.path, "after", i) in self.src.values else (*step.path, "after")
                if dep == name:
                    self.error(at, f"step '{name}' cannot follow itself")
                elif dep not in steps:
                    hint = did_you_mean(dep, steps)
                    if hint is None and dep in scope.outer:
                        hint = "the turn's steps all finish before a subprocess; drop it from `after`"
                    self.error(at, f"`after` names a missing step '{dep}'", hint or f"steps here: {one_of(steps)}")
            self.model_ref(step.model, (*step.path, "model"))
            if step.template and kind is not None and kind.llm:
                target = self.file_beside(step.template, (*step.path, "template"), "template")
                if target is not None:
                    check_template(self, target, step, scope, steps)
        clean = {n: tuple(d for d in deps if d in steps and d != n) for n, deps in after.items()}
        cyclic: set[str] = set()
        for cycle in find_cycles(clean):
            cyclic.update(cycle)
            first = steps[cycle[0]]
            self.error((*first.path, "after"), "cycle in the step graph: " + " → ".join(cycle), "remove one of these `after` links", key=True)
        reached = reachable(clean)
        for name, step in steps.items():
            if name not in reached and name not in cyclic:
                self.error(step.path, f"step '{name}' is unreachable from the turn's input: it only follows steps in a cycle", key=True)
        upstream = ancestors(clean)
        for name, step in steps.items():
            visible = scope.outer | upstream[name]
            if step.when is not None:
                check_expression(self, step.when, (*step.path, "when"), visible, scope, steps, name)
                self.dead_gate(step)
        self.fused_models(steps, upstream, scope)

    def dead_gate(self, step: Step) -> None:
        from soul.language import analyse_expression

        analysis = analyse_expression(step.when or "")
        if analysis.is_constant and not analysis.constant:
            self.warning((*step.path, "when"), f"step '{step.name}' never runs: its `when` is always false")

    def fused_models(self, steps: dict[str, Step], upstream: dict[str, set[str]], scope: Scope) -> None:
        """In fused mode, a step on another model must not sit inside a fused call."""
        if self.bp.mode != "fused" or scope.kind != "turn":
            return
        model_of: dict[str, str] = {}
        for name, step in steps.items():
            kind = self.registry.get(step.uses)
            if kind is not None and kind.llm:
                model_of[name] = step.model or self.bp.model
        for mid, mid_model in model_of.items():
            before = [a for a in upstream.get(mid, ()) if model_of.get(a) not in (None, mid_model)]
            for a in before:
                after = [c for c in model_of if model_of[c] == model_of[a] and mid in upstream.get(c, ())]
                if after:
                    self.error(
                        (*steps[mid].path, "model") if steps[mid].model else steps[mid].path,
                        f"fused call mixes models: step '{mid}' uses '{mid_model}' but sits between "
                        f"'{a}' and '{after[0]}', which share one call on '{model_of[a]}'",
                        "give it the same model, or use `mode: chained`",
                        key=steps[mid].model is None,
                    )
                    return

    # -- warnings ------------------------------------------------------------------------
    def dead_steps(self, steps: dict[str, Step], scope: Scope) -> None:
        for name, step in steps.items():
            kind = self.registry.get(step.uses)
            if kind is None or kind.llm or kind.effects or "region" in kind.params.get("properties", {}):
                continue
            if (scope.kind, name) not in self.read_steps:
                self.warning(step.path, f"step '{name}' is dead: nothing reads its outputs and it changes nothing", key=True)

    def unused_slots(self) -> None:
        for name in self.bp.models:
            if name not in self.used_slots:
                self.warning(("models", name), f"model slot '{name}' is never used", key=True)


def check_rules(blueprint: Blueprint, registry: Registry, *, allow_field_paths: bool | None = None) -> list[Diagnostic]:
    """The graph's own rules over a built blueprint (the schema is checked separately)."""
    rules = _Rules(blueprint, registry)
    bp = blueprint
    if bp.persona:
        rules.file_beside(bp.persona, ("persona",), "persona")
    _check_memory_field(rules, allow_field_paths)
    _check_memory_learn(rules)
    rules.model_ref(bp.model, ("model",))
    for key, var in bp.state.items():
        _check_state_var(rules, key, var)
    turn = Scope("turn", frozenset(), bp.state)
    rules.scope_steps(bp.steps, turn)
    rules.dead_steps(bp.steps, turn)
    for name, sp in sorted(bp.subprocesses.items()):
        scope = Scope(f"subprocess:{name}", frozenset(bp.steps), bp.state, bp.steps)
        for clash in sorted(set(sp.steps) & set(bp.steps)):
            rules.error(sp.steps[clash].path, f"subprocess step '{clash}' has the name of a turn step", "step names are shared with the turn; rename it", key=True)
        rules.scope_steps(sp.steps, scope)
        if sp.when:
            check_expression(rules, sp.when, ("subprocesses", name, "when"), frozenset(bp.steps), scope, {}, None)
    for name, pr in sorted(bp.processes.items()):
        scope = Scope(f"process:{name}", frozenset(), bp.state)
        rules.scope_steps(pr.steps, scope)
        rules.model_ref(pr.model, ("processes", name, "model"))
        if pr.persona:
            rules.file_beside(pr.persona, ("processes", name, "persona"), "persona")
    summary = bp.summary_model()  # the slot that writes every summary of older turns is used
    if summary is not None:
        rules.model_ref(summary, ("working_memory", "summary", "model") if bp.summary.get("model") else ("models", summary))
    _check_triggers(rules)
    check_model_hosts(rules)
    check_dialogue(rules, validate)
    check_tools(rules)
    rules.unused_slots()
    return rules.out


def _check_state_var(rules: _Rules, key: str, var: object) -> None:
    from soul.language import StateVar

    assert isinstance(var, StateVar)
    expected = {
        "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
        "list": (list,), "mapping": (dict,),
    }.get(var.type, (object,))
    ok = var.default is None or (isinstance(var.default, expected) and not (var.type in ("integer", "number") and isinstance(var.default, bool)))
    if not ok:
        rules.error(("state", key, "default"), f"state '{key}': default {var.default!r} is not a {var.type}")
    if var.values and var.default not in var.values:
        rules.error(("state", key, "default"), f"state '{key}': default {var.default!r} is not one of its values", f"values: {', '.join(var.values)}")


def _check_memory_field(rules: _Rules, allow: bool | None) -> None:
    """`memory.field` stays inside the blueprint's folder unless allowed (the rule the memory
    bridge enforces at run time: `field_folder`)."""
    where = (rules.bp.memory or {}).get("field")
    if not isinstance(where, str) or not where:
        return
    try:
        field_folder(where, rules.bp.folder, allow=allow)
    except FileRefused as exc:
        rules.error(("memory", "field"), f"memory.field '{where}' is refused: {exc.reason}", exc.hint)


def _check_memory_learn(rules: _Rules) -> None:
    """`memory.learn` learns from what turns recall: without a turn memory.recall step it
    never has anything to feed back."""
    learn = (rules.bp.memory or {}).get("learn")
    if not learn or (isinstance(learn, dict) and learn.get("enabled") is False):
        return
    if not any(step.uses == "memory.recall" for step in rules.bp.steps.values()):
        rules.warning(("memory", "learn"), "memory.learn is on, but no turn step is a memory.recall: nothing is recalled, so nothing is learned",
                      "add a memory.recall step to the turn, or remove learn")


def _check_triggers(rules: _Rules) -> None:
    bp = rules.bp
    for name, trig in bp.triggers.items():
        path = ("triggers", name)
        needs = {"s_loud": "source", "idle": "idle_seconds", "schedule": "interval_seconds"}[trig.kind] if trig.kind in ("s_loud", "idle", "schedule") else None
        if needs and needs not in trig.options:
            rules.error(path, f"trigger '{name}' of kind {trig.kind} needs `{needs}`", key=True)
        source = trig.options.get("source")
        if isinstance(source, str) and "." in source:
            proc, step = source.split(".", 1)
            if proc not in bp.processes:
                rules.error((*path, "source"), f"trigger source names a missing process '{proc}'", did_you_mean(proc, bp.processes) or f"processes: {one_of(bp.processes)}")
            elif step not in bp.processes[proc].steps:
                rules.error((*path, "source"), f"process '{proc}' has no step '{step}'", did_you_mean(step, bp.processes[proc].steps))
            else:
                kind = rules.registry.get(bp.processes[proc].steps[step].uses)
                if kind is not None and "trigger" not in kind.output_names():
                    rules.error((*path, "source"), f"step '{source}' ({kind.name}) has no `trigger` output", "use a step of kind s_loud")
                rules.read_steps.add((f"process:{proc}", step))
