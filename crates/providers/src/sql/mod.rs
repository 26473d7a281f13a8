//! provider-sql (`xpkg.crossplane.io/crossplane-contrib/provider-sql`): databases, roles,
//! users and grants in real PostgreSQL and MySQL/MariaDB servers.
//!
//! Kinds, as upstream names them: `postgresql.sql.crossplane.io/v1alpha1` (cluster-scoped
//! `Database`, `Role`, `Grant`, `Extension`, `Schema`, `DefaultPrivileges`, `ProviderConfig`,
//! `ProviderConfigUsage`) and `postgresql.sql.m.crossplane.io/v1alpha1` (the same kinds
//! namespaced, a namespaced `ProviderConfig` and a cluster-scoped `ClusterProviderConfig`);
//! `mysql.sql.crossplane.io/v1alpha1` (`Database`, `User`, `Grant`, and the configs) and its
//! namespaced `mysql.sql.m.crossplane.io/v1alpha1`.
//!
//! - `server.rs`: what a ProviderConfig points at (its connection Secret).
//! - `quote.rs`: identifier and literal quoting (property-tested).
//! - `refs.rs`: `xRef` / `xSelector` resolution to external names.
//! - `schemas.rs`: the CRDs' schemas and printer columns.
//! - `pg/`: the PostgreSQL pools and one file per kind.
//! - `mysql/`: the MySQL/MariaDB pools and one file per kind.
//! - `testing/`: private PostgreSQL and MariaDB servers for tests and benchmarks.

pub mod mysql;
pub mod password;
pub mod pg;
pub mod quote;
pub mod refs;
pub mod schemas;
pub mod server;
pub mod testing;

use std::sync::Arc;
use std::time::Duration;

use oxplane_runtime::Runtime;
use oxplane_runtime::controller::Controller;
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::managed::usage::ProviderConfigKinds;
use oxplane_runtime::managed::{self, ExternalConnector, ManagedSettings};
use oxplane_runtime::provider::{BuiltinProvider, ProviderHandle};
use serde_json::Value;

use mysql::{MyConnector, MyKind};
use pg::{PgConnector, PgKind, Pools};

/// The cluster-scoped PostgreSQL group.
pub const PG_GROUP: &str = "postgresql.sql.crossplane.io";
/// The namespaced PostgreSQL group.
pub const PG_NAMESPACED_GROUP: &str = "postgresql.sql.m.crossplane.io";
/// The cluster-scoped MySQL group.
pub const MYSQL_GROUP: &str = "mysql.sql.crossplane.io";
/// The namespaced MySQL group.
pub const MYSQL_NAMESPACED_GROUP: &str = "mysql.sql.m.crossplane.io";
/// The version of every group.
pub const VERSION: &str = "v1alpha1";
/// How often resources are observed (and drift corrected), by default.
pub const POLL_INTERVAL: Duration = Duration::from_secs(60);

/// provider-sql.
#[derive(Clone, Copy, Debug)]
pub struct SqlProvider {
    /// How often resources are observed: [`POLL_INTERVAL`], or shorter (tests that wait for
    /// drift to be corrected).
    pub poll_interval: Duration,
}

impl Default for SqlProvider {
    fn default() -> Self {
        SqlProvider { poll_interval: POLL_INTERVAL }
    }
}

/// The PostgreSQL managed kinds: kind, plural, which client.
pub const PG_KINDS: &[(&str, &str, PgKind)] = &[
    ("Database", "databases", PgKind::Database),
    ("Role", "roles", PgKind::Role),
    ("Grant", "grants", PgKind::Grant),
    ("Extension", "extensions", PgKind::Extension),
    ("Schema", "schemas", PgKind::Schema),
    ("DefaultPrivileges", "defaultprivileges", PgKind::DefaultPrivileges),
];

/// The MySQL managed kinds: kind, plural, which client.
pub const MYSQL_KINDS: &[(&str, &str, MyKind)] = &[("Database", "databases", MyKind::Database), ("User", "users", MyKind::User), ("Grant", "grants", MyKind::Grant)];

fn config_kinds(group: &str, namespaced: bool) -> ProviderConfigKinds {
    let kind = |kind: &str, plural: &str, namespaced: bool| Kind::new(group, VERSION, kind, plural, namespaced);
    ProviderConfigKinds {
        config: kind("ProviderConfig", "providerconfigs", namespaced),
        cluster_config: namespaced.then(|| kind("ClusterProviderConfig", "clusterproviderconfigs", false)),
        usage: kind("ProviderConfigUsage", "providerconfigusages", namespaced),
    }
}

impl SqlProvider {
    /// Starts the config controllers and one controller per managed kind of one database's
    /// groups (cluster-scoped and namespaced); `connector` makes a kind's connector.
    fn start_groups<K: Copy>(
        &self,
        runtime: &Runtime,
        groups: [(&str, bool); 2],
        kinds: &[(&str, &str, K)],
        connector: &dyn Fn(K) -> Arc<dyn ExternalConnector>,
        controllers: &mut Vec<Arc<Controller>>,
    ) {
        for (group, namespaced) in groups {
            let configs = Arc::new(config_kinds(group, namespaced));
            controllers.extend(managed::start_config_controllers(runtime, &configs));
            for (kind, plural, which) in kinds {
                let mut settings = ManagedSettings::new(Kind::new(group, VERSION, kind, plural, namespaced), connector(*which), self.poll_interval);
                settings.provider_configs = Some(configs.clone());
                controllers.push(managed::start_controller(runtime, settings));
            }
        }
    }
}

impl BuiltinProvider for SqlProvider {
    fn name(&self) -> &'static str {
        "provider-sql"
    }

    fn crds(&self, _package: &str) -> Vec<Value> {
        let mut crds = schemas::postgresql_crds();
        crds.extend(schemas::mysql_crds());
        crds
    }

    fn start(&self, runtime: &Runtime, _package: &str) -> ProviderHandle {
        let mut controllers = Vec::new();
        let pools = Arc::new(Pools::default());
        let pg = |kind: PgKind| -> Arc<dyn ExternalConnector> { Arc::new(PgConnector { kind, pools: pools.clone() }) };
        self.start_groups(runtime, [(PG_GROUP, false), (PG_NAMESPACED_GROUP, true)], PG_KINDS, &pg, &mut controllers);
        let pools = Arc::new(mysql::Pools::default());
        let my = |kind: MyKind| -> Arc<dyn ExternalConnector> { Arc::new(MyConnector { kind, pools: pools.clone() }) };
        self.start_groups(runtime, [(MYSQL_GROUP, false), (MYSQL_NAMESPACED_GROUP, true)], MYSQL_KINDS, &my, &mut controllers);
        ProviderHandle::new(controllers)
    }
}
