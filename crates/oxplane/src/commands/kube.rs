//! Talking to whatever API server the user's kubeconfig names: the client, the default
//! namespace, and a small discovery cache that maps a kind or a kubectl-style type name to the
//! resource that serves it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::Context;
use serde_json::Value;

/// Which kubeconfig and context to use.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct KubeArgs {
    /// Kubeconfig file [default: $KUBECONFIG, else ~/.kube/config].
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubernetes context.
    #[arg(short = 'c', long, value_name = "NAME")]
    pub context: Option<String>,
}

/// A connection: the client and the kubeconfig's namespace.
pub struct Kube {
    /// The client.
    pub client: kube::Client,
    /// The namespace of the kubeconfig's context (`default` when it names none).
    pub default_namespace: String,
    discovered: Mutex<HashMap<String, Vec<Resource>>>,
}

/// One served resource, as discovery describes it.
#[derive(Debug, Clone)]
pub struct Resource {
    /// API group ("" for the core group).
    pub group: String,
    /// Version.
    pub version: String,
    /// Plural name (the URL segment).
    pub plural: String,
    /// Singular name.
    pub singular: String,
    /// Kind.
    pub kind: String,
    /// Short names.
    pub short_names: Vec<String>,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Categories (`managed` for managed resource kinds).
    pub categories: Vec<String>,
}

impl Resource {
    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }

    /// The URL of the collection, in `namespace` when the resource is namespaced and one is
    /// given.
    pub fn collection_url(&self, namespace: Option<&str>) -> String {
        let base = if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        };
        match namespace.filter(|n| self.namespaced && !n.is_empty()) {
            Some(ns) => format!("{base}/namespaces/{ns}/{}", self.plural),
            None => format!("{base}/{}", self.plural),
        }
    }

    /// The URL of one object.
    pub fn object_url(&self, namespace: Option<&str>, name: &str) -> String {
        format!("{}/{name}", self.collection_url(namespace))
    }
}

/// A failed request: the API's `Status` when the server answered with one.
#[derive(Debug)]
pub enum RequestError {
    /// The server answered with a `Status`.
    Api(Box<kube::core::Status>),
    /// Anything else (connection, decoding).
    Other(anyhow::Error),
}

impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestError::Api(status) => f.write_str(&status.message),
            RequestError::Other(error) => write!(f, "{error:#}"),
        }
    }
}

impl RequestError {
    /// Whether the server said 404.
    pub fn is_not_found(&self) -> bool {
        matches!(self, RequestError::Api(status) if status.code == 404)
    }

    /// Whether the server said 409 `AlreadyExists`.
    pub fn is_already_exists(&self) -> bool {
        matches!(self, RequestError::Api(status) if status.reason == "AlreadyExists")
    }
}

