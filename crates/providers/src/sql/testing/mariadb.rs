//! For tests and benchmarks: one private MariaDB server per process, started on first use on
//! 127.0.0.1 at a free port with a temporary data directory, and stopped by a watchdog when
//! the process exits; and, for the TLS tests, a second one that speaks only TLS, with a
//! certificate from a CA of its own (rcgen, through the function CA's code). As root it runs
//! with `--user=root` (MariaDB, unlike PostgreSQL, allows it when told), so it needs no system
//! account of its own: the same on any machine.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use oxplane_testing::Watchdog;

use super::{arm, free_port, is_root, run};

/// The password of `root@127.0.0.1`.
pub const PASSWORD: &str = "maria-Admin-Secret-7";

/// The shared server.
pub struct MariaDb {
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Its Unix socket (for the first connection as root, before a password is set).
    socket: PathBuf,
    /// What a TLS-only server's clients need, for one started by [`MariaDb::start_tls`].
    pub tls: Option<TlsMaterial>,
}

/// The PEM files of a TLS-only server's CA, and a client certificate that CA issued.
pub struct TlsMaterial {
    /// The CA that issued the server's certificate (for `127.0.0.1` and `localhost`).
    pub ca_pem: String,
    /// A client certificate of the same CA.
    pub client_cert_pem: String,
    /// Its private key.
    pub client_key_pem: String,
}

/// The first of `names` found in the usual program directories.
fn program(names: &[&str]) -> Result<PathBuf, String> {
    for name in names {
        for dir in ["/usr/sbin", "/usr/bin", "/usr/local/bin", "/usr/local/sbin"] {
            let path = Path::new(dir).join(name);
            if path.exists() {
                return Ok(path);
            }
        }
    }
    Err(format!("{} is not installed (scripts/test installs mariadb-server)", names.join(" or ")))
}

