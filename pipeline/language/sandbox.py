"""The Jinja sandbox with bounds: no template or gate can allocate without limit.

jinja2's sandbox keeps templates away from Python internals, but not from memory: `"x" *
10**9` asks for a gigabyte, and Jinja folds constant expressions while *compiling*, so
`soul validate` alone would allocate it. Here nothing is evaluated at compile time (no
optimizer, no constant output folding), the operators that can grow a value (`*`, `**`, `%`,
`+`, `~`) and the filters that pad (`center`, `indent`, `format`, ...) refuse results past
`MAX_TEXT` (`MAX_OUTPUT` for joins, which a persona may need), and a render refuses output past `MAX_OUTPUT`. Every refusal is a `SecurityError`
(a `jinja2.TemplateError`); `Template.render` turns it, and every other template failure, into
a `soul.errors.StepError` that names the template.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from pathlib import PurePath
from typing import Any

from jinja2 import Template, TemplateError, nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

from soul.errors import BlueprintError, StepError

MAX_TEXT = 1024 * 1024  # characters (or items) one operator or filter may produce
MAX_OUTPUT = 4 * MAX_TEXT  # characters one render may produce
MAX_POWER_BITS = 64 * 1024  # an integer power past this many bits is refused

# printf-style widths and precisions: `%999999999d` pads to a gigabyte
_PRINTF_SPEC = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?")


def _too_big(what: str, size: float, limit: int = MAX_TEXT) -> SecurityError:
    return SecurityError(f"{what} would make {size:,.0f} characters or items; templates may make at most {limit:,}")


def _length(value: Any) -> int | None:
    return len(value) if isinstance(value, str | list | tuple) else None


def _check_printf(spec: str) -> None:
    for width, precision in _PRINTF_SPEC.findall(spec):
        for part in (width, precision):
            if part == "*":
                raise SecurityError("'*' widths in % formatting are not allowed in templates; write the width")
            if part and (len(part) > 7 or int(part) > MAX_TEXT):
                raise _too_big("% formatting", int(part) if len(part) < 20 else math.inf)


def _bounded_binop(operator: str, left: Any, right: Any) -> None:
    """Refuse before computing when the result of `left operator right` would be too big."""
    if operator == "*":
        for seq, times in ((left, right), (right, left)):
            size = _length(seq)
            if size is not None and isinstance(times, int) and size * times > MAX_TEXT:
                raise _too_big("'*'", size * times)
    elif operator == "**":
        grows = isinstance(left, int) and isinstance(right, int) and abs(left) > 1 and right > 0
        if grows and right * math.log2(abs(left)) > MAX_POWER_BITS:
            raise SecurityError(f"'**' would make a number of over {MAX_POWER_BITS:,} bits; templates may not")
    elif operator == "%":
        if isinstance(left, str):
            _check_printf(left)
    elif operator == "+":
        a, b = _length(left), _length(right)
        if a is not None and b is not None and a + b > MAX_OUTPUT:
            raise _too_big("'+'", a + b, MAX_OUTPUT)


def bounded_concat(parts: Iterable[Any]) -> str:
    """`"".join` that refuses past MAX_OUTPUT characters while joining, not after."""
    out: list[str] = []
    size = 0
    for part in parts:
        size += len(part)
        if size > MAX_OUTPUT:
            raise SecurityError(f"the template's output passed {MAX_OUTPUT:,} characters; templates may render at most that")
        out.append(part)
    return "".join(out)


def _bounded_filter(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """A padding filter that refuses integer arguments (widths, counts) past MAX_TEXT."""

    def bounded(*args: Any, **kwargs: Any) -> Any:
        for value in (*args[1:], *kwargs.values()):
            if isinstance(value, int) and value > MAX_TEXT:
                raise _too_big(f"filter '{name}'", value)
        if name == "format" and args and isinstance(args[0], str):
            _check_printf(args[0])
        return fn(*args, **kwargs)

    return bounded


class _NoFoldingCodeGenerator(CodeGenerator):
    """Jinja's compiler without compile-time evaluation, and with a bounded `~`."""

    def _output_child_to_const(self, node: nodes.Expr, frame: Frame, finalize: Any) -> str:
        # constant output is folded even with optimized=False: `{{ "x" * N }}` would run here
        raise nodes.Impossible()

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.concat_operands((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class SoulTemplate(Template):
    """A template whose render fails only with `StepError` (the template named), never with a
    raw Jinja error, a RecursionError (an include cycle) or a refused file."""

    def render(self, *args: Any, **kwargs: Any) -> str:
        try:
            return super().render(*args, **kwargs)
        except (TemplateError, BlueprintError) as exc:
            raise StepError(f"{self._shown()}{_where(exc, self.filename)}: {exc}") from exc
        except RecursionError as exc:
            raise StepError(f"{self._shown()}: includes nest without end (a template includes itself)") from exc

    def _shown(self) -> str:
        return f"template '{self.name}'" if self.name else "inline template"


def _where(exc: BaseException, filename: str | None) -> str:
    """" line N" (or ", in 'other.j2' line N" inside an included template): the innermost
    template line of a render's failure, from the frames Jinja rewrites to point at its
    templates (each frame's globals hold `__jinja_exception__`)."""
    found: tuple[str, int] | None = None
    tb = exc.__traceback__
    while tb is not None:
        if "__jinja_exception__" in tb.tb_frame.f_globals:
            found = (tb.tb_frame.f_code.co_filename, tb.tb_lineno)
        tb = tb.tb_next
    if found is None:
        return ""
    where, line = found
    if where == (filename or "<template>"):
        return f" line {line}"
    return f", in '{PurePath(where).name}' line {line}"


class Sandbox(ImmutableSandboxedEnvironment):
    """The bounded, immutable sandbox every prompt, inline template and gate runs in."""

    intercepted_binops = frozenset({"*", "**", "%", "+"})
    code_generator_class = _NoFoldingCodeGenerator
    template_class = SoulTemplate
    concat = staticmethod(bounded_concat)  # type: ignore[assignment]

    def __init__(self, **options: Any) -> None:
        super().__init__(optimized=False, **options)
        for name in ("center", "indent", "format", "wordwrap", "truncate", "filesizeformat"):
            if name in self.filters:
                self.filters[name] = _bounded_filter(name, self.filters[name])
        if "lipsum" in self.globals:
            self.globals["lipsum"] = _bounded_filter("lipsum", self.globals["lipsum"])

    def from_string(self, source: Any, globals: Any = None, template_class: Any = None) -> Any:
        """An inline template (a step parameter); a syntax error is a StepError, not a raw one."""
        try:
            return super().from_string(source, globals, template_class)
        except TemplateError as exc:
            raise StepError(f"inline template: {exc}") from exc

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        _bounded_binop(operator, left, right)
        return super().call_binop(context, operator, left, right)

    def concat_operands(self, parts: tuple[Any, ...]) -> str:
        """The `~` operator: strings joined, bounded like `+`."""
        texts = [str(p) for p in parts]
        size = sum(map(len, texts))
        if size > MAX_OUTPUT:  # joining grows like `+`: a loop of `s ~ s` doubles each time
            raise _too_big("'~'", size, MAX_OUTPUT)
        return "".join(texts)
