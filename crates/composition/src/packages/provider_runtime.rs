//! Provider packages that are not built in: pulled from their registry, their CRDs installed,
//! and their image's entrypoint run as a supervised local process with what Crossplane's
//! Deployment gives a provider's pod.
//!
//! Per active revision `R` of the Provider `P` (Crossplane's names, in `crossplane-system`):
//! - `spec.tlsServerSecretName` and `spec.tlsClientSecretName` of `R` naming the Secrets
//!   `P-tls-server` (a server certificate for `P`, `P.crossplane-system`,
//!   `P.crossplane-system.svc`) and `P-tls-client` (a client certificate for `R`), each with
//!   `tls.crt`, `tls.key` and `ca.crt` from oxplane's CA, kept once made, and written to
//!   `DIR/tls/R/{server,client}`;
//! - the Service `P` (port `webhook` 9443) annotated with the local address its process
//!   serves webhooks on, so the API server reaches it (`oxplane.io/address`);
//! - the package's CRDs as built-in providers' are installed (`mrd::install_provider_crds`):
//!   its managed kinds as ManagedResourceDefinitions (Inactive for a package whose
//!   `spec.capabilities` has `safe-start`, until a policy activates them), its ProviderConfig
//!   kinds as CRDs, all controlled by `R` and owned by `P`, labelled with the package; a kind
//!   converting through a webhook is pointed at the Service (path kept) with oxplane's CA as
//!   `caBundle` (Crossplane puts the leaf `tls.crt` there, which only Go's verifier accepts);
//! - the package's admission webhook configurations, once its CRDs are established, renamed
//!   `crossplane-provider-P` and pointed at the Service likewise, owned as its CRDs
//!   (`webhooks.rs`);
//! - `R`'s ServiceAccount (which the RBAC manager binds to `R`'s roles), and the process: the image's `Entrypoint`
//!   and `Cmd` (or the DeploymentRuntimeConfig's `package-runtime` args), the image's `Env`,
//!   then the DeploymentRuntimeConfig's env, then Crossplane's: `TLS_CLIENT_CERTS_DIR`,
//!   `TLS_SERVER_CERTS_DIR`, `POD_NAMESPACE`, `POD_NAME`, `PROVIDER_NAME`, `REVISION_NAME`,
//!   `REVISION_UID`, `WEBHOOK_TLS_CERT_DIR`, and `KUBECONFIG`: a kubeconfig of the
//!   ServiceAccount's identity (the API server's URL and CA, and a `tokenFile` holding a token
//!   from TokenRequest, renewed at 80% of its life as the kubelet renews projected tokens).
//!   The process shares the host's network (no sandbox here, see the README), so the ports a
//!   pod would own are given through the variables providers read them from: `WEBHOOK_PORT`
//!   and `METRICS_BIND_ADDRESS` (free ports of 127.0.0.1).
//!
//! Its output goes to `DIR/logs/R.log` (`oxplane logs provider/P`). It is restarted with a
//! backoff when it exits, the revision reporting why meanwhile, and stopped when the revision
//! is deactivated, the Provider uninstalled, or oxplane stops (`process.rs`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use oxplane_functions::grpc::tls::CertificateAuthority;
use oxplane_runtime::client::Kube;
use oxplane_runtime::identity::SYSTEM_NAMESPACE;
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::object;
use oxplane_xpkg::fetch::Cache;
use oxplane_xpkg::meta::PackageType;
use serde_json::{Map, Value, json};

use super::process::{Down, Process, down_now, supervise};
use super::reconciler::Progress;
use super::providers::{FIELD_MANAGER, runtime_args, runtime_config_kind, runtime_config_name, runtime_container};
use super::configurations::dependencies::Dependency;
use super::runtime_image::{Dependencies, RuntimeImage};
use super::sandbox::{Sandbox, WEBHOOK_PORT};

/// How long a provider's ServiceAccount token lives (renewed at 80% of it).
const TOKEN_LIFETIME: Duration = Duration::from_secs(3600);

/// Where provider processes reach the API server.
#[derive(Clone, Debug)]
pub struct ApiAccess {
    /// `https://HOST:PORT`.
    pub url: String,
    /// PEM of the CA the server's certificate chains to.
    pub ca_pem: String,
}