impl Kube {
    /// Connects with the kubeconfig the flags, `$KUBECONFIG` or `~/.kube/config` name.
    pub async fn connect(args: &KubeArgs) -> anyhow::Result<Kube> {
        let kubeconfig = match &args.kubeconfig {
            Some(path) => kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("failed to get kubeconfig: cannot read {}", path.display()))?,
            None => kube::config::Kubeconfig::read().context("failed to get kubeconfig")?,
        };
        let options = kube::config::KubeConfigOptions { context: args.context.clone(), ..Default::default() };
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .context("failed to get kubeconfig")?;
        let default_namespace = config.default_namespace.clone();
        let client = kube::Client::try_from(config).context("cannot init kubeclient")?;
        Ok(Kube { client, default_namespace, discovered: Mutex::new(HashMap::new()) })
    }

    /// GETs `url` as JSON.
    pub async fn get(&self, url: &str) -> Result<Value, RequestError> {
        self.send(http::Method::GET, url, "application/json", None).await
    }

    /// POSTs `body` as JSON to `url` and reads the JSON answer.
    pub async fn post(&self, url: &str, body: &Value) -> Result<Value, RequestError> {
        self.send(http::Method::POST, url, "application/json", Some(body)).await
    }

    /// Sends `body` (JSON, or none) with `method` to `url` and reads the JSON answer.
    pub async fn send(&self, method: http::Method, url: &str, content_type: &str, body: Option<&Value>) -> Result<Value, RequestError> {
        let bytes = match body {
            Some(body) => serde_json::to_vec(body).map_err(|e| RequestError::Other(e.into()))?,
            None => Vec::new(),
        };
        let request = http::Request::builder()
            .method(method)
            .uri(url)
            .header(http::header::ACCEPT, "application/json")
            .header(http::header::CONTENT_TYPE, content_type)
            .body(bytes)
            .map_err(|e| RequestError::Other(e.into()))?;
        self.client.request::<Value>(request).await.map_err(|e| match e {
            kube::Error::Api(status) => RequestError::Api(status),
            other => RequestError::Other(other.into()),
        })
    }

    /// The resources a group version serves (cached), or none when it is not served.
    pub async fn group_version(&self, api_version: &str) -> anyhow::Result<Vec<Resource>> {
        if let Some(found) = self.discovered.lock().map_err(|_| anyhow::anyhow!("discovery cache poisoned"))?.get(api_version) {
            return Ok(found.clone());
        }
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), api_version.to_string()),
        };
        let url = if group.is_empty() { format!("/api/{version}") } else { format!("/apis/{api_version}") };
        let resources = match self.get(&url).await {
            Ok(list) => list["resources"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|r| r["name"].as_str().is_some_and(|n| !n.contains('/')))
                .map(|r| Resource {
                    group: group.clone(),
                    version: version.clone(),
                    plural: r["name"].as_str().unwrap_or_default().to_string(),
                    singular: r["singularName"].as_str().unwrap_or_default().to_string(),
                    kind: r["kind"].as_str().unwrap_or_default().to_string(),
                    short_names: r["shortNames"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|s| s.as_str().map(str::to_string))
                        .collect(),
                    namespaced: r["namespaced"].as_bool().unwrap_or(false),
                    categories: r["categories"].as_array().into_iter().flatten().filter_map(|c| c.as_str().map(str::to_string)).collect(),
                })
                .collect(),
            Err(e) if e.is_not_found() => Vec::new(),
            Err(e) => return Err(anyhow::anyhow!("cannot discover {api_version}: {e}")),
        };
        self.discovered
            .lock()
            .map_err(|_| anyhow::anyhow!("discovery cache poisoned"))?
            .insert(api_version.to_string(), resources.clone());
        Ok(resources)
    }

    /// The resource serving `kind` in `api_version`.
    pub async fn resource_for_kind(&self, api_version: &str, kind: &str) -> anyhow::Result<Resource> {
        self.group_version(api_version)
            .await?
            .into_iter()
            .find(|r| r.kind == kind)
            .with_context(|| format!("no matches for kind \"{kind}\" in version \"{api_version}\""))
    }

    /// Resolves a kubectl-style `TYPE[.VERSION][.GROUP]` (plural, singular, kind or short name)
    /// the way kubectl does: the core group first, then the groups in discovery order, each at
    /// its preferred version unless a version is named.
    pub async fn resource_for_type(&self, type_: &str) -> anyhow::Result<Resource> {
        let wanted = type_.to_lowercase();
        let (name, rest) = match wanted.split_once('.') {
            Some((n, r)) => (n.to_string(), Some(r.to_string())),
            None => (wanted.clone(), None),
        };
        let groups = self.get("/apis").await.map_err(|e| anyhow::anyhow!("cannot get discovery client: {e}"))?;
        // (group, versions to try): the core group first.
        let mut candidates: Vec<(String, Vec<String>)> = vec![(String::new(), vec!["v1".to_string()])];
        for group in groups["groups"].as_array().into_iter().flatten() {
            let group_name = group["name"].as_str().unwrap_or_default().to_string();
            let preferred = group["preferredVersion"]["version"].as_str().unwrap_or_default().to_string();
            let mut versions = vec![preferred.clone()];
            for v in group["versions"].as_array().into_iter().flatten() {
                if let Some(v) = v["version"].as_str().filter(|v| *v != preferred) {
                    versions.push(v.to_string());
                }
            }
            candidates.push((group_name, versions));
        }
        let matches_name = |r: &Resource| {
            r.plural == name || r.singular == name || r.kind.to_lowercase() == name || r.short_names.iter().any(|s| *s == name)
        };
        for (group, versions) in &candidates {
            // Which versions of this group the type's suffix allows.
            let allowed: Vec<&String> = match &rest {
                None => versions.iter().take(1).collect(),
                Some(rest) if rest == group => versions.iter().take(1).collect(),
                Some(rest) => match rest.split_once('.') {
                    Some((v, g)) if g == group => versions.iter().filter(|x| *x == v).collect(),
                    _ if group.is_empty() && versions.iter().any(|v| v == rest) => versions.iter().filter(|x| *x == rest).collect(),
                    _ => Vec::new(),
                },
            };
            for version in allowed {
                let api_version = if group.is_empty() { version.clone() } else { format!("{group}/{version}") };
                if let Some(found) = self.group_version(&api_version).await?.into_iter().find(matches_name) {
                    return Ok(found);
                }
            }
        }
        anyhow::bail!("the server doesn't have a resource type \"{name}\"")
    }
}
