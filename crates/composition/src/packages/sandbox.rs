//! The network of a package process: a network namespace of its own, as a pod has, so that
//! processes binding the same fixed ports (controller-runtime's `:8080` metrics, `9443`
//! webhooks) never collide, and nothing of one is reachable from another except through the
//! ports oxplane forwards.
//!
//! A [`Sandbox`] is a namespace made by a thread of oxplane's that moved into it
//! (`unshare(CLONE_NEWNET)`) and stays there to open sockets inside it on request, its
//! loopback brought up. The process joins it before exec (`setns` in [`Sandbox::join`]). Inside
//! it, as in a pod:
//! - the API server is at the address the kubeconfig names, `127.0.0.1:PORT`: a listener
//!   inside the namespace forwards each connection to oxplane's API server outside (TLS goes
//!   through untouched, so the process verifies oxplane's certificate itself);
//! - the process's server on `9443` (a provider's webhooks, a function's gRPC) is reached
//!   through a local port outside (the one a provider's Service is annotated with, a function's
//!   endpoint), forwarded into the namespace;
//! - the rest of the network through `slirp4netns` (the user-mode network rootless containers
//!   use): outbound connections leave through oxplane's own network stack, and the host's
//!   loopback answers at `10.0.2.2`; a host whose resolver is on its loopback (systemd-resolved's
//!   `127.0.0.53`) has the process see a `resolv.conf` naming slirp4netns' DNS forwarder
//!   (`10.0.2.3`, which asks the host's resolver) instead, in a mount namespace of its own.
//!
//! Written with libc rather than a crate: no maintained crate makes a namespace from a thread
//! and opens sockets in it, which this needs (the process must find its listeners ready the
//! moment it starts, and oxplane must connect into the namespace while staying outside it).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

/// The port a provider's webhook server or a function's gRPC server listens on (inside its
/// namespace): Crossplane's `webhook` and `grpc` container and Service ports, and the SDKs'
/// default.
pub(super) const WEBHOOK_PORT: u16 = 9443;
/// Where in-cluster clients (client-go's `InClusterConfig`) read their ServiceAccount's
/// `token`, `ca.crt` and `namespace`.
pub const IN_CLUSTER_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The resolver configuration of the host.
const RESOLV_CONF: &str = "/etc/resolv.conf";
/// slirp4netns' DNS forwarder, as seen from inside the namespace.
const UPLINK_DNS: &str = "10.0.2.3";

/// The resolver configuration a process in the namespace needs, given the host's: `None` when
/// the host's serves as it is; when every nameserver is on the host's loopback (unreachable
/// from the namespace), the same with slirp4netns' forwarder named instead.
fn resolv_conf_inside(host: &str) -> Option<String> {
    let nameserver = |line: &str| line.split_whitespace().collect::<Vec<_>>().as_slice().first() == Some(&"nameserver");
    let servers: Vec<std::net::IpAddr> = host.lines().filter(|l| nameserver(l)).filter_map(|l| l.split_whitespace().nth(1)?.parse().ok()).collect();
    if servers.is_empty() || !servers.iter().all(std::net::IpAddr::is_loopback) {
        return None;
    }
    let mut inside: Vec<String> = vec![format!("nameserver {UPLINK_DNS}")];
    inside.extend(host.lines().filter(|l| !nameserver(l)).map(str::to_string));
    Some(inside.join("\n") + "\n")
}

/// The user-mode network program giving a namespace its outbound network.
const UPLINK: &str = "slirp4netns";

/// What the thread living in a namespace does for oxplane.
enum Request {
    /// Connect to an address as seen from inside the namespace.
    Connect(SocketAddr, mpsc::Sender<std::io::Result<TcpStream>>),
    /// Listen on an address inside the namespace.
    Listen(SocketAddr, mpsc::Sender<std::io::Result<TcpListener>>),
}

/// A network namespace of one package process, with its forwarded ports and uplink. Dropping
/// it stops the forwarding and the uplink; the namespace goes with the last process in it.
pub struct Sandbox {
    /// The namespace, for processes to join.
    namespace: OwnedFd,
    /// Requests to the thread inside the namespace; dropped, the thread ends.
    requests: mpsc::Sender<Request>,
    /// The forwarding tasks.
    forwarders: Vec<tokio::task::JoinHandle<()>>,
    /// The slirp4netns process.
    _uplink: tokio::process::Child,
    /// Files the process sees in place of the host's: (ours, the path it sees it at).
    mounts: Vec<(PathBuf, PathBuf)>,
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        for forwarder in &self.forwarders {
            forwarder.abort();
        }
    }
}

