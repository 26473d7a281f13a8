//! `oxplane bench sql`: how fast provider-sql makes PostgreSQL objects. 200 Roles, 200
//! Databases (each owned by its Role) and 200 Grants (CONNECT and TEMPORARY on each Database
//! to its Role) are created through HTTPS against `oxplane up --provider provider-sql`, and
//! the time until all 600 are Ready is measured, with the reconciles per second the
//! controllers did. The floor, in the same run against the same server, is the time the same
//! statements take from one client with no control plane.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use oxplane_providers::sql::pg::{database, grant};
use serde_json::{Value, json};

use super::Report;
use super::process::ServerProcess;

/// Flags of `oxplane bench sql`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Objects of each kind (Roles, Databases, Grants).
    #[arg(long, default_value_t = 200)]
    count: usize,
    /// Concurrent creating clients.
    #[arg(long, default_value_t = 32)]
    clients: usize,
    /// Port of a PostgreSQL on 127.0.0.1 to use, logging in as `postgres` with
    /// `--postgres-password`; without it a private server is started in a temporary directory.
    #[arg(long)]
    postgres_port: Option<u16>,
    /// The `postgres` user's password on `--postgres-port`.
    #[arg(long, env = "OXPLANE_BENCH_PG_PASSWORD", default_value = "")]
    postgres_password: String,
    /// Where to put the benchmark's data (a temporary directory inside it is removed
    /// afterwards). Defaults to the system's temporary directory.
    #[arg(long)]
    dir: Option<PathBuf>,
}

const KINDS: [(&str, &str); 3] = [("Role", "roles"), ("Database", "databases"), ("Grant", "grants")];

fn api(client: &kube::Client, kind: &str, plural: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("postgresql.sql.crossplane.io", "v1alpha1", kind), plural);
    Api::all_with(client.clone(), &resource)
}

/// The spec of object `i` of `kind`, as a user would write it.
fn object(kind: &str, i: usize, run: &str) -> Value {
    let role = format!("{run}-role-{i}");
    let database = format!("{run}-db-{i}");
    let (name, for_provider) = match kind {
        "Role" => (role.clone(), json!({"privileges": {"login": true}})),
        "Database" => (database.clone(), json!({"owner": role})),
        _ => (format!("{run}-grant-{i}"), json!({"privileges": ["CONNECT", "TEMPORARY"], "role": role, "database": database})),
    };
    json!({
        "apiVersion": "postgresql.sql.crossplane.io/v1alpha1", "kind": kind,
        "metadata": {"name": name},
        "spec": {"forProvider": for_provider}
    })
}

/// The statements provider-sql runs to create object `i` of each kind, one client, in
/// order: the floor.
async fn floor(client: &tokio_postgres::Client, count: usize, run: &str) -> anyhow::Result<f64> {
    let started = Instant::now();
    for i in 0..count {
        let role = format!("{run}-floor-role-{i}");
        let db = format!("{run}-floor-db-{i}");
        let password = oxplane_providers::sql::server::generate_password();
        let quoted_role = oxplane_providers::sql::pg::ident("role", &role)?;
        client.batch_execute(&format!("CREATE ROLE {quoted_role} WITH LOGIN PASSWORD {}", oxplane_providers::sql::pg::literal("password", &password)?)).await?;
        client.batch_execute(&database::create_statement(&db, &json!({"owner": role}))?).await?;
        let grant = json!({"privileges": ["CONNECT", "TEMPORARY"], "role": role, "database": db});
        client.batch_execute(&grant::create_statements(&grant)?.join("; ")).await?;
    }
    Ok(started.elapsed().as_secs_f64())
}

fn is_ready(object: &DynamicObject) -> bool {
    object.data["status"]["conditions"].as_array().is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

/// Total reconciles of provider-sql's Role, Database and Grant controllers, from `/metrics`.
async fn reconciles(client: &kube::Client) -> anyhow::Result<f64> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    Ok(sum_reconciles(&client.request_text(request).await?))
}

