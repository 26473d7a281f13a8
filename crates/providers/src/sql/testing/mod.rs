//! For tests and benchmarks: one private database server per process, started on first use
//! on 127.0.0.1 at a free port with a temporary data directory, and stopped by a watchdog
//! when the process exits. PostgreSQL here; MariaDB in `mariadb.rs`. `shared()` panics when
//! the server cannot start: it is test support only.

pub mod mariadb;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use oxplane_testing::Watchdog;

/// The superuser's password.
pub const PASSWORD: &str = "pg-admin-Secret-42";

/// The shared server.
pub struct Postgres {
    /// Its port on 127.0.0.1.
    pub port: u16,
}

/// The server directory of the installed PostgreSQL: `pg_config --bindir`, else the newest
/// Debian `/usr/lib/postgresql/<version>/bin`.
fn bindir() -> Result<PathBuf, String> {
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output()
        && out.status.success()
    {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if dir.join("initdb").exists() {
            return Ok(dir);
        }
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|_| "PostgreSQL server binaries are not installed (scripts/test installs postgresql)".to_string())?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("initdb").exists())
        .collect();
    versions.sort_by_key(|p| p.parent().and_then(|v| v.file_name()).and_then(|v| v.to_str()).and_then(|v| v.parse::<u32>().ok()).unwrap_or(0));
    versions.pop().ok_or_else(|| "no PostgreSQL server binaries found".to_string())
}

/// Whether this process runs as root (servers then run as their own system user, or are
/// told that root is meant).
fn is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0").unwrap_or(false)
}

/// Gives `dir` and everything in it to `user`.
fn chown(dir: &Path, user: &str) -> Result<(), String> {
    let mut command = Command::new("chown");
    command.args(["-R", &format!("{user}:{user}")]).arg(dir);
    run(command, "chown")
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

/// A TCP port nothing listens on at the moment.
fn free_port() -> Result<u16, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("cannot find a free port: {e}"))?;
    listener.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

/// Runs `command` to its end; an error with its output when it fails.
fn run(mut command: Command, what: &str) -> Result<(), String> {
    let out = command.output().map_err(|e| format!("{what}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{what} failed: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    }
}

/// Arms `watchdog`, which stops a server however this process ends.
fn arm(watchdog: Watchdog) -> Result<(), String> {
    watchdog.arm().map_err(|e| format!("cannot start the watchdog: {e}"))
}

impl Postgres {
    /// The shared server, started on first use.
    pub fn shared() -> &'static Postgres {
        static SERVER: OnceLock<Postgres> = OnceLock::new();
        SERVER.get_or_init(|| Postgres::start().unwrap_or_else(|e| panic!("cannot start PostgreSQL: {e}")))
    }

    /// Starts a private server, stopped when this process exits.
    pub fn start() -> Result<Postgres, String> {
        let bin = bindir()?;
        let dir = tempfile::Builder::new().prefix("oxplane-pg-").tempdir().map_err(|e| e.to_string())?.keep();
        let data = dir.join("data");
        std::fs::write(dir.join("pwfile"), PASSWORD).map_err(|e| e.to_string())?;
        if is_root() {
            chown(&dir, "postgres")?;
        }
        let mut initdb = as_postgres(&bin.join("initdb"));
        initdb
            .arg("-D")
            .arg(&data)
            .args(["-U", "postgres", "--auth-host=scram-sha-256", "--auth-local=trust", "--encoding=UTF8", "--locale=C"])
            .arg(format!("--pwfile={}", dir.join("pwfile").display()));
        run(initdb, "initdb")?;
        let port = free_port()?;
        let mut pg_ctl = as_postgres(&bin.join("pg_ctl"));
        pg_ctl
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(dir.join("log"))
            .arg("-o")
            .arg(format!("-p {port} -c listen_addresses=127.0.0.1 -k {} -c fsync=off -c max_connections=300", dir.display()))
            .args(["-w", "-t", "120", "start"]);
        run(pg_ctl, "pg_ctl start")?;
        // Stop the server when this process is gone, however it ends.
        let stop = as_postgres(&bin.join("pg_ctl"));
        let mut args: Vec<std::ffi::OsString> = stop.get_args().map(ToOwned::to_owned).collect();
        args.extend(["-D".into(), data.into_os_string(), "-m".into(), "immediate".into(), "stop".into()]);
        arm(Watchdog::new().run(stop.get_program(), args).remove(&dir))?;
        Ok(Postgres { port })
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