/// Why package processes share oxplane's network instead, when they must: `None` when this
/// machine can give them namespaces of their own (the privilege to make one, and slirp4netns
/// for their outbound network).
pub fn unavailable() -> Option<String> {
    // Found out once per process: the provider and function runtimes both ask at start.
    static FOUND: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    FOUND.get_or_init(find_unavailable).clone()
}

fn find_unavailable() -> Option<String> {
    if which(UPLINK).is_none() {
        return Some(format!("{UPLINK} is not installed (it gives a process's own network namespace its outbound network)"));
    }
    match std::thread::spawn(|| enter_new_namespace().map(drop)).join() {
        Ok(Ok(())) => None,
        Ok(Err(error)) => Some(format!("cannot make a network namespace: {error}")),
        Err(_) => Some("cannot make a network namespace".to_string()),
    }
}

/// The path of `program` on `PATH`.
fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|path| std::env::split_paths(&path).map(|dir| dir.join(program)).find(|p| p.is_file()))
}

impl Sandbox {
    /// Makes a namespace whose `127.0.0.1:9443` is reached from `127.0.0.1:outside_port`
    /// outside and, given `api` (oxplane's API server on the loopback), whose `127.0.0.1:PORT`
    /// of the same port reaches it, with its uplink ready. Must be called within a Tokio runtime.
    /// `dir` keeps the files the process sees in place of the host's.
    pub async fn create(api: Option<SocketAddr>, outside_port: u16, dir: &std::path::Path) -> Result<Sandbox, String> {
        let (requests, serve) = mpsc::channel::<Request>();
        let (made, namespace) = mpsc::channel();
        std::thread::Builder::new()
            .name("package-netns".into())
            .spawn(move || match enter_new_namespace() {
                Ok(entered) => {
                    let _ = made.send(Ok(entered));
                    serve_requests(serve);
                }
                Err(error) => {
                    let _ = made.send(Err(error));
                }
            })
            .map_err(|e| format!("cannot start the network namespace's thread: {e}"))?;
        let (namespace, path) = tokio::task::spawn_blocking(move || namespace.recv())
            .await
            .map_err(|e| format!("cannot make a network namespace: {e}"))?
            .map_err(|_| "cannot make a network namespace".to_string())?
            .map_err(|e| format!("cannot make a network namespace: {e}"))?;
        let uplink = start_uplink(&path).await?;
        let mut mounts = Vec::new();
        if let Some(resolv_conf) = std::fs::read_to_string(RESOLV_CONF).ok().as_deref().and_then(resolv_conf_inside) {
            let ours = dir.join("resolv.conf");
            std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&ours, resolv_conf)).map_err(|e| format!("cannot write {}: {e}", ours.display()))?;
            mounts.push((ours, PathBuf::from(RESOLV_CONF)));
        }
        let mut sandbox = Sandbox { namespace, requests, forwarders: Vec::new(), _uplink: uplink, mounts };

        if let Some(api) = api {
            let inside = sandbox.listen(SocketAddr::from(([127, 0, 0, 1], api.port()))).await?;
            sandbox.forwarders.push(tokio::spawn(forward(inside, move || async move { tokio::net::TcpStream::connect(api).await })));
        }
        let outside = listen_outside(outside_port).await?;
        let into = sandbox.requests.clone();
        sandbox.forwarders.push(tokio::spawn(forward(outside, move || {
            let into = into.clone();
            async move { connect_inside(&into, SocketAddr::from(([127, 0, 0, 1], WEBHOOK_PORT))).await }
        })));
        Ok(sandbox)
    }

    /// The files a process in the namespace sees in place of the host's: (ours, its path).
    pub fn mounts(&self) -> Vec<(PathBuf, PathBuf)> {
        self.mounts.clone()
    }

    /// The namespace's file descriptor, which a process joins with [`Sandbox::join`] before exec.
    pub fn fd(&self) -> i32 {
        self.namespace.as_raw_fd()
    }

    /// Moves the calling thread into the namespace `fd`: for a forked child before exec, so it
    /// does only the one async-signal-safe system call.
    #[allow(unsafe_code)]
    pub fn join(fd: i32) -> std::io::Result<()> {
        // SAFETY: setns(2) takes plain integers and touches no memory of ours.
        if unsafe { libc::setns(fd, libc::CLONE_NEWNET) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Gives the calling thread a mount namespace of its own in which each `(source, target)`
    /// is seen, read-only, at `target` (which must exist), as a pod sees its ServiceAccount's
    /// token: for a forked child before exec, so it makes only system calls, allocating
    /// nothing. Mounts of the host still reach the namespace; its own never leave it.
    #[allow(unsafe_code)]
    pub fn mount_at(mounts: &[(std::ffi::CString, std::ffi::CString)]) -> std::io::Result<()> {
        let check = |result: libc::c_int| if result == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) };
        let none = std::ptr::null::<libc::c_char>();
        // SAFETY: unshare(2) and mount(2) take plain flags and NUL-terminated strings that
        // outlive the calls (or null where the call takes none).
        unsafe {
            check(libc::unshare(libc::CLONE_NEWNS))?;
            check(libc::mount(none, c"/".as_ptr(), none, libc::MS_REC | libc::MS_SLAVE, std::ptr::null()))?;
            for (source, target) in mounts {
                check(libc::mount(source.as_ptr(), target.as_ptr(), none, libc::MS_BIND, std::ptr::null()))?;
                check(libc::mount(none, target.as_ptr(), none, libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY, std::ptr::null()))?;
            }
        }
        Ok(())
    }

    async fn listen(&self, address: SocketAddr) -> Result<tokio::net::TcpListener, String> {
        let (reply, answer) = mpsc::channel();
        self.requests.send(Request::Listen(address, reply)).map_err(|_| "the network namespace's thread ended".to_string())?;
        let listener = tokio::task::spawn_blocking(move || answer.recv())
            .await
            .map_err(|e| e.to_string())?
            .map_err(|_| "the network namespace's thread ended".to_string())?
            .map_err(|e| format!("cannot listen on {address} in the network namespace: {e}"))?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        tokio::net::TcpListener::from_std(listener).map_err(|e| e.to_string())
    }
}

