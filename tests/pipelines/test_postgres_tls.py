"""The ledger and the state store on a PostgreSQL server that takes only TLS with a password (docs/security.md,
"PostgreSQL"): ``sslmode=verify-full`` against the CA that signed the server's certificate, the password from
``PGPASSWORD`` and never printed; a server whose certificate another CA signed, or a connection without TLS, is
refused in one line. The server is a real one (``tests.support.postgres.postgres_tls``, its certificates made
here). Deterministic: no false-failure probability to state."""
from __future__ import annotations

import json

import psycopg
import pytest

from pipelines.aggregate import main as aggregate_main
from tests.support.aggregatable_reports import NOW, record, shared_info, write_avro
from tests.support.keys import run_key
from tests.support.postgres import TlsPostgres
from transforms.core.durable.store import StepWrite, StoreUnavailable
from transforms.core.durable.stores import open_store
from transforms.summary_reports.ledger import LedgerConfigError, LedgerLimits, open_ledger

LIMITS = LedgerLimits.from_epsilon(64, 1)
UNIT = ("ab" * 32, 480_000)


@pytest.fixture
def password(postgres_tls: TlsPostgres, monkeypatch) -> str:
    monkeypatch.setenv("PGPASSWORD", postgres_tls.password)
    return postgres_tls.password


def test_the_ledger_charges_over_verified_tls(postgres_tls: TlsPostgres, password: str) -> None:
    with open_ledger(postgres_tls.url(), LIMITS) as ledger:
        assert ledger.charge("tls-job", 10, [UNIT], run_key().key_id).status == "charged"
    with psycopg.connect(postgres_tls.url()) as conn:  # what the server saw: an encrypted session
        assert conn.execute("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").fetchone() == (True,)
        assert conn.execute("SELECT used_units FROM ledger_units").fetchall() == [(10,)]


def test_a_server_another_ca_signed_and_a_session_without_tls_are_refused(postgres_tls: TlsPostgres,
                                                                           password: str) -> None:
    with pytest.raises(LedgerConfigError, match="certificate verify failed") as error:
        open_ledger(postgres_tls.url(postgres_tls.stranger_ca_file), LIMITS)
    assert "\n" not in str(error.value).strip()
    with pytest.raises(LedgerConfigError, match="no encryption|reject"):
        open_ledger(f"postgresql://postgres@{postgres_tls.host}:{postgres_tls.port}/postgres?sslmode=disable", LIMITS)


def test_a_password_in_the_url_is_never_shown(postgres_tls: TlsPostgres, monkeypatch) -> None:
    monkeypatch.delenv("PGPASSWORD", raising=False)
    secret_url = postgres_tls.url(postgres_tls.stranger_ca_file).replace("postgres@", f"postgres:{postgres_tls.password}@")
    with pytest.raises(LedgerConfigError) as ledger_error:
        open_ledger(secret_url, LIMITS)
    with pytest.raises(StoreUnavailable) as store_error:
        open_store(secret_url, run_key())
    for error in (ledger_error, store_error):
        assert postgres_tls.password not in str(error.value) and "***" in str(error.value)


def test_the_state_store_keeps_a_job_over_verified_tls(postgres_tls: TlsPostgres, password: str) -> None:
    from schemas.proto import state_pb2

    store = open_store(postgres_tls.url(), run_key())
    try:
        store.claim("tls-job", "kanon", run_key().key_id).release()
        store.save("tls-job", "verdicts", StepWrite(state_pb2.StepSnapshot(version=3), {"k/group": b"state"}))
        assert store.load("tls-job", "verdicts").keys == {"k/group": b"state"}
    finally:
        store.close()


def test_an_aggregation_job_with_a_tls_ledger_never_prints_its_password(postgres_tls: TlsPostgres, password: str,
                                                                        tmp_path, capsys) -> None:
    reports = write_avro(str(tmp_path / "r.avro"), [record(shared_info(0), [(1, 5, 0)])])
    output = tmp_path / "out"
    status = aggregate_main(["--reports", reports, "--output", str(output), "--now", str(NOW), "--mode",
                             "key-discovery", "--ledger", postgres_tls.url(), "--job-id", "tls-aggregation"])
    printed = capsys.readouterr()
    assert status == 0, printed
    summary = json.loads((output / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["receipt"]["charge"] == "charged"
    assert summary["parameters"]["noise_key"]["key_id"] == run_key().key_id
    assert all(password not in text for text in (printed.out, printed.err, json.dumps(summary)))