/// The reconciles counted in a `/metrics` text for the benchmark's kinds: the managed
/// reconciler names its controller `managed/<kind in lower case>.<group>`.
fn sum_reconciles(metrics: &str) -> f64 {
    let prefixes: Vec<String> = KINDS
        .iter()
        .map(|(kind, _)| format!("oxplane_reconciles_total{{controller=\"managed/{}.postgresql.sql.crossplane.io\"", kind.to_lowercase()))
        .collect();
    metrics
        .lines()
        .filter(|l| prefixes.iter().any(|p| l.starts_with(p.as_str())))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Runs the benchmark.
pub fn run(args: Args) -> anyhow::Result<()> {
    let base = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    let tmp = tempfile::Builder::new().prefix("oxplane-bench-sql-").tempdir_in(&base)?;
    let (port, password, _private) = match args.postgres_port {
        Some(port) => (port, args.postgres_password.clone(), None),
        None => {
            let private = oxplane_providers::sql::testing::Postgres::start().map_err(anyhow::Error::msg).context("starting a private PostgreSQL")?;
            (private.port, oxplane_providers::sql::testing::PASSWORD.to_string(), Some(private))
        }
    };
    let run_id = format!("b{}", std::process::id());
    let runtime = tokio::runtime::Runtime::new()?;
    let mut report = Report::new("sql");
    runtime.block_on(async {
        // The floor: one client, no control plane.
        let (pg, connection) = tokio_postgres::Config::new()
            .host("127.0.0.1")
            .port(port)
            .user("postgres")
            .password(&password)
            .dbname("postgres")
            .connect(tokio_postgres::NoTls)
            .await
            .context("connecting to PostgreSQL")?;
        tokio::spawn(connection);
        let floor_s = floor(&pg, args.count, &run_id).await?;
        report.add("floor_one_client_s", floor_s, "s");

        // The same objects through oxplane and provider-sql.
        let server = ServerProcess::start_with(&tmp.path().join("server"), &["--provider", "provider-sql"])?;
        let client = server.client().await?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while api(&client, "ProviderConfig", "providerconfigs").list(&Default::default()).await.is_err() {
            if Instant::now() > deadline {
                bail!("provider-sql was not installed");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let secrets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Secret"), "secrets"));
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bench-pg", "namespace": "default"},
            "stringData": {"username": "postgres", "password": password, "endpoint": "127.0.0.1", "port": port.to_string()}});
        secrets.create(&PostParams::default(), &serde_json::from_value(secret)?).await?;
        let config = json!({"apiVersion": "postgresql.sql.crossplane.io/v1alpha1", "kind": "ProviderConfig", "metadata": {"name": "default"},
            "spec": {"sslMode": "disable", "credentials": {"source": "PostgreSQLConnectionSecret", "connectionSecretRef": {"namespace": "default", "name": "bench-pg"}}}});
        api(&client, "ProviderConfig", "providerconfigs").create(&PostParams::default(), &serde_json::from_value(config)?).await?;

        let before = reconciles(&client).await?;
        let total = KINDS.len() * args.count;
        let mut watches = Vec::new();
        for (kind, plural) in KINDS {
            let watch_api = api(&client, kind, plural);
            watches.push(watcher(watch_api, watcher::Config::default()).applied_objects().boxed());
        }
        let readiness = tokio::spawn(async move {
            let mut ready = HashSet::new();
            let mut stream = futures::stream::select_all(watches);
            while ready.len() < total {
                match stream.try_next().await {
                    Ok(Some(object)) if is_ready(&object) => {
                        if let (Some(kind), Some(name)) = (object.types.as_ref().map(|t| t.kind.clone()), object.metadata.name) {
                            ready.insert((kind, name));
                        }
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
            Instant::now()
        });
        let started = Instant::now();
        let items: Vec<(Api<DynamicObject>, Value)> = (0..args.count)
            .flat_map(|i| KINDS.iter().map(move |(kind, plural)| (kind, plural, i)))
            .map(|(kind, plural, i)| (api(&client, kind, plural), object(kind, i, &run_id)))
            .collect();
        futures::stream::iter(items)
            .map(|(api, object)| async move { api.create(&PostParams::default(), &serde_json::from_value(object)?).await.map(|_| ()).context("create") })
            .buffer_unordered(args.clients)
            .try_collect::<Vec<()>>()
            .await?;
        let create_s = started.elapsed().as_secs_f64();
        let all_ready = tokio::time::timeout(Duration::from_secs(900), readiness).await.context("objects did not become Ready in 15 minutes")??;
        let ready_s = all_ready.duration_since(started).as_secs_f64();
        let done = reconciles(&client).await? - before;
        report.add(format!("sql_{total}_ready_s"), ready_s, "s");
        report.add("sql_create_s", create_s, "s");
        report.add("sql_reconciles", done, "reconciles");
        report.add("sql_reconciles_per_s", done / ready_s.max(f64::MIN_POSITIVE), "reconciles/s");
        report.add("ready_to_floor_ratio", ready_s / floor_s.max(f64::MIN_POSITIVE), "x");
        report.add("server_rss_mb", server.rss_mb()?, "MiB");
        drop(server);

        // Leave the server as it was (a server given by --postgres-port is not ours).
        for i in 0..args.count {
            for prefix in [format!("{run_id}-floor"), run_id.clone()] {
                let _ = pg.batch_execute(&format!("DROP DATABASE IF EXISTS \"{prefix}-db-{i}\" WITH (FORCE); DROP ROLE IF EXISTS \"{prefix}-role-{i}\"")).await;
            }
        }
        anyhow::Ok(())
    })?;
    report.print(args.json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconciles_are_summed_over_the_benchmarks_controllers_only() {
        let metrics = "# TYPE oxplane_reconciles_total counter\n\
            oxplane_reconciles_total{controller=\"managed/role.postgresql.sql.crossplane.io\",result=\"success\"} 3\n\
            oxplane_reconciles_total{controller=\"managed/grant.postgresql.sql.crossplane.io\",result=\"requeue\"} 4\n\
            oxplane_reconciles_total{controller=\"managed/nopresource.nop.crossplane.io\",result=\"success\"} 100\n\
            oxplane_reconcile_seconds_total{controller=\"managed/role.postgresql.sql.crossplane.io\"} 9.5\n";
        assert_eq!(sum_reconciles(metrics), 7.0);
    }
}
