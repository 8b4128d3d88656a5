"""A throwaway PostgreSQL server for the deployment tests.

Debian's `postgresql` package puts initdb and pg_ctl under /usr/lib/postgresql/<major>/bin,
off the PATH; both are looked for there and on the PATH. The cluster lives in a temporary
folder, listens on a free TCP port of 127.0.0.1 only, and asks for a password (scram), as a
team's server would. PostgreSQL refuses to run as root, so when the tests run as root the
server runs as Debian's `postgres` user (made by the package) through `runuser`.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SERVER_USER = "postgres"  # Debian's postgresql package creates it


@dataclass(frozen=True)
class PostgresServer:
    host: str
    port: int
    db: str
    user: str
    password: str
    folder: Path

    def env(self) -> dict[str, str]:
        """The variables deploy/dagster.yaml reads its connection from."""
        return {
            "DAGSTER_PG_HOST": self.host,
            "DAGSTER_PG_PORT": str(self.port),
            "DAGSTER_PG_DB": self.db,
            "DAGSTER_PG_USERNAME": self.user,
            "DAGSTER_PG_PASSWORD": self.password,
        }

    def connect(self):
        import psycopg2

        return psycopg2.connect(
            host=self.host, port=self.port, dbname=self.db, user=self.user, password=self.password
        )


def pg_bin() -> Path | None:
    """The folder with initdb and pg_ctl: the PATH first, then Debian's newest major version."""
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if initdb and pg_ctl and Path(initdb).resolve().parent == Path(pg_ctl).resolve().parent:
        return Path(initdb).resolve().parent
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name)
    )
    return found[-1].parent if found else None


def unavailable_reason() -> str | None:
    """Why no server can be started here, or None when one can."""
    if pg_bin() is None:
        return "PostgreSQL's initdb/pg_ctl not found (Debian: apt-get install postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SERVER_USER)
        except KeyError:
            return f"running as root and there is no {SERVER_USER!r} user to run PostgreSQL as"
        if shutil.which("runuser") is None:
            return "running as root and `runuser` is missing to start PostgreSQL as another user"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def postgres_server(db: str = "dagster") -> Iterator[PostgresServer]:
    """initdb + pg_ctl start in a temporary folder; stopped and removed on exit."""
    reason = unavailable_reason()
    if reason:
        raise RuntimeError(reason)
    bindir = pg_bin()
    folder = Path(tempfile.mkdtemp(prefix="tunesmith-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        entry = pwd.getpwnam(SERVER_USER)
        os.chown(folder, entry.pw_uid, entry.pw_gid)
        as_user = ["runuser", "-u", SERVER_USER, "--"]
    user, password = "tunesmith", secrets.token_hex(16)
    pwfile = folder / "pw"
    pwfile.write_text(password + "\n")
    if as_user:
        os.chown(pwfile, pwd.getpwnam(SERVER_USER).pw_uid, -1)

    def run(*cmd: str) -> None:
        done = subprocess.run([*as_user, *cmd], capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            log = folder / "server.log"
            extra = log.read_text() if log.exists() else ""
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stdout}{done.stderr}{extra}")

    data, port = folder / "data", free_port()
    try:
        run(
            str(bindir / "initdb"),
            "-D",
            str(data),
            "-U",
            user,
            f"--pwfile={pwfile}",
            "--auth=scram-sha-256",
            "-E",
            "UTF8",
            "--no-sync",
        )
        pwfile.unlink()
        # TCP on loopback only, no Unix socket (no shared socket folder to own); fsync off:
        # a test cluster that is thrown away needs no crash safety.
        options = (
            f"-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c fsync=off"
        )
        run(
            str(bindir / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(folder / "server.log"),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        )
        server = PostgresServer("127.0.0.1", port, db, user, password, folder)
        _create_database(server)
        yield server
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run(
                [*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
                capture_output=True,
                timeout=60,
            )
        shutil.rmtree(folder, ignore_errors=True)


def _create_database(server: PostgresServer) -> None:
    import psycopg2

    conn = psycopg2.connect(
        host=server.host,
        port=server.port,
        dbname="postgres",
        user=server.user,
        password=server.password,
    )
    conn.autocommit = True  # CREATE DATABASE cannot run inside a transaction
    with conn.cursor() as cursor:
        cursor.execute(f'CREATE DATABASE "{server.db}"')
    conn.close()
