"""The inspection routes of `soul serve`: a session's layers, any turn's context window and
trace, its commits (background cycles included), its cost, the user model's diff and revert,
and forking (docs/serve.md):

    GET  /api/sessions/{id}/layers[?turn=N]        state, mood, user model (versions), working
                                                   memory by region: now, or after turn N
    GET  /api/sessions/{id}/user-model/diff?from=A&to=B   a unified diff of two versions
    POST /api/sessions/{id}/user-model/revert      {"version": V} → the new version, a copy of V
    GET  /api/sessions/{id}/commits                every commit in order (turns, subprocesses, cycles)
    GET  /api/sessions/{id}/commits/{c}/trace      a commit's trace
    GET  /api/sessions/{id}/commits/{c}/window     a commit's context window
    GET  /api/sessions/{id}/turns/{n}/window       turn n's context window
    GET  /api/sessions/{id}/cost                   the session's cost over every stored call
    POST /api/sessions/{id}/fork                   {"at": N} → the new session, this one after turn N (201)

Transport only: each route calls the store (`SessionStore.layers`, `fork_session`, ...) and the
runtime (`turn_window`) and returns what they give.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from soul.providers import traces_total
from soul.runtime import turn_window
from soul.serve import views


class InspectRefused(Exception):
    """A request these routes refuse: the app answers it with `status` and `code`."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _int(value: Any, name: str, example: str) -> int:
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise InspectRefused(400, f"bad_{name}", f"`{name}` is a whole number: {example}")
    return value


def routes(soul: Any, own: Callable[[str], Any], handled: Callable[[Any], Any], body: Any, as_json: Any) -> list[BaseRoute]:
    """The routes above; `own(id)` checks the session is this soul's, `handled` wraps an
    endpoint with the app's error answers, `body` reads a JSON body, `as_json` answers JSON."""
    store = soul.store

    def session_of(request: Request) -> Any:
        return own(request.path_params["id"])

    async def layers(request: Request) -> Response:
        info = session_of(request)
        turn = request.query_params.get("turn")
        at = _int(turn, "turn", "?turn=2") if turn is not None else None
        return as_json(views.layers_view(soul, store.layers(info.id, at)))

    def line(info: Any) -> tuple[str, str]:
        return store.user_model_line(info.id)  # type: ignore[no-any-return]

    async def diff(request: Request) -> Response:
        info = session_of(request)
        soul_name, key = line(info)
        versions = {v.version: v for v in store.user_model_history(soul_name, key)}
        q = request.query_params
        new = _int(q.get("to"), "to", "?from=1&to=2") if q.get("to") is not None else max(versions, default=0)
        old = _int(q.get("from"), "from", "?from=1&to=2") if q.get("from") is not None else new - 1
        for v in (old, new):
            if v != 0 and v not in versions:
                raise InspectRefused(404, "no_version", f"the user model has no version {v}; versions: "
                                     f"{', '.join(map(str, versions)) or '(none yet)'}")
        before = versions[old].text.splitlines() if old else []
        after = versions[new].text.splitlines() if new else []
        lines = list(difflib.unified_diff(before, after, f"v{old}", f"v{new}", lineterm=""))
        return as_json({"from": old, "to": new, "diff": lines})

    async def revert(request: Request) -> Response:
        info = session_of(request)
        data = await body(request)
        version = _int(data.get("version"), "version", '{"version": 1}')
        soul_name, key = line(info)
        if version not in {v.version for v in store.user_model_history(soul_name, key)}:
            raise InspectRefused(404, "no_version", f"the user model has no version {version}")
        made = store.revert_user_model(soul_name, key, version, note=f"reverted to v{version} from the page")
        return as_json({"version": made.version, "note": made.note, "text": made.text})

    async def commits(request: Request) -> Response:
        info = session_of(request)
        return as_json(store.commit_list(info.id))

    async def commit_trace(request: Request) -> Response:
        info = session_of(request)
        return as_json(store.commit_trace(info.id, int(request.path_params["commit"])))

    async def commit_window(request: Request) -> Response:
        info = session_of(request)
        return as_json(turn_window(store.commit_trace(info.id, int(request.path_params["commit"]))))

    async def window(request: Request) -> Response:
        info = session_of(request)
        return as_json(turn_window(store.trace(info.id, int(request.path_params["turn"]))))

    async def cost(request: Request) -> Response:
        info = session_of(request)
        return as_json(traces_total(t["trace"] for t in store.traces(info.id)).to_dict())

    async def fork(request: Request) -> Response:
        info = session_of(request)
        data = await body(request)
        at = _int(data.get("at", info.turns), "at", '{"at": 2}')
        made = store.fork_session(info.id, at)
        return as_json(views.session_info(made), 201)

    base = "/api/sessions/{id}"
    return [
        Route(f"{base}/layers", handled(layers)),
        Route(f"{base}/user-model/diff", handled(diff)),
        Route(f"{base}/user-model/revert", handled(revert), methods=["POST"]),
        Route(f"{base}/commits", handled(commits)),
        Route(base + "/commits/{commit:int}/trace", handled(commit_trace)),
        Route(base + "/commits/{commit:int}/window", handled(commit_window)),
        Route(base + "/turns/{turn:int}/window", handled(window)),
        Route(f"{base}/cost", handled(cost)),
        Route(f"{base}/fork", handled(fork), methods=["POST"]),
    ]
