"""Two processes talking on the same data home at once: nothing lost, nothing corrupted."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from souls import claudius_reply

WORKER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {tests!r})
    from souls import claudius_reply
    import soul
    from soul.providers.scripted import ScriptedProvider

    home, user, turns = sys.argv[1], sys.argv[2], int(sys.argv[3])
    s = soul.load("claudius", provider=ScriptedProvider([claudius_reply(f"reply {{i}}", check="false") + "<soul_state_check>false</soul_state_check>" for i in range(turns)]), home=home)
    session = s.session(user=user)
    for i in range(turns):
        assert session.turn_sync(f"{{user}} message {{i}}").reply == f"reply {{i}}"
    print(session.id)
    """
)


def test_two_processes_run_sessions_on_one_home(tmp_path: Path, soul_home: Path) -> None:
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER.format(tests=str(Path(__file__).parent)))
    turns = 15
    procs = [
        subprocess.Popen([sys.executable, str(worker), str(soul_home), user, str(turns)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for user in ("ada", "bo")
    ]
    ids = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        ids.append(out.strip())
    db = sqlite3.connect(soul_home / "soul.db")
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    import soul
    from soul.providers.scripted import ScriptedProvider

    s = soul.load("claudius", provider=ScriptedProvider([claudius_reply()]), home=soul_home)
    for sid, user in zip(ids, ("ada", "bo"), strict=True):
        info = s.store.session(sid)
        assert info.turns == turns and info.user == user
        said = [r.content for _, r, _ in s.store.messages(sid, layer="external") if r.tag == "user"]
        assert said == [f"{user} message {i}" for i in range(turns)]