/// What a revision of a pulled provider installed, and its process.
struct Installed {
    revision: String,
    image: Arc<RuntimeImage>,
    /// `status.objectRefs` of the revision.
    object_refs: Vec<Value>,
    /// `spec.capabilities` of the package's meta object (`status.capabilities` of the revision).
    capabilities: Vec<String>,
    /// What the package depends on, as last checked.
    dependencies: Dependencies,
    /// Free ports of 127.0.0.1 given to the process for its webhook server and metrics.
    webhook_port: u16,
    metrics_port: u16,
    process: Option<Running>,
}

/// A running process and what it was started with.
struct Running {
    /// The runtime config's args, env and `hostNetwork` it was started with: a change
    /// restarts it.
    started_with: (Vec<String>, Vec<(String, String)>, bool),
    down: Down,
    _stop: tokio::sync::watch::Sender<bool>,
    renew: tokio::task::JoinHandle<()>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.renew.abort();
    }
}

/// Wakes a package by name (its controller's queue).
pub type Wake = Arc<dyn Fn(&str) + Send + Sync>;

/// The processes of pulled Provider packages, by Provider name.
pub struct ProviderRuntimes {
    kube: Kube,
    /// Who asks for ServiceAccount tokens (the kubelet's part): the installer.
    token_issuer: Kube,
    cache: Cache,
    dir: PathBuf,
    ca_dir: PathBuf,
    api: ApiAccess,
    installed: Mutex<HashMap<String, Installed>>,
    wake: Mutex<Option<Wake>>,
    /// Why processes share oxplane's network rather than each getting a namespace of its
    /// own (none: they get one).
    no_sandbox: Option<String>,
}

fn secret_kind() -> Kind {
    Kind::new("", "v1", "Secret", "secrets", true)
}

fn service_kind() -> Kind {
    Kind::new("", "v1", "Service", "services", true)
}

/// `P-tls-server` and `P-tls-client`.
pub fn tls_secret_names(package: &str) -> (String, String) {
    (format!("{package}-tls-server"), format!("{package}-tls-client"))
}

fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).map_err(|e| format!("cannot find a free port: {e}"))
}

/// `spec.capabilities` of a package's meta object.
fn capabilities(image: &RuntimeImage) -> Vec<String> {
    image.parsed.meta.pointer("/spec/capabilities").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect()
}

/// The CustomResourceDefinitions and ManagedResourceDefinitions of a package.
fn crds(image: &RuntimeImage) -> impl Iterator<Item = &Value> {
    image.parsed.objects.iter().filter(|o| matches!(o.get("kind").and_then(Value::as_str), Some("CustomResourceDefinition" | "ManagedResourceDefinition")))
}

/// A package CRD with its webhook conversion (if any) pointed at the package's Service, with
/// `ca_pem` to trust.
pub fn with_webhook(crd: &Value, package: &str, ca_pem: &str) -> Value {
    let mut crd = crd.clone();
    if crd.pointer("/spec/conversion/strategy").and_then(Value::as_str) == Some("Webhook") {
        let path = crd.pointer("/spec/conversion/webhook/clientConfig/service/path").and_then(Value::as_str).unwrap_or("/convert").to_string();
        let versions = crd.pointer("/spec/conversion/webhook/conversionReviewVersions").cloned().unwrap_or_else(|| json!(["v1"]));
        crd["spec"]["conversion"]["webhook"] = json!({
            "conversionReviewVersions": versions,
            "clientConfig": service_client_config(package, Some(json!(path)), ca_pem),
        });
    }
    crd
}

/// A webhook's `clientConfig` calling the package `package`'s Service (`crossplane-system`,
/// port 9443, `path` if any) and trusting `ca_pem`: for its conversion and admission webhooks.
pub fn service_client_config(package: &str, path: Option<Value>, ca_pem: &str) -> Value {
    let mut service = json!({"name": package, "namespace": SYSTEM_NAMESPACE, "port": WEBHOOK_PORT});
    if let Some(path) = path {
        service["path"] = path;
    }
    json!({"service": service, "caBundle": STANDARD.encode(ca_pem)})
}

