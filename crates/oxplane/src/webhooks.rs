//! The webhooks this process serves to an API server, and where the CRDs converting through
//! the built-in providers' conversion webhooks are pointed.
//!
//! `oxplane up` serves the conversion webhooks on loopback (its own API server calls them);
//! `oxplane controllers` serves them beside Crossplane's Usage webhook from one HTTPS server at
//! `--webhook-address`, reached by the other API server at `--webhook-host`. Each start has a
//! new port and a new CA (no fixed port: one can be taken by another process at restart, and
//! servers sharing a store would each need one), so the CRDs are pointed at this process's
//! server when it takes over the providers: at start, or on a shared store when it becomes
//! the controllers' leader; the providers' CRDs it installs say the same.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use anyhow::Context;
use oxplane_apiserver::webhooks::serve::{AsyncHandler, Handler, WebhookServer};
use oxplane_providers::conversion::{self, ConversionWebhook};
use oxplane_runtime::client::Kube;
use oxplane_composition::mrd::mrd_kind;
use oxplane_composition::packages::crd_kind;
use serde_json::{Value, json};

use crate::usage_protection::webhook as usage;

/// The conversion webhooks served on loopback (a free port): the server, kept for as long as
/// the process runs, and where it is.
pub async fn serve_conversion_on_loopback() -> anyhow::Result<(WebhookServer, ConversionWebhook)> {
    let handler: Handler = Arc::new(conversion::review);
    let server = WebhookServer::start("127.0.0.1:0", &["127.0.0.1".to_string()], handler)
        .await
        .context("starting the providers' conversion webhook server")?;
    let webhook = ConversionWebhook { base_url: server.url(""), ca_bundle: server.ca_bundle() };
    Ok((server, webhook))
}

/// Points the providers' converted CRDs at `webhook` (see [`try_point_crds`]); a failure is
/// logged, not fatal: the providers' CRDs, installed with this address, point them here too.
pub async fn point_crds(kube: &Kube, webhook: &ConversionWebhook) {
    if let Err(error) = try_point_crds(kube, webhook).await {
        tracing::warn!(error = format!("{error:#}"), "pointing provider CRDs at this process's conversion webhooks failed: reads through converted versions fail until the providers install their CRDs");
    }
}

/// Points the stored CRDs that convert through the providers' webhooks at `webhook`: the
/// ManagedResourceDefinition a CRD is made from first (or the MRD controller would write the
/// old address back), then the CRD. One not installed yet (the provider writes it with this
/// address), not converting through a webhook, or pointed here already is left alone.
async fn try_point_crds(kube: &Kube, webhook: &ConversionWebhook) -> anyhow::Result<()> {
    for converted in conversion::converted() {
        let wanted = webhook.conversion(converted.path);
        let config = &wanted["webhook"]["clientConfig"];
        let patch = json!({"spec": {"conversion": {"webhook": {"clientConfig": {"url": config["url"], "caBundle": config["caBundle"], "service": null}}}}});
        for (kind, what) in [(mrd_kind(), "ManagedResourceDefinition"), (crd_kind(), "CRD")] {
            // The MRD kind is not served before Crossplane's CRDs are installed.
            let found = match kube.get(&kind, None, converted.crd).await {
                Err(error) if error.is_not_found() => None,
                found => found.with_context(|| format!("reading {what} {}", converted.crd))?,
            };
            let Some(found) = found else { continue };
            if found.pointer("/spec/conversion/strategy").and_then(Value::as_str) != Some("Webhook")
                || found.pointer("/spec/conversion/webhook/clientConfig") == Some(config)
            {
                continue;
            }
            kube.merge_patch(&kind, None, converted.crd, &patch).await.with_context(|| format!("pointing {what} {} at {}", converted.crd, config["url"]))?;
            tracing::info!(what, name = converted.crd, url = %config["url"], "conversion webhook pointed at this process");
        }
    }
    Ok(())
}

/// Where the controllers' webhook server listens and how the API server reaches it.
#[derive(Debug, Clone)]
pub struct Placement {
    /// The listen address (`127.0.0.1:0`: loopback, a free port).
    pub listen: String,
    /// The host name or IP address written into the webhooks' URLs and the serving
    /// certificate; the listen address's IP when not given.
    pub host: Option<String>,
}

/// The HTTPS server of `oxplane controllers`: Crossplane's Usage webhook and the providers'
/// conversion webhooks, by path; stopped when dropped.
pub struct ControllerWebhooks {
    server: WebhookServer,
    base_url: String,
}

impl ControllerWebhooks {
    /// Starts the server; Usages are read and refused deletions recorded through `kube`.
    pub async fn start(kube: Kube, placement: &Placement) -> anyhow::Result<ControllerWebhooks> {
        let listen: SocketAddr =
            placement.listen.parse().with_context(|| format!("--webhook-address {}: expected IP:PORT", placement.listen))?;
        let host = match &placement.host {
            Some(host) => host.clone(),
            None if listen.ip().is_unspecified() => anyhow::bail!(
                "--webhook-address {listen} listens on every interface: give --webhook-host, the name or address the API server reaches this process at"
            ),
            None => listen.ip().to_string(),
        };
        let handler: AsyncHandler = Arc::new(move |path: String, body: bytes::Bytes| {
            let kube = kube.clone();
            Box::pin(async move {
                if conversion::converted().iter().any(|c| c.path == path) {
                    return conversion::review(&path, &body);
                }
                usage::answer(&kube, &path, &body).await
            })
        });
        let server = WebhookServer::start_async(&placement.listen, std::slice::from_ref(&host), handler)
            .await
            .with_context(|| format!("starting the webhook server on {}", placement.listen))?;
        let url_host = match host.parse::<IpAddr>() {
            Ok(IpAddr::V6(ip)) => format!("[{ip}]"),
            _ => host,
        };
        let base_url = format!("https://{url_host}:{}", server.address.port());
        tracing::info!(%base_url, "serving the Usage deletion-protection and provider conversion webhooks");
        Ok(ControllerWebhooks { server, base_url })
    }

    /// The URL of the webhook at `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    /// `caBundle`: the server's CA, base64 PEM.
    pub fn ca_bundle(&self) -> String {
        self.server.ca_bundle()
    }

    /// Where the providers' conversion webhooks are.
    pub fn conversion(&self) -> ConversionWebhook {
        ConversionWebhook { base_url: self.base_url.clone(), ca_bundle: self.ca_bundle() }
    }
}
