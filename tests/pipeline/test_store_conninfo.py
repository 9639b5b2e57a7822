"""No password in any message (issue 24.5): a `SOUL_STORE` in any form libpq accepts — a URL
with `user:pass@`, with `?password=` (its key percent-encoded or not), a `key=value` string with
quoted or escaped values — is masked in every error, the causes `--debug` prints included."""

from __future__ import annotations

import os
import subprocess
import sys
import traceback
from pathlib import Path

import postgres_server
import pytest

from soul.errors import StoreError
from soul.store import SessionStore
from soul.store.conninfo import mask_passwords, passwords

PORT = postgres_server._free_port()  # nothing listens there
PW = "S3CRETpw"

# Each: a store locator, and the password texts that must appear nowhere.
FORMS = [
    (f"postgresql://ann:{PW}@127.0.0.1:{PORT}/soul", [PW]),
    (f"postgres://ann:{PW}@127.0.0.1:{PORT},127.0.0.1:{PORT}/soul", [PW]),
    (f"postgresql://ann@127.0.0.1:{PORT}/soul?password={PW}", [PW]),
    (f"postgresql://ann@127.0.0.1:{PORT}/soul?sslmode=disable&password={PW}&connect_timeout=2", [PW]),
    (f"postgresql://ann@127.0.0.1:{PORT}/soul?pass%77ord={PW}", [PW]),
    (f"postgresql://ann@127.0.0.1:{PORT}/soul?sslpassword={PW}", [PW]),
    (f"postgresql://ann:{PW}%zz@127.0.0.1:{PORT}/soul", [PW]),  # libpq quotes the bad token
    (f"postgresql://ann@127.0.0.1:{PORT}/soul?password={PW}%zz", [PW]),
    (f"postgresql://ann:{PW}@[::1/soul", [PW]),  # libpq quotes the whole URL
    (f"postgresql://ann:S3%43RETpw@127.0.0.1:{PORT}/soul", ["S3%43RETpw", "S3CRETpw"]),
    ("postgresql://ann:Zq9@127.0.0.1:1/soul", ["Zq9"]),  # too short to be a known secret
    (f"password={PW} host=127.0.0.1 port={PORT}", [PW]),
    (f"host=127.0.0.1 password = 'S3CRET pw' port={PORT}", ["S3CRET pw", "S3CRET"]),
    (f"host=127.0.0.1 password='it\\'s {PW}' port={PORT}", [PW]),
    (f"password=S3CRET\\ pw host=127.0.0.1 port={PORT}", ["S3CRET"]),
    (f"sslpassword={PW} host=127.0.0.1", [PW]),
]
# the ids name the port PORT: a test's id must not change between collections (pytest-xdist's
# workers each collect the suite and refuse ids that differ)
IDS = [locator.replace(str(PORT), "PORT") for locator, _ in FORMS]


@pytest.mark.parametrize(("locator", "hidden"), FORMS, ids=IDS)
def test_masked_hides_every_form_of_password(locator: str, hidden: list[str]) -> None:
    shown = mask_passwords(locator)
    assert not any(h in shown for h in hidden), shown
    assert "***" in shown


def test_masked_keeps_the_rest_of_the_locator() -> None:
    assert mask_passwords("postgresql://ann:pw@db.example:5432/soul?sslmode=require&password=x") == (
        "postgresql://ann:***@db.example:5432/soul?sslmode=require&password=***"
    )
    assert mask_passwords("host=db password='a b' port=5432") == "host=db password=*** port=5432"
    assert mask_passwords("no locator here, password-free") == "no locator here, password-free"


def test_passwords_finds_raw_and_decoded_values() -> None:
    assert set(passwords("postgresql://ann:S3%43R@h/db?password=x%41y")) >= {"S3%43R", "S3CR", "x%41y", "xAy"}
    assert "it's" in passwords("password='it\\'s' host=h")


def test_masked_blanks_a_known_password_quoted_alone() -> None:
    # libpq's "invalid percent-encoded token" quotes the password without its key
    message = f'invalid percent-encoded token: "{PW}%zz"'
    assert PW not in mask_passwords(message, f"postgresql://ann:{PW}%zz@h/db")


@pytest.mark.parametrize(("locator", "hidden"), FORMS, ids=IDS)
def test_opening_the_store_never_shows_the_password(locator: str, hidden: list[str], tmp_path: Path) -> None:
    with pytest.raises(StoreError) as caught:
        SessionStore.open(tmp_path, url=locator)
    chain = "".join(traceback.format_exception(caught.value))  # what --debug prints, causes included
    assert not any(h in chain for h in hidden), chain


@pytest.mark.parametrize(("locator", "hidden"), [FORMS[i] for i in (3, 6, 10, 12, 14)],
                         ids=[IDS[i] for i in (3, 6, 10, 12, 14)])
def test_soul_debug_prints_no_password(locator: str, hidden: list[str], tmp_path: Path) -> None:
    env = {**os.environ, "SOUL_STORE": locator, "SOUL_HOME": str(tmp_path)}
    for debug in ([], ["--debug"]):
        done = subprocess.run(
            [sys.executable, "-m", "soul.cli.main", *debug, "sessions", "list"],
            capture_output=True, text=True, env=env, timeout=60, check=False,
        )
        assert done.returncode != 0
        assert "Traceback" in done.stderr if debug else "soul: error:" in done.stderr
        assert not any(h in done.stderr + done.stdout for h in hidden), done.stderr


def test_the_store_password_in_the_environment_is_a_secret_every_redaction_blanks(monkeypatch: pytest.MonkeyPatch) -> None:
    # Messages that never pass through the store's own errors (a worker launching DBOS on the
    # URL, a traceback printed by --debug) are redacted: the password is blanked there too.
    from soul.store import REDACTED, redact

    monkeypatch.setenv("SOUL_STORE", f"postgresql://ann@db/soul?pass%77ord={PW}")
    assert redact(f"DBOS could not connect with {PW}") == f"DBOS could not connect with {REDACTED}"
