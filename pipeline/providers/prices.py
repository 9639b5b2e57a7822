"""What a model call costs: its usage times a price table kept as data.

The table ships as `soul/data/prices.json` (dated; USD per million tokens of input, output,
cache read and cache write, by `provider/model` prefix, the longest prefix winning). A user's
table — the file `$SOUL_PRICES` names, else `prices.json` in the data home — is laid over it:
its entries replace the bundled ones (`null` makes a model's price unknown again) and carry
its own `date`. A call is priced by the provider that made it: a scripted or replayed call,
or a model in no table, costs "unknown" — never 0. The bundled local model is free (it runs
on this machine). Cache-write tokens without a cache-write price are billed as input.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

from soul.errors import PriceTableError

PRICES_ENV = "SOUL_PRICES"
USER_FILE = "prices.json"
COLUMNS = ("input", "output", "cache_read", "cache_write")
MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class Price:
    """USD per million tokens of one model, and where the numbers come from."""

    model: str  # the table's key that matched
    input: float
    output: float
    cache_read: float | None
    cache_write: float | None
    date: str
    source: str  # "bundled", or the user's file

    def cost(self, input_tokens: int, output_tokens: int, cache_read: int = 0, cache_write: int = 0) -> float:
        """The call's price in USD (`input_tokens` excludes the cached ones)."""
        read = self.cache_read if self.cache_read is not None else self.input
        write = self.cache_write if self.cache_write is not None else self.input
        return (input_tokens * self.input + output_tokens * self.output + cache_read * read + cache_write * write) / 1_000_000


# a price as `PriceTable.price_for` finds it: the Price (None: unknown) and the trace's record of it
Priced = tuple[Price | None, dict[str, Any]]


@dataclass(frozen=True)
class PriceTable:
    """Prices by `provider/model` prefix (None: known to be unknown)."""

    entries: Mapping[str, Price | None]
    # what `price_for` found for each (provider, model): a session asks for the same few
    _priced: dict[tuple[str, str], Priced] = field(default_factory=dict, compare=False, repr=False)

    def lookup(self, key: str) -> Price | None:
        """The price of the longest prefix of `key` in the table, or None."""
        match = max((k for k in self.entries if key.startswith(k)), key=len, default=None)
        return self.entries[match] if match is not None else None

    def price_for(self, provider: str, spec: str) -> Priced:
        """The price of a call on `spec` made by `provider` (`priced_as`), and what a trace's
        cost record says of it besides the sum (worked out once per provider and model)."""
        memo = (provider, spec)
        found = self._priced.get(memo)
        if found is None:
            keys = priced_as(provider, spec)
            found = (None, {"usd": None, "model": keys[0], "date": None, "source": None, "per_million": None})
            for key in keys:
                price = self.lookup(key)
                if price is not None:
                    found = (price, {"model": price.model, "date": price.date, "source": price.source,
                                     "per_million": {c: getattr(price, c) for c in COLUMNS}})
                    break
            if len(self._priced) < 4096:
                self._priced[memo] = found
        return found