/// A kubeconfig for `user` reaching `api`, its token read from `token_file`.
fn kubeconfig(api: &ApiAccess, user: &str, token_file: &Path) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "oxplane", "cluster": {"server": api.url, "certificate-authority-data": STANDARD.encode(&api.ca_pem)}}],
        "users": [{"name": user, "user": {"tokenFile": token_file.display().to_string()}}],
        "contexts": [{"name": "oxplane", "context": {"cluster": "oxplane", "user": user, "namespace": SYSTEM_NAMESPACE}}],
        "current-context": "oxplane",
    })
}

/// The host and port of an `https://HOST:PORT` URL (an IPv6 host without its brackets).
fn api_host_port(url: &str) -> Option<(String, u16)> {
    let authority = url.strip_prefix("https://")?.split('/').next()?;
    let (host, port) = authority.rsplit_once(':')?;
    Some((host.trim_start_matches('[').trim_end_matches(']').to_string(), port.parse().ok()?))
}

/// The socket address of an `https://127.0.0.1:PORT` (or `localhost`) URL: where the API
/// server is for a process in a namespace of its own, which reaches it at the same address.
fn loopback_address(url: &str) -> Option<std::net::SocketAddr> {
    let (host, port) = api_host_port(url)?;
    matches!(host.as_str(), "127.0.0.1" | "localhost").then(|| std::net::SocketAddr::from(([127, 0, 0, 1], port)))
}

/// Whether a DeploymentRuntimeConfig runs the process on the host's network (the pod
/// template's `hostNetwork`).
fn host_network(config: &Value) -> bool {
    config.pointer("/spec/deploymentTemplate/spec/template/spec/hostNetwork").and_then(Value::as_bool) == Some(true)
}