impl MariaDb {
    /// The shared server, started on first use.
    pub fn shared() -> &'static MariaDb {
        static SERVER: OnceLock<MariaDb> = OnceLock::new();
        SERVER.get_or_init(|| MariaDb::start().unwrap_or_else(|e| panic!("cannot start MariaDB: {e}")))
    }

    /// The shared TLS-only server, started on first use.
    pub fn shared_tls() -> &'static MariaDb {
        static SERVER: OnceLock<MariaDb> = OnceLock::new();
        SERVER.get_or_init(|| MariaDb::start_tls().unwrap_or_else(|e| panic!("cannot start MariaDB with TLS: {e}")))
    }

    /// Starts a private server, stopped when this process exits.
    pub fn start() -> Result<MariaDb, String> {
        let dir = tempfile::Builder::new().prefix("oxplane-mariadb-").tempdir().map_err(|e| e.to_string())?.keep();
        MariaDb::start_in(dir, Vec::new(), None)
    }

    /// Starts a private server that refuses connections without TLS
    /// (`--require-secure-transport`), its certificate issued for `127.0.0.1` and `localhost`
    /// by a CA made for it.
    pub fn start_tls() -> Result<MariaDb, String> {
        use oxplane_functions::grpc::tls::CertificateAuthority;
        let dir = tempfile::Builder::new().prefix("oxplane-mariadb-tls-").tempdir().map_err(|e| e.to_string())?.keep();
        let ca = CertificateAuthority::load_or_create(&dir.join("pki")).map_err(|e| e.to_string())?;
        let server = ca.issue_server(&["127.0.0.1".to_string(), "localhost".to_string()]).map_err(|e| e.to_string())?;
        let client = ca.client_tls(std::time::SystemTime::now()).map_err(|e| e.to_string())?;
        let write = |name: &str, pem: &str| std::fs::write(dir.join(name), pem).map_err(|e| format!("{name}: {e}"));
        write("server.crt", &server.cert_pem)?;
        write("server.key", &server.key_pem)?;
        write("ca.crt", &server.ca_pem)?;
        let args = vec![
            format!("--ssl-ca={}", dir.join("ca.crt").display()),
            format!("--ssl-cert={}", dir.join("server.crt").display()),
            format!("--ssl-key={}", dir.join("server.key").display()),
            "--require-secure-transport=ON".to_string(),
        ];
        let material = TlsMaterial { ca_pem: server.ca_pem, client_cert_pem: client.cert_pem, client_key_pem: client.key_pem };
        MariaDb::start_in(dir, args, Some(material))
    }

    /// Starts a server in `dir` with `extra` arguments.
    fn start_in(dir: PathBuf, extra: Vec<String>, tls: Option<TlsMaterial>) -> Result<MariaDb, String> {
        let data = dir.join("data");
        let socket = dir.join("mysqld.sock");
        let user: &[&str] = if is_root() { &["--user=root"] } else { &[] };
        let mut install = Command::new(program(&["mariadb-install-db", "mysql_install_db"])?);
        install
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .args(user)
            .args(["--auth-root-authentication-method=normal", "--skip-test-db"])
            // Temporary files in the server's own directory: two bootstraps at once in one
            // temporary directory take each other's temporary tables.
            .env("TMPDIR", &dir);
        run(install, "mariadb-install-db")?;
        let port = free_port()?;
        let log = std::fs::File::create(dir.join("stdout.log")).map_err(|e| e.to_string())?;
        let server = Command::new(program(&["mariadbd", "mysqld"])?)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .args(user)
            .arg(format!("--port={port}"))
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--pid-file={}", dir.join("mysqld.pid").display()))
            .arg(format!("--log-error={}", dir.join("error.log").display()))
            .args(["--skip-name-resolve", "--max-connections=500", "--innodb-buffer-pool-size=32M", "--innodb-flush-log-at-trx-commit=0"])
            .args(&extra)
            .env("TMPDIR", &dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start mariadbd: {e}"))?;
        // Stop the server when this process is gone, however it ends.
        arm(Watchdog::new().kill(server.id()).remove(&dir))?;
        let mariadb = MariaDb { port, socket, tls };
        let deadline = Instant::now() + Duration::from_secs(120);
        while mariadb.client_over_socket("SELECT 1").is_err() {
            if Instant::now() > deadline {
                return Err(format!("MariaDB did not start: {}", std::fs::read_to_string(dir.join("error.log")).unwrap_or_default()));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        // The administrator the tests log in as over TCP, with a password; no other account
        // but root on the socket (the installer also makes password-less root accounts for
        // the host's name and ::1, and maybe anonymous ones).
        mariadb.client_over_socket(&format!(
            "CREATE OR REPLACE USER 'root'@'127.0.0.1' IDENTIFIED BY '{PASSWORD}'; GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION; \
             DELETE FROM mysql.global_priv WHERE NOT (User = 'root' AND Host IN ('localhost', '127.0.0.1')) AND User <> 'mariadb.sys'; FLUSH PRIVILEGES"
        ))?;
        Ok(mariadb)
    }

    fn client_over_socket(&self, sql: &str) -> Result<String, String> {
        let out = Command::new(program(&["mariadb", "mysql"])?)
            .args(["--no-defaults", "-N", "-B", "-u", "root"])
            .arg(format!("--socket={}", self.socket.display()))
            .args(["-e", sql])
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() { Ok(String::from_utf8_lossy(&out.stdout).trim().to_string()) } else { Err(String::from_utf8_lossy(&out.stderr).into_owned()) }
    }

    /// Runs SQL with the `mariadb` client as root over TCP; the output, one row a line,
    /// columns separated by tabs.
    pub fn mysql(&self, sql: &str) -> String {
        self.mysql_as("root", PASSWORD, sql).unwrap_or_else(|e| panic!("mariadb {sql:?}: {e}"))
    }

    /// Runs SQL as `user` with `password` over TCP (over TLS to a TLS-only server).
    pub fn mysql_as(&self, user: &str, password: &str, sql: &str) -> Result<String, String> {
        let out = Command::new(program(&["mariadb", "mysql"])?)
            .args(["--no-defaults", "-N", "-B", "--protocol=TCP", "-h", "127.0.0.1", "-P", &self.port.to_string(), "-u", user, "--connect-timeout=10", "-e", sql])
            .args(if self.tls.is_some() { &["--ssl"][..] } else { &[] })
            .env("MYSQL_PWD", password)
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() { Ok(String::from_utf8_lossy(&out.stdout).trim().to_string()) } else { Err(String::from_utf8_lossy(&out.stderr).into_owned()) }
    }
}