/// Listens on `127.0.0.1:port`, waiting a while for the sandbox of the process's previous
/// start to let it go (its process may take its grace period to stop).
async fn listen_outside(port: u16) -> Result<tokio::net::TcpListener, String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
            Ok(listener) => return Ok(listener),
            Err(error) if error.kind() == std::io::ErrorKind::AddrInUse && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => return Err(format!("cannot listen on 127.0.0.1:{port}: {error}")),
        }
    }
}

/// A connection to `address` inside the namespace served by `requests`.
async fn connect_inside(requests: &mpsc::Sender<Request>, address: SocketAddr) -> std::io::Result<tokio::net::TcpStream> {
    let (reply, answer) = mpsc::channel();
    requests.send(Request::Connect(address, reply)).map_err(|_| std::io::Error::other("the network namespace's thread ended"))?;
    let stream = tokio::task::spawn_blocking(move || answer.recv())
        .await
        .map_err(std::io::Error::other)?
        .map_err(|_| std::io::Error::other("the network namespace's thread ended"))??;
    stream.set_nonblocking(true)?;
    tokio::net::TcpStream::from_std(stream)
}

/// Accepts on `listener` and copies each connection both ways to one `connect` opens.
async fn forward<C, F>(listener: tokio::net::TcpListener, connect: C)
where
    C: Fn() -> F + Send + 'static,
    F: std::future::Future<Output = std::io::Result<tokio::net::TcpStream>> + Send + 'static,
{
    loop {
        let Ok((mut accepted, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let connecting = connect();
        tokio::spawn(async move {
            match connecting.await {
                Ok(mut target) => {
                    let _ = tokio::io::copy_bidirectional(&mut accepted, &mut target).await;
                }
                // The caller sees its connection closed, as it would see a refused one.
                Err(error) => tracing::debug!(%error, "cannot forward a connection"),
            }
        });
    }
}

/// Moves the calling thread into a new network namespace with its loopback up: the namespace
/// (a descriptor) and its path in `/proc` for other programs.
#[allow(unsafe_code)]
fn enter_new_namespace() -> std::io::Result<(OwnedFd, PathBuf)> {
    // SAFETY: unshare(2) with a flag changes only this thread's namespace.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    loopback_up()?;
    // SAFETY: gettid(2) takes nothing and cannot fail.
    let thread = unsafe { libc::gettid() };
    let path = PathBuf::from(format!("/proc/{}/task/{thread}/ns/net", std::process::id()));
    let file = std::fs::File::open(&path)?;
    Ok((OwnedFd::from(file), path))
}

/// Brings up `lo` in the calling thread's network namespace (a new one has it down).
#[allow(unsafe_code)]
fn loopback_up() -> std::io::Result<()> {
    // SAFETY: socket(2) returns a new descriptor we own, closed by OwnedFd.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: raw is a descriptor just made and owned by nobody else.
    let socket = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: ifreq is plain data, valid zeroed; the ioctls read and write only it.
    unsafe {
        let mut request: libc::ifreq = std::mem::zeroed();
        for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo\0") {
            *slot = *byte as libc::c_char;
        }
        if libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFFLAGS as _, &mut request) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(socket.as_raw_fd(), libc::SIOCSIFFLAGS as _, &request) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The namespace thread's loop: opens sockets inside its namespace until the sandbox is dropped.
fn serve_requests(requests: mpsc::Receiver<Request>) {
    for request in requests {
        match request {
            Request::Connect(address, reply) => {
                let _ = reply.send(TcpStream::connect_timeout(&address, Duration::from_secs(5)));
            }
            Request::Listen(address, reply) => {
                let _ = reply.send(TcpListener::bind(address));
            }
        }
    }
}

/// Starts slirp4netns on the namespace at `path` and waits until it has configured it (its
/// tap device up, routes and the host's loopback at 10.0.2.2).
#[allow(unsafe_code)]
async fn start_uplink(path: &std::path::Path) -> Result<tokio::process::Child, String> {
    let (mut ready, ready_writer) = std::io::pipe().map_err(|e| format!("cannot make a pipe: {e}"))?;
    let writer_fd = ready_writer.as_raw_fd();
    let mut command = tokio::process::Command::new(UPLINK);
    command
        .args(["--configure", "--mtu=65520", "--netns-type=path", "--ready-fd"])
        .arg(writer_fd.to_string())
        .arg(path)
        .arg("tap0")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    // SAFETY: the closure runs in the forked child before exec, calling only fcntl(2) and
    // prctl(2) (async-signal-safe) and allocating nothing: the ready pipe is kept open across
    // exec, and the kernel kills slirp4netns when oxplane dies.
    unsafe {
        command.pre_exec(move || {
            if libc::fcntl(writer_fd, libc::F_SETFD, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            super::process::die_with_parent()
        });
    }
    let mut child = command.spawn().map_err(|e| format!("cannot start {UPLINK}: {e}"))?;
    drop(ready_writer);
    let waited = tokio::task::spawn_blocking(move || {
        use std::io::Read;
        let mut byte = [0u8; 1];
        ready.read(&mut byte).map(|n| n == 1)
    });
    match tokio::time::timeout(Duration::from_secs(10), waited).await {
        Ok(Ok(Ok(true))) => Ok(child),
        _ => {
            let _ = child.start_kill();
            let output = child.wait_with_output().await.map(|o| String::from_utf8_lossy(&o.stderr).trim().to_string()).unwrap_or_default();
            Err(format!("{UPLINK} did not configure the network namespace: {output}"))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Where slirp4netns makes the host's loopback reachable from inside the namespace.
    const HOST_LOOPBACK: &str = "10.0.2.2";

    #[test]
    fn a_loopback_resolver_is_replaced_by_the_uplinks() {
        let systemd = "# managed\nnameserver 127.0.0.53\noptions edns0 trust-ad\nsearch example.org\n";
        assert_eq!(resolv_conf_inside(systemd).as_deref(), Some("nameserver 10.0.2.3\n# managed\noptions edns0 trust-ad\nsearch example.org\n"));
        assert_eq!(resolv_conf_inside("nameserver ::1\n").as_deref(), Some("nameserver 10.0.2.3\n"));
        assert_eq!(resolv_conf_inside("nameserver 10.255.255.53\n"), None, "reachable through the uplink as it is");
        assert_eq!(resolv_conf_inside("nameserver 127.0.0.1\nnameserver 192.0.2.1\n"), None, "one reachable server is enough");
        assert_eq!(resolv_conf_inside(""), None);
    }

    /// A process with mounts sees our file at the path, read-only; the host still sees its own.
    #[tokio::test]
    async fn a_mounted_file_is_seen_by_the_process_only() {
        let dir = tempfile::tempdir().unwrap();
        let (ours, theirs) = (dir.path().join("ours"), dir.path().join("theirs"));
        std::fs::write(&ours, "ours\n").unwrap();
        std::fs::write(&theirs, "the host's\n").unwrap();
        let c = |p: &std::path::Path| std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        let mounts = vec![(c(&ours), c(&theirs))];
        let mut command = tokio::process::Command::new("sh");
        command.arg("-c").arg(format!("cat {0}; echo changed > {0} || echo read-only", theirs.display())).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::null());
        // SAFETY: Sandbox::mount_at makes only system calls.
        #[allow(unsafe_code)]
        unsafe {
            command.pre_exec(move || Sandbox::mount_at(&mounts));
        }
        let output = command.output().await.unwrap();
        assert_eq!(String::from_utf8_lossy(&output.stdout), "ours\nread-only\n");
        assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "the host's\n");
        assert_eq!(std::fs::read_to_string(&ours).unwrap(), "ours\n");
    }

    /// A process in the sandbox reaches the forwarded API port, serves on the webhook port
    /// (reached from outside), binds a port that is taken outside, and reaches the host's
    /// loopback through the uplink.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_sandbox_forwards_its_ports_and_keeps_its_own() {
        assert_eq!(unavailable(), None, "scripts/test installs slirp4netns; the tests run with the privilege to make namespaces");
        let api = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let api_address = api.local_addr().unwrap();
        let webhook_port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let dir = tempfile::tempdir().unwrap();
        let sandbox = Sandbox::create(Some(api_address), webhook_port, dir.path()).await.unwrap();

        let fd = sandbox.fd();
        let taken = api_address.port();
        let script = format!(
            "exec 3<>/dev/tcp/127.0.0.1/{taken}; echo hello >&3; read -r answer <&3; echo \"api said $answer\"; \
             exec 4<>/dev/tcp/{HOST_LOOPBACK}/{taken}; echo uplink >&4; read -r answer <&4; echo \"host said $answer\"",
        );
        let mut command = tokio::process::Command::new("bash");
        command.args(["-c", &script]).stdout(std::process::Stdio::piped());
        // SAFETY: Sandbox::join makes one async-signal-safe system call.
        #[allow(unsafe_code)]
        unsafe {
            command.pre_exec(move || Sandbox::join(fd));
        }
        let child = command.spawn().unwrap();
        for _ in 0..2 {
            let (mut connection, _) = api.accept().await.unwrap();
            let mut buffer = [0u8; 64];
            let n = connection.read(&mut buffer).await.unwrap();
            let said = String::from_utf8_lossy(&buffer[..n]).trim().to_string();
            connection.write_all(format!("{said}-ok\n").as_bytes()).await.unwrap();
        }
        let output = child.wait_with_output().await.unwrap();
        assert_eq!(String::from_utf8_lossy(&output.stdout), "api said hello-ok\nhost said uplink-ok\n");

        // 9443 inside is reached from the webhook port outside.
        let inside = sandbox.listen(SocketAddr::from(([127, 0, 0, 1], WEBHOOK_PORT))).await.unwrap();
        let served = tokio::spawn(async move {
            let (mut connection, _) = inside.accept().await.unwrap();
            connection.write_all(b"from inside").await.unwrap();
        });
        let mut outside = tokio::net::TcpStream::connect(("127.0.0.1", webhook_port)).await.unwrap();
        let mut answer = String::new();
        outside.read_to_string(&mut answer).await.unwrap();
        assert_eq!(answer, "from inside");
        served.await.unwrap();
    }
}