/// Writes a file by renaming a complete temporary one over it, so readers never see half. A
/// file that holds `contents` already is left alone: processes that watch their certificate
/// files (controller-runtime's certwatcher) would reload on every reconcile otherwise.
fn write_atomically(path: &Path, contents: &[u8]) -> Result<(), String> {
    if std::fs::read(path).is_ok_and(|current| current == contents) {
        return Ok(());
    }
    let parent = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    let temporary = path.with_extension("tmp");
    std::fs::write(&temporary, contents).map_err(|e| format!("cannot write {}: {e}", temporary.display()))?;
    std::fs::rename(&temporary, path).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The env of a DeploymentRuntimeConfig's `package-runtime` container (literal values).
fn runtime_env(config: &Value) -> Vec<(String, String)> {
    runtime_container(config)
        .and_then(|c| c.get("env"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|e| Some((e.get("name")?.as_str()?.to_string(), e.get("value").and_then(Value::as_str).unwrap_or_default().to_string())))
        .collect()
}

/// When to renew a token living `lifetime`: at 80% of it.
fn renew_after(lifetime: Duration) -> Duration {
    lifetime.mul_f64(0.8)
}

impl ProviderRuntimes {
    /// Runtimes keeping root filesystems, certificates, kubeconfigs and logs in `dir`, pulling
    /// through `cache_dir`, with certificates from oxplane's CA in `ca_dir`. Processes an
    /// earlier run left in `dir` are killed first.
    pub fn new(kube: Kube, token_issuer: Kube, cache_dir: PathBuf, dir: PathBuf, ca_dir: PathBuf, api: ApiAccess) -> Self {
        super::process::reap_orphans(&dir);
        let no_sandbox = super::sandbox::unavailable().or_else(|| loopback_address(&api.url).is_none().then(|| format!("the API server's address {} is not on the loopback", api.url)));
        if let Some(why) = &no_sandbox {
            tracing::warn!(%why, "provider processes share oxplane's network: each is given its ports through WEBHOOK_PORT and METRICS_BIND_ADDRESS");
        }
        ProviderRuntimes {
            kube,
            token_issuer,
            cache: Cache::new(cache_dir),
            dir,
            ca_dir,
            api,
            installed: Mutex::new(HashMap::new()),
            wake: Mutex::new(None),
            no_sandbox,
        }
    }

    /// Wakes the Provider whenever its process starts or exits.
    pub fn set_wake(&self, wake: Wake) {
        *self.wake.lock().unwrap_or_else(|p| p.into_inner()) = Some(wake);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Installed>> {
        self.installed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stops the Provider's process, if it runs, and forgets what it installed.
    pub fn stop(&self, name: &str) {
        if self.lock().remove(name).is_some() {
            tracing::info!(provider = name, "stopped the provider's process");
        }
    }

    /// What a pulled Provider's package depends on.
    pub fn dependencies(&self, name: &str) -> Vec<Dependency> {
        self.lock().get(name).map(|i| i.dependencies.wanted.clone()).unwrap_or_default()
    }

    /// The revision status of a pulled Provider: `objectRefs`, `capabilities` and the
    /// dependency counts.
    pub fn revision_status(&self, name: &str) -> Option<Map<String, Value>> {
        let installed = self.lock();
        let installed = installed.get(name)?;
        let mut status = Map::new();
        status.insert("objectRefs".into(), Value::Array(installed.object_refs.clone()));
        if !installed.capabilities.is_empty() {
            status.insert("capabilities".into(), json!(installed.capabilities));
        }
        installed.dependencies.write_status(&mut status);
        Some(status)
    }

    /// Installs the revision `revision` of the Provider `package` (pulled from `reference`) and
    /// runs its process: how far it got (its process down included, read once), `Err(why)`
    /// when it cannot. `owners` are the owner references of what
    /// the revision installs, the revision's controller reference first.
    pub async fn ensure(&self, package: &Value, reference: &str, revision: &str, owners: Vec<Value>, pull: &oxplane_xpkg::registry::ProgressSender) -> Result<Progress, String> {
        let name = object::name(package).unwrap_or_default().to_string();
        let known = self.lock().get(&name).filter(|i| i.revision == revision).map(|i| i.image.clone());
        let image = match known {
            Some(image) => image,
            None => {
                self.stop(&name);
                let image = Arc::new(RuntimeImage::pull(&self.kube, &self.cache, &self.dir, package, reference, PackageType::Provider, pull).await?);
                let mut object_refs: Vec<Value> = crds(&image).map(crate::mrd::object_ref).collect();
                object_refs.extend(super::webhooks::object_refs(&image.parsed.objects, "Provider", &name));
                let capabilities = capabilities(&image);
                let installed = Installed {
                    revision: revision.to_string(),
                    image: image.clone(),
                    object_refs,
                    capabilities,
                    dependencies: Dependencies::default(),
                    webhook_port: free_port()?,
                    metrics_port: free_port()?,
                    process: None,
                };
                self.lock().insert(name.clone(), installed);
                image
            }
        };
        // Nothing is installed while a dependency is missing or refused; the Lock entry the
        // package reconciler writes meanwhile lets the resolver install it.
        let dependencies = image.dependencies(&self.kube, package).await?;
        let blocked = dependencies.resolution.error();
        if let Some(installed) = self.lock().get_mut(&name) {
            installed.dependencies = dependencies;
        }
        if let Some(error) = blocked {
            return Err(error);
        }
        let controller = owners.first().cloned().ok_or_else(|| format!("cannot find the active ProviderRevision {revision}"))?;
        let ca = CertificateAuthority::load_or_create(&self.ca_dir).map_err(|e| format!("cannot load oxplane's certificate authority: {e}"))?;
        let certs = self.dir.join("tls").join(revision);
        self.ensure_tls(&name, revision, &controller, &ca, &certs).await?;
        // As the package manager sets them on a revision whose runtime it manages.
        let (server_secret, client_secret) = tls_secret_names(&name);
        let patch = json!({"spec": {"tlsServerSecretName": server_secret, "tlsClientSecretName": client_secret}});
        self.kube.merge_patch(&super::provider_revision_kind(), None, revision, &patch).await.map_err(|e| format!("cannot update ProviderRevision {revision}: {e}"))?;
        let webhook_port = self.lock().get(&name).map(|i| i.webhook_port).unwrap_or_default();
        self.ensure_service(&name, revision, &controller, webhook_port).await?;

        let safe_start = crate::mrd::is_safe_start(capabilities(&image).iter().map(String::as_str));
        let crds = crds(&image).map(|crd| with_webhook(crd, &name, ca.ca_pem())).collect();
        let installed = crate::mrd::install_provider_crds(&self.kube, package, crds, &owners, safe_start).await?;
        if !installed.waiting.is_empty() {
            return Ok(Progress::Waiting(format!("waiting for CustomResourceDefinitions to be established: {}", installed.waiting.join(", "))));
        }
        // As Crossplane: before the process serves them, so a `failurePolicy: Fail` webhook
        // refuses writes of its kinds until the process is up.
        let webhooks = super::webhooks::configurations(&image.parsed.objects, "Provider", &name, ca.ca_pem());
        super::webhooks::install(&self.kube, package, webhooks, &owners).await?;

        let config_name = runtime_config_name(package);
        let config = self.kube.get(&runtime_config_kind(), None, config_name).await.map_err(|e| format!("cannot get DeploymentRuntimeConfig {config_name}: {e}"))?;
        let started_with = (config.as_ref().map(runtime_args).unwrap_or_default(), config.as_ref().map(runtime_env).unwrap_or_default(), config.as_ref().is_some_and(host_network));
        if let Some(down) = self.lock().get(&name).and_then(|i| i.process.as_ref()).filter(|r| r.started_with == started_with).map(|r| r.down.clone()) {
            return match down_now(&down) {
                None => Ok(Progress::Installed),
                Some(why) if why == "starting" => Ok(Progress::Waiting("waiting for the provider's process to start".into())),
                Some(why) => Ok(Progress::RuntimeDown(why)),
            };
        }
        if let Some(installed) = self.lock().get_mut(&name) {
            // The runtime config changed: the process is started again with the new one.
            installed.process = None;
        }
        let account = crate::rbac::provider::service_account_name(revision);
        // As Crossplane's runtime applies it with the Deployment: a provider installing no kinds
        // gets no roles from the RBAC manager, but still runs as its own ServiceAccount.
        let service_account = json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": account, "namespace": SYSTEM_NAMESPACE, "ownerReferences": [controller]},
        });
        self.kube
            .apply(&crate::rbac::service_account_kind(), &service_account, FIELD_MANAGER, true)
            .await
            .map_err(|e| format!("cannot apply ServiceAccount {SYSTEM_NAMESPACE}/{account}: {e}"))?;
        let Some((token, expires)) = request_token(&self.token_issuer, &account).await? else {
            return Ok(Progress::Waiting(format!("waiting for the ServiceAccount {SYSTEM_NAMESPACE}/{account}")));
        };
        let kube_dir = self.dir.join("kube").join(revision);
        // The token, CA and namespace as a pod's ServiceAccount volume holds them: in-cluster
        // clients read them at the in-cluster path (mounted there in the process's own mount
        // namespace, below), the kubeconfig names the token file itself.
        let account_dir = kube_dir.join("serviceaccount");
        let token_file = account_dir.join("token");
        write_atomically(&token_file, token.as_bytes())?;
        write_atomically(&account_dir.join("ca.crt"), self.api.ca_pem.as_bytes())?;
        write_atomically(&account_dir.join("namespace"), SYSTEM_NAMESPACE.as_bytes())?;
        let user = format!("system:serviceaccount:{SYSTEM_NAMESPACE}:{account}");
        let kubeconfig_file = kube_dir.join("kubeconfig");
        write_atomically(&kubeconfig_file, kubeconfig(&self.api, &user, &token_file).to_string().as_bytes())?;
        let renew = tokio::spawn(renew_token(self.token_issuer.clone(), account.clone(), token_file.clone(), expires));

        let (program, args) = image.argv(reference, &started_with.0)?;
        let (webhook_port, metrics_port) = self.lock().get(&name).map(|i| (i.webhook_port, i.metrics_port)).unwrap_or_default();
        // A namespace of its own, as a pod has, unless its runtime config asks for the host's
        // network (`hostNetwork`) or this machine cannot make one.
        let api = loopback_address(&self.api.url);
        let sandbox = match api.filter(|_| self.no_sandbox.is_none() && !started_with.2) {
            Some(api) => Some(Arc::new(Sandbox::create(Some(api), webhook_port, &self.dir).await.map_err(|e| format!("cannot make the provider's network: {e}"))?)),
            None => None,
        };
        let uid = controller.get("uid").and_then(Value::as_str).unwrap_or_default().to_string();
        let server_dir = certs.join("server").display().to_string();
        let mut env = image.env_pairs();
        env.extend(started_with.1.iter().cloned());
        env.extend([
            ("TLS_CLIENT_CERTS_DIR".to_string(), certs.join("client").display().to_string()),
            ("TLS_SERVER_CERTS_DIR".to_string(), server_dir.clone()),
            ("POD_NAMESPACE".to_string(), SYSTEM_NAMESPACE.to_string()),
            ("POD_NAME".to_string(), format!("{revision}-0")),
            ("PROVIDER_NAME".to_string(), name.clone()),
            ("REVISION_NAME".to_string(), revision.to_string()),
            ("REVISION_UID".to_string(), uid),
            ("WEBHOOK_TLS_CERT_DIR".to_string(), server_dir),
            ("KUBECONFIG".to_string(), kubeconfig_file.display().to_string()),
        ]);
        // What the kubelet gives every pod: where the API server is, for in-cluster clients.
        if let Some((host, port)) = api_host_port(&self.api.url) {
            env.extend([("KUBERNETES_SERVICE_HOST".to_string(), host), ("KUBERNETES_SERVICE_PORT".to_string(), port.to_string())]);
        }
        if sandbox.is_none() {
            // Sharing oxplane's network, the ports a pod would own are given as providers read
            // them (controller-runtime's flags' variables).
            env.extend([("WEBHOOK_PORT".to_string(), webhook_port.to_string()), ("METRICS_BIND_ADDRESS".to_string(), format!("127.0.0.1:{metrics_port}"))]);
        }
        let network = if sandbox.is_some() { "own namespace" } else { "oxplane's" };
        let log_dir = self.dir.join("logs");
        std::fs::create_dir_all(&log_dir).map_err(|e| format!("cannot create the provider's log folder: {e}"))?;
        let log = log_dir.join(format!("{revision}.log"));
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let down: Down = Arc::new(Mutex::new(Some("starting".to_string())));
        // The in-cluster ServiceAccount folder needs the privilege that makes namespaces, and a
        // mount point on the host (an empty folder, made once).
        let mut mounts = sandbox.as_ref().map(|s| s.mounts()).unwrap_or_default();
        if sandbox.is_some() {
            match std::fs::create_dir_all(super::sandbox::IN_CLUSTER_DIR) {
                Ok(()) => mounts.push((account_dir.clone(), PathBuf::from(super::sandbox::IN_CLUSTER_DIR))),
                Err(error) => tracing::warn!(%error, path = super::sandbox::IN_CLUSTER_DIR, "no in-cluster ServiceAccount folder for the provider: cannot make its mount point"),
            }
        }
        let process = Process { name: name.clone(), noun: "provider", program, args, env, root: image.root.clone(), log, sandbox, mounts };
        let wake = self.wake.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let woken = name.clone();
        tokio::spawn(supervise(
            process,
            down.clone(),
            stopped,
            Arc::new(move || {
                if let Some(wake) = &wake {
                    wake(&woken);
                }
            }),
        ));
        tracing::info!(provider = %name, revision = %revision, webhook_port, network, "started the provider's process");
        if let Some(installed) = self.lock().get_mut(&name) {
            installed.process = Some(Running { started_with, down: down.clone(), _stop: stop, renew });
        }
        Ok(down_now(&down).map(|_| "waiting for the provider's process to start".to_string()).into())
    }

    /// The Secrets `P-tls-server` and `P-tls-client` (made once, kept while they hold a
    /// certificate of this CA), written to `certs/{server,client}`.
    async fn ensure_tls(&self, name: &str, revision: &str, controller: &Value, ca: &CertificateAuthority, certs: &Path) -> Result<(), String> {
        let (server_secret, client_secret) = tls_secret_names(name);
        let server_names = vec![name.to_string(), format!("{name}.{SYSTEM_NAMESPACE}"), format!("{name}.{SYSTEM_NAMESPACE}.svc")];
        for (secret, dir, server) in [(server_secret, certs.join("server"), true), (client_secret, certs.join("client"), false)] {
            let existing = self.kube.get(&secret_kind(), Some(SYSTEM_NAMESPACE), &secret).await.map_err(|e| format!("cannot get Secret {secret}: {e}"))?;
            let field = |k: &str| existing.as_ref().and_then(|s| s.get("data")).and_then(|d| d.get(k)).and_then(Value::as_str).and_then(|v| STANDARD.decode(v).ok());
            let kept = match (field("tls.crt"), field("tls.key"), field("ca.crt")) {
                (Some(crt), Some(tls_key), Some(ca_crt)) if !crt.is_empty() && !tls_key.is_empty() && ca_crt == ca.ca_pem().as_bytes() => Some((crt, tls_key)),
                _ => None,
            };
            let (crt, tls_key) = match kept {
                Some(kept) => kept,
                None => {
                    let (crt, tls_key) = if server {
                        let issued = ca.issue_server(&server_names).map_err(|e| format!("cannot issue the provider's server certificate: {e}"))?;
                        (issued.cert_pem, issued.key_pem)
                    } else {
                        ca.issue_client(&[revision.to_string()]).map_err(|e| format!("cannot issue the provider's client certificate: {e}"))?
                    };
                    let object = json!({
                        "apiVersion": "v1",
                        "kind": "Secret",
                        "metadata": {"name": secret, "namespace": SYSTEM_NAMESPACE, "ownerReferences": [controller]},
                        "type": "Opaque",
                        "data": {"tls.crt": STANDARD.encode(&crt), "tls.key": STANDARD.encode(&tls_key), "ca.crt": STANDARD.encode(ca.ca_pem())},
                    });
                    self.kube.apply(&secret_kind(), &object, FIELD_MANAGER, true).await.map_err(|e| format!("cannot apply Secret {SYSTEM_NAMESPACE}/{secret}: {e}"))?;
                    (crt.into_bytes(), tls_key.into_bytes())
                }
            };
            write_atomically(&dir.join("tls.crt"), &crt)?;
            write_atomically(&dir.join("tls.key"), &tls_key)?;
            write_atomically(&dir.join("ca.crt"), ca.ca_pem().as_bytes())?;
        }
        Ok(())
    }

    /// The Service `P` the API server calls the provider's webhooks through, pointing at the
    /// local port its process serves them on.
    async fn ensure_service(&self, name: &str, revision: &str, controller: &Value, port: u16) -> Result<(), String> {
        let service = json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": name,
                "namespace": SYSTEM_NAMESPACE,
                "ownerReferences": [controller],
                "annotations": {"oxplane.io/address": format!("127.0.0.1:{port}")},
            },
            "spec": {
                "selector": {"pkg.crossplane.io/revision": revision, "pkg.crossplane.io/provider": name},
                "ports": [{"name": "webhook", "port": WEBHOOK_PORT, "targetPort": "webhook", "protocol": "TCP"}],
            },
        });
        self.kube.apply(&service_kind(), &service, FIELD_MANAGER, true).await.map_err(|e| format!("cannot apply Service {SYSTEM_NAMESPACE}/{name}: {e}"))?;
        Ok(())
    }

}

