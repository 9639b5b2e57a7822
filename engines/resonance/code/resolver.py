"""Linking call sites (and base types) to symbols, across every indexed file.

No type inference: a call is resolved by where its name can be seen from, first match wins:

1. `self.m()` / `this.m()` — and a bare `m()` in Java, C#, C++ and Ruby, where `this` is
   implicit — a member of the caller's class, then of its bases (resolved inheritance);
2. `X.m()` where X names a class/struct/module → a member of X (and its bases);
   where X is an imported module or a package alias → a symbol of that module;
3. a bare `f()`: the caller's own file (the nearest enclosing scope wins), then the file's
   imports (`from m import f`, `import { f } from "./m"`, `use m::f`), then the caller's
   package/namespace (Go, Java, C#);
4. otherwise a name that exactly one symbol of the language family carries (for `obj.m()`
   with an untyped receiver: exactly one method named m).

Whatever stays unresolved keeps a reason: "ambiguous: 2 symbols named 'area' (...)",
"external: imported from ./util.js", "not in the index (builtin or external)".
"""

from __future__ import annotations

import posixpath
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace

from .languages import spec_named
from .symbols import CONTAINERS, CallSite, Import, Inheritance, Symbol, module_path

__all__ = ["Resolver"]

_IMPLICIT_THIS = frozenset({"java", "csharp", "cpp", "ruby"})
_NAME = re.compile(r"^[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*$")
# a receiver that builds its object: `new X(..)`, `X::new(..)`, `X.new(..)`, `&X{..}`, `X(..)`
_CONSTRUCTED = re.compile(r"^(?:new\s+([\w.:]+)|&?([\w.:]+?)(?:::new|\.new)?\s*[({])")
# Methods of the builtin containers and strings (Python, JS, Ruby, Java): `x.get()` on an
# untyped receiver is far more often a dict than the one indexed class with a `get`.
_BUILTIN_METHODS = frozenset("""get items keys values append extend pop add update remove
    insert clear copy join split strip replace format startswith endswith encode decode lower
    upper sort index count push map filter forEach reduce slice then catch toString close read
    write send each size length put contains equals hashCode""".split())  # noqa: SIM905
_CALLABLE = frozenset({"function", "method", "class", "struct", "enum"})