def _bundled() -> dict[str, Any]:
    return json.loads(files("soul.data").joinpath("prices.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def _entries(data: Any, source: str, where: str) -> dict[str, Price | None]:
    if not isinstance(data, Mapping) or not isinstance(data.get("models"), Mapping):
        raise PriceTableError(f"{where}: a price table is a JSON object with \"models\": {{\"provider/model\": {{\"input\": ..., "
                              "\"output\": ...}}}} (USD per million tokens) and a \"date\"")
    date = str(data.get("date") or "undated")
    out: dict[str, Price | None] = {}
    for key, row in data["models"].items():
        if row is None:
            out[str(key)] = None
            continue
        if not isinstance(row, Mapping) or not all(_number(row.get(c)) for c in ("input", "output")) or not all(
                row.get(c) is None or _number(row.get(c)) for c in ("cache_read", "cache_write")):
            raise PriceTableError(f"{where}: the price of {key!r} needs numbers >= 0 for input and output (and optionally "
                                  f"cache_read, cache_write), in USD per million tokens; it has {json.dumps(row)[:200]}")
        out[str(key)] = Price(str(key), float(row["input"]), float(row["output"]), _opt(row.get("cache_read")),
                              _opt(row.get("cache_write")), str(row.get("date") or date), source)
    return out


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0 and value == value


def _opt(value: Any) -> float | None:
    return None if value is None else float(value)


def user_file(home: Path | None = None) -> Path | None:
    """The user's price table: `$SOUL_PRICES`, else `prices.json` in the data home if it exists."""
    named = os.environ.get(PRICES_ENV)
    if named:
        return Path(named).expanduser()
    from soul.store import data_home

    path = data_home(home) / USER_FILE
    return path if path.is_file() else None


_cache: dict[tuple[str, float], PriceTable] = {}


def price_table(home: Path | None = None) -> PriceTable:
    """The bundled table with the user's laid over it (read again when the user's file changes)."""
    path = user_file(home)
    stamp = 0.0
    if path is not None:
        try:
            stamp = path.stat().st_mtime
        except OSError as exc:
            raise PriceTableError(f"{path}: the price table cannot be read ({exc.strerror or exc}); fix or unset ${PRICES_ENV}") from exc
    key = (str(path), stamp)
    table = _cache.get(key)
    if table is None:
        bundled = _bundled()
        entries = _entries(bundled, "bundled", "soul/data/prices.json")
        if path is not None:
            entries.update(_entries(_read(path), str(path), str(path)))
        _cache.clear()
        table = _cache[key] = PriceTable(entries)
    return table


def _read(path: Path) -> Any:
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise PriceTableError(f"{path}: the price table cannot be read ({exc.strerror or exc})") from exc
    if len(raw) > MAX_BYTES:
        raise PriceTableError(f"{path}: the price table is over {MAX_BYTES >> 20} MiB")
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise PriceTableError(f"{path}: the price table is not valid JSON ({exc})") from exc


def priced_as(provider: str, spec: str) -> list[str]:
    """The table keys a call on `spec` made by the provider named `provider` is looked up
    under: the spec when that provider serves it (litellm's also without its prefix); a call
    served by another provider (a scripted or replayed one) is looked up under that one."""
    head = spec.split("/", 1)[0].split(":", 1)[0]
    if head != provider:
        return [f"{provider}/{spec}"]
    keys = [spec]
    if provider == "litellm" and "/" in spec:
        keys.append(spec.split("/", 1)[1])
    return keys


def call_cost(provider: str, spec: str, input_tokens: int, output_tokens: int, cache_read: int = 0, cache_write: int = 0,
              *, table: PriceTable | None = None) -> dict[str, Any]:
    """What a call cost, as the trace keeps it: `usd` (None: unknown), the table's key that
    priced it, its date and source, and the prices used."""
    return cost_of((table or price_table()).price_for(provider, spec), input_tokens, output_tokens, cache_read, cache_write)


def cost_of(priced: Priced, input_tokens: int, output_tokens: int, cache_read: int = 0, cache_write: int = 0) -> dict[str, Any]:
    """`call_cost` from what `PriceTable.price_for` found (a caller that makes the same call
    again and again looks its price up once)."""
    price = priced[0]
    if price is None:  # (a copy of the record: every call's trace owns its own)
        return priced[1].copy()
    return {"usd": price.cost(input_tokens, output_tokens, cache_read, cache_write), **priced[1]}


@dataclass(frozen=True)
class Total:
    """The cost of several calls: the sum of the known ones, and how many are unknown."""

    usd: float
    calls: int
    unknown: int

    @property
    def known(self) -> bool:
        return self.calls > self.unknown

    def to_dict(self) -> dict[str, Any]:
        return {"usd": round(self.usd, 8) if self.known else None, "calls": self.calls, "unknown_calls": self.unknown,
                "text": self.text()}

    def text(self) -> str:
        """`$0.0123`, `unknown`, or `$0.0123 + 2 calls at unknown prices`."""
        if not self.known:
            return "unknown" if self.calls else "$0 (no model call)"
        shown = usd_text(self.usd)
        return f"{shown} + {self.unknown} call{'s' if self.unknown > 1 else ''} at unknown prices" if self.unknown else shown


def usd_text(usd: float | None) -> str:
    """A price for people: `unknown`, `$0`, `$0.000123`, `$1.23`."""
    if usd is None:
        return "unknown"
    if usd == 0:
        return "$0"
    return f"${usd:.2f}" if usd >= 1 else f"${usd:.6f}".rstrip("0")


def total(costs: Iterable[Mapping[str, Any] | None]) -> Total:
    """The total of calls' cost records (a record None or without `usd` is unknown)."""
    usd, calls, unknown = 0.0, 0, 0
    for cost in costs:
        calls += 1
        value = cost.get("usd") if isinstance(cost, Mapping) else None
        if isinstance(value, int | float) and not isinstance(value, bool):
            usd += float(value)
        else:
            unknown += 1
    return Total(usd, calls, unknown)


def traces_total(traces: Iterable[Mapping[str, Any]]) -> Total:
    """The cost of every call of some stored traces."""
    return total(call.get("cost") for trace in traces for call in trace.get("calls") or () if isinstance(call, Mapping))