/// A token of the ServiceAccount `account` and when it expires; `None` while it does not exist.
async fn request_token(issuer: &Kube, account: &str) -> Result<Option<(String, Duration)>, String> {
    let accounts: kube::Api<ServiceAccount> = kube::Api::namespaced(issuer.client().clone(), SYSTEM_NAMESPACE);
    let request = TokenRequest {
        spec: TokenRequestSpec { audiences: Vec::new(), expiration_seconds: Some(TOKEN_LIFETIME.as_secs() as i64), bound_object_ref: None },
        ..Default::default()
    };
    match accounts.create_token_request(account, &kube::api::PostParams::default(), &request).await {
        Ok(issued) => {
            let token = issued.status.map(|s| s.token).unwrap_or_default();
            Ok(Some((token, TOKEN_LIFETIME)))
        }
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(error) => Err(format!("cannot request a token of ServiceAccount {SYSTEM_NAMESPACE}/{account}: {error}")),
    }
}

/// Renews the token in `file` at 80% of its life, for as long as the process runs (the task is
/// aborted with it); a failed request is tried again every 10 seconds.
async fn renew_token(issuer: Kube, account: String, file: PathBuf, lifetime: Duration) {
    let mut wait = renew_after(lifetime);
    loop {
        tokio::time::sleep(wait).await;
        match request_token(&issuer, &account).await {
            Ok(Some((token, lifetime))) => match write_atomically(&file, token.as_bytes()) {
                Ok(()) => {
                    tracing::debug!(%account, "renewed the provider's ServiceAccount token");
                    wait = renew_after(lifetime);
                }
                Err(error) => {
                    tracing::warn!(%account, %error, "cannot write the provider's renewed token");
                    wait = Duration::from_secs(10);
                }
            },
            Ok(None) => wait = Duration::from_secs(10),
            Err(error) => {
                tracing::warn!(%account, %error, "cannot renew the provider's ServiceAccount token");
                wait = Duration::from_secs(10);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn a_webhook_conversion_is_pointed_at_the_packages_service_with_oxplanes_ca() {
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "things.example.org"},
            "spec": {"conversion": {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {"service": {"path": "/convert"}}}}},
        });
        let prepared = with_webhook(&crd, "provider-things", "PEM");
        assert_eq!(
            prepared["spec"]["conversion"]["webhook"],
            json!({
                "conversionReviewVersions": ["v1"],
                "clientConfig": {
                    "service": {"name": "provider-things", "namespace": "crossplane-system", "port": 9443, "path": "/convert"},
                    "caBundle": STANDARD.encode("PEM"),
                },
            })
        );
        let plain = json!({"metadata": {"name": "x"}, "spec": {"conversion": {"strategy": "None"}}});
        assert_eq!(with_webhook(&plain, "p", "PEM")["spec"]["conversion"], json!({"strategy": "None"}));
    }

    #[test]
    fn the_api_server_is_reached_in_a_namespace_only_on_the_loopback() {
        assert_eq!(loopback_address("https://127.0.0.1:6443"), Some("127.0.0.1:6443".parse().unwrap()));
        assert_eq!(loopback_address("https://localhost:443/"), Some("127.0.0.1:443".parse().unwrap()));
        assert_eq!(loopback_address("https://10.0.0.5:6443"), None);
        assert_eq!(loopback_address("http://127.0.0.1:6443"), None);
        assert_eq!(api_host_port("https://[::1]:6443/"), Some(("::1".to_string(), 6443)));
        assert!(host_network(&json!({"spec": {"deploymentTemplate": {"spec": {"template": {"spec": {"hostNetwork": true}}}}}})));
        assert!(!host_network(&json!({"spec": {}})));
    }

    #[test]
    fn an_atomic_write_leaves_a_file_with_the_same_contents_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tls").join("tls.crt");
        write_atomically(&path, b"one").unwrap();
        let written = std::fs::metadata(&path).unwrap().ino();
        write_atomically(&path, b"one").unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().ino(), written, "rewritten although unchanged");
        write_atomically(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_ne!(std::fs::metadata(&path).unwrap().ino(), written);
        assert!(!path.with_extension("tmp").exists());
    }

    #[test]
    fn the_kubeconfig_reads_its_token_from_the_file_the_renewal_rewrites() {
        let api = ApiAccess { url: "https://127.0.0.1:6443".into(), ca_pem: "CA".into() };
        let config = kubeconfig(&api, "system:serviceaccount:crossplane-system:r", Path::new("/d/token"));
        assert_eq!(config["users"][0]["user"], json!({"tokenFile": "/d/token"}));
        assert_eq!(config["clusters"][0]["cluster"]["server"], "https://127.0.0.1:6443");
        assert_eq!(config["clusters"][0]["cluster"]["certificate-authority-data"], STANDARD.encode("CA"));
        assert_eq!(config["contexts"][0]["context"]["namespace"], "crossplane-system");
        assert_eq!(renew_after(Duration::from_secs(3600)), Duration::from_secs(2880));
    }

    #[test]
    fn a_runtime_configs_env_is_read_from_the_package_runtime_container() {
        let config = json!({"spec": {"deploymentTemplate": {"spec": {"template": {"spec": {"containers": [
            {"name": "sidecar", "env": [{"name": "NO", "value": "x"}]},
            {"name": "package-runtime", "args": ["--debug"], "env": [{"name": "A", "value": "1"}, {"name": "B"}]},
        ]}}}}}});
        assert_eq!(runtime_env(&config), vec![("A".to_string(), "1".to_string()), ("B".to_string(), String::new())]);
        assert_eq!(runtime_args(&config), vec!["--debug".to_string()]);
    }
}