class Resolver:
    """An in-memory view of the whole index used to resolve names; build once per run."""

    def __init__(self, symbols: Iterable[Symbol], imports: Iterable[Import], inherits: Iterable[Inheritance]) -> None:
        self.symbols: dict[str, Symbol] = {}
        self.by_name: dict[tuple[str, str], list[Symbol]] = defaultdict(list)  # (group, name)
        self.members: dict[str, dict[str, list[Symbol]]] = defaultdict(lambda: defaultdict(list))
        self.by_qualified: dict[str, list[Symbol]] = defaultdict(list)
        self.language_of: dict[str, str] = {}  # file -> language
        for s in symbols:
            self.symbols[s.id] = s
            self.by_qualified[s.qualified].append(s)
            self.language_of[s.file] = s.language
            self.by_name[(self._group(s.language), s.name)].append(s)
            if s.parent:
                self.members[s.parent][s.name].append(s)
        self.imports: dict[str, list[Import]] = defaultdict(list)
        for i in imports:
            self.imports[i.file].append(i)
        self.bases: dict[str, list[str]] = defaultdict(list)
        self._raw_inherits = list(inherits)

    @staticmethod
    def _group(language: str) -> str:
        return spec_named(language).group

    def _namespace(self, sym: Symbol) -> str:
        """The qualified prefix a symbol's file gives it (module path or package)."""
        local = sym.id.split("#", 1)[1].split("~")[0]
        q = sym.qualified
        return q[: -len(local) - 1] if q.endswith("." + local) else ""

    # ---- inheritance -------------------------------------------------------------------
    def resolve_inherits(self) -> list[Inheritance]:
        """Resolve every base name to a class-like symbol where one is visible."""
        out = []
        for h in self._raw_inherits:
            language = self.language_of.get(h.file, "python")
            target, _ = self._type(h.base, h.file, language, h.child)
            if target is not None:
                self.bases[h.child].append(target.qualified)
            out.append(replace(h, base_id=target.id if target else None))
        return out

    def _type(self, name: str, file: str, language: str, context: str) -> tuple[Symbol | None, str]:
        """A class-like symbol `name` (dotted allowed) as seen from `file`."""
        last = name.split(".")[-1]
        cands = [s for s in self.by_name.get((self._group(language), last), ()) if s.kind in CONTAINERS]
        if "." in name:
            cands = [s for s in cands if s.qualified == name or s.qualified.endswith("." + name)] or cands
        return self._pick(cands, last, file, context)

    # ---- choosing among candidates -----------------------------------------------------
    def _imported(self, sym: Symbol, name: str, file: str) -> bool | None:
        """True if `file` imports `sym` under `name`; None if it imports `name` from a
        module that is not in the index (an external name); False otherwise."""
        seen = False
        for imp in self.imports.get(file, ()):
            visible = imp.alias or imp.name or imp.module.split("/")[-1].split(".")[-1]
            if visible != name and imp.name != "*":
                continue
            seen = True
            target = self._module_target(imp.module, file, sym.language)
            ns = self._namespace(sym)
            if ns == target or ns.endswith("." + target) or (ns and target.endswith("." + ns)):
                return True
        return None if seen else False

    def _module_target(self, module: str, file: str, language: str) -> str:
        """An import's module as a dotted module path comparable to a symbol's namespace."""
        if module.startswith("."):
            if language == "python":  # `.x` is a sibling module, `..x` one package up
                dots = len(module) - len(module.lstrip("."))
                base = posixpath.dirname(file)
                for _ in range(dots - 1):
                    base = posixpath.dirname(base)
                rest = module.lstrip(".").replace(".", "/")
                return module_path(posixpath.join(base, rest) + ".py", spec_named(language))
            joined = posixpath.normpath(posixpath.join(posixpath.dirname(file), module))
            stem, _ = posixpath.splitext(joined)
            return module_path(stem + ".x", spec_named(language)) if stem else ""
        parts = [p for p in re.split(r"[./:]+", module) if p and p not in ("crate", "self", "super")]
        return ".".join(parts)

    def _pick(self, cands: list[Symbol], name: str, file: str, context: str) -> tuple[Symbol | None, str]:
        """Same file (nearest enclosing scope) → imported → same namespace → unique."""
        if not cands:
            source = next((i.module for i in self.imports.get(file, ()) if name in (i.alias, i.name)), None)
            if source is not None:
                return None, f"external: imported from {source}"
            return None, "not in the index (builtin or external)"
        same = [s for s in cands if s.file == file]
        if same:
            best = max(same, key=lambda s: _shared_prefix(s.qualified, context))
            return best, "same file"
        imported = [s for s in cands if self._imported(s, name, file)]
        if len(imported) == 1:
            return imported[0], "import"
        ctx_ns = context.rsplit(".", 1)[0] if "." in context else ""
        same_ns = [s for s in cands if ctx_ns and self._namespace(s) and ctx_ns.startswith(self._namespace(s))]
        if len(same_ns) == 1:
            return same_ns[0], "same package"
        if len(cands) == 1:
            return cands[0], "unique name"
        external = any(self._imported(s, name, file) is None for s in cands[:1])
        if external:
            return None, f"external: {name} is imported from a module not in the index"
        shown = ", ".join(sorted(s.qualified for s in cands)[:4])
        return None, f"ambiguous: {len(cands)} symbols named {name!r} ({shown})"

    def _member(self, container: str, name: str) -> Symbol | None:
        """`name` in `container` or, breadth first, in its bases."""
        seen, queue = set(), [container]
        while queue:
            c = queue.pop(0)
            if c in seen:
                continue
            seen.add(c)
            found = self.members.get(c, {}).get(name)
            if found:
                return found[0]
            queue.extend(self.bases.get(c, ()))
        return None

    def _enclosing_class(self, caller: Symbol | None) -> str | None:
        s = caller
        while s is not None:
            if s.kind in CONTAINERS:
                return s.qualified
            if s.parent is None:
                return None
            parent = s.parent
            s = next(iter(self.by_qualified.get(parent, ())), None)
            if s is None:
                return parent  # Go receivers / Rust impls: the parent may live elsewhere
        return None

    # ---- calls ---------------------------------------------------------------------------
    def resolve(self, call: CallSite, language: str) -> CallSite:
        """The call with `callee` and `reason` set."""
        caller = self.symbols.get(call.caller) if call.caller else None
        context = caller.qualified if caller else ""
        group = self._group(language)
        recv = call.receiver
        if recv == "self" or (recv is None and language in _IMPLICIT_THIS):
            cls = self._enclosing_class(caller) if caller else None
            found = self._member(cls, call.name) if cls else None
            if found is not None:
                return replace(call, callee=found.id, reason="class scope")
        if call.receiver_type:
            owner, _ = self._type(call.receiver_type, call.file, language, context)
            found = self._member(owner.qualified, call.name) if owner is not None else None
            if found is not None:
                return replace(call, callee=found.id, reason=f"member of {owner.qualified} (typed local)")
        if recv is not None and recv != "self":
            built = _CONSTRUCTED.match(recv)
            typ = dotted_type(built.group(1) or built.group(2)) if built else (recv if _NAME.match(recv) else None)
            if typ is not None:
                owner, _ = self._type(typ, call.file, language, context)
                if owner is not None:
                    found = self._member(owner.qualified, call.name)
                    if found is not None:
                        return replace(call, callee=found.id, reason=f"member of {owner.qualified}")
                module = self._module_alias(recv, call.file, language)
                if module is not None:
                    cands = [s for s in self.by_name.get((group, call.name), ())
                             if self._namespace(s) == module or self._namespace(s).endswith("." + module)]
                    if len(cands) == 1:
                        return replace(call, callee=cands[0].id, reason=f"module {module}")
                    if not cands:
                        return replace(call, reason=f"external: {recv}.{call.name} (module {module} is not in the index)")
            methods = [s for s in self.by_name.get((group, call.name), ()) if s.kind == "method"]
            if call.name in _BUILTIN_METHODS:
                return replace(call, reason=f"receiver {recv!r} of unknown type; {call.name!r} is also a builtin method")
            if len(methods) == 1:
                return replace(call, callee=methods[0].id, reason="unique method name")
            why = f"ambiguous: receiver {recv!r} of unknown type, {len(methods)} methods named {call.name!r}" if methods else "not in the index (builtin or external)"
            return replace(call, reason=why)
        cands = [s for s in self.by_name.get((group, call.name), ()) if s.kind in _CALLABLE]
        plain = [s for s in cands if s.kind != "method" or (s.parent and context.startswith(s.parent + "."))]
        found, reason = self._pick(plain or cands, call.name, call.file, context)
        return replace(call, callee=found.id if found else None, reason=reason)

    def _module_alias(self, name: str, file: str, language: str) -> str | None:
        """The module a receiver names through an import (`import shapes`, Go `fmt`)."""
        for imp in self.imports.get(file, ()):
            if imp.name is not None and imp.name != "*" and (imp.alias or imp.name) == name:
                return self._module_target(f"{imp.module}.{imp.name}", file, language)
            visible = imp.alias or re.split(r"[./]", imp.module)[-1]
            if imp.name is None and visible == name:
                return self._module_target(imp.module, file, language)
        return None


def dotted_type(match: str) -> str:
    """A constructed type as a dotted name."""
    return match.replace("::", ".").strip(".")


def _shared_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a.split("."), b.split("."), strict=False):
        if x != y:
            break
        n += 1
    return n
