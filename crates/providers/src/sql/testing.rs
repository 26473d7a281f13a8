//! For tests: one private PostgreSQL server per test process, started on first use on
//! 127.0.0.1 at a free port with a temporary data directory (as the `postgres` user when the
//! tests run as root, since PostgreSQL refuses to run as root), and stopped by a watchdog
//! when the process exits. Panics when it cannot start: it is test support only.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The superuser's password.
pub const PASSWORD: &str = "pg-admin-Secret-42";

/// The shared server.
pub struct Postgres {
    /// Its port on 127.0.0.1.
    pub port: u16,
}

/// The server directory of the installed PostgreSQL: `pg_config --bindir`, else the newest
/// Debian `/usr/lib/postgresql/<version>/bin`.
fn bindir() -> PathBuf {
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output()
        && out.status.success()
    {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if dir.join("initdb").exists() {
            return dir;
        }
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL server binaries are not installed (scripts/test installs postgresql)")
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("initdb").exists())
        .collect();
    versions.sort_by_key(|p| p.parent().and_then(|v| v.file_name()).and_then(|v| v.to_str()).and_then(|v| v.parse::<u32>().ok()).unwrap_or(0));
    versions.pop().expect("no PostgreSQL server binaries found")
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0").unwrap_or(false)
}

/// A command run as the `postgres` user when we are root.
fn as_postgres(program: &Path) -> Command {
    if is_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn run(mut command: Command, what: &str) {
    let out = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(out.status.success(), "{what} failed: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

impl Postgres {
    /// The shared server, started on first use.
    pub fn shared() -> &'static Postgres {
        static SERVER: OnceLock<Postgres> = OnceLock::new();
        SERVER.get_or_init(Postgres::start)
    }

    fn start() -> Postgres {
        let bin = bindir();
        let dir = tempfile::Builder::new().prefix("oxplane-pg-").tempdir().unwrap().keep();
        let data = dir.join("data");
        std::fs::write(dir.join("pwfile"), PASSWORD).unwrap();
        if is_root() {
            run(
                {
                    let mut c = Command::new("chown");
                    c.args(["-R", "postgres:postgres"]).arg(&dir);
                    c
                },
                "chown",
            );
        }
        let mut initdb = as_postgres(&bin.join("initdb"));
        initdb
            .arg("-D")
            .arg(&data)
            .args(["-U", "postgres", "--auth-host=scram-sha-256", "--auth-local=trust", "--encoding=UTF8", "--locale=C"])
            .arg(format!("--pwfile={}", dir.join("pwfile").display()));
        run(initdb, "initdb");
        let port = free_port();
        let mut pg_ctl = as_postgres(&bin.join("pg_ctl"));
        pg_ctl
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(dir.join("log"))
            .arg("-o")
            .arg(format!("-p {port} -c listen_addresses=127.0.0.1 -k {} -c fsync=off -c max_connections=300", dir.display()))
            .args(["-w", "-t", "120", "start"]);
        run(pg_ctl, "pg_ctl start");
        // Stop the server when this process is gone, however it ends.
        let stop = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; {runas} {pg_ctl} -D {data} -m immediate stop >/dev/null 2>&1; rm -rf {dir}",
            pid = std::process::id(),
            runas = if is_root() { "runuser -u postgres --" } else { "" },
            pg_ctl = bin.join("pg_ctl").display(),
            data = data.display(),
            dir = dir.display(),
        );
        Command::new("setsid").args(["sh", "-c", &stop]).stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().unwrap();
        Postgres { port }
    }

    /// Runs SQL with `psql` as the superuser in `database`; the output, one row a line,
    /// columns separated by `|`.
    pub fn psql(&self, database: &str, sql: &str) -> String {
        self.psql_as("postgres", PASSWORD, database, sql).unwrap_or_else(|e| panic!("psql {sql:?}: {e}"))
    }

    /// Runs SQL as `user` with `password`.
    pub fn psql_as(&self, user: &str, password: &str, database: &str, sql: &str) -> Result<String, String> {
        let out = Command::new("psql")
            .args(["-XAtq", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", user, "-d", database, "-c", sql])
            .env("PGPASSWORD", password)
            .env("PGCONNECT_TIMEOUT", "10")
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() { Ok(String::from_utf8_lossy(&out.stdout).trim().to_string()) } else { Err(String::from_utf8_lossy(&out.stderr).into_owned()) }
    }
}
