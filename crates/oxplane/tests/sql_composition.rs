//! `examples/postgres-database/` and `examples/mysql-database/` run as the README says, with
//! the real `kubectl` against a real PostgreSQL and a real MariaDB: a PostgresDatabase claim
//! becomes a Role, a Database it owns and a Grant, a MySQLDatabase claim a Database, a User
//! and a Grant; each claim's connection Secret logs in to its database; deleting the claim
//! removes all three from the server.

use crate::support;

use std::time::Duration;

use oxplane_providers::sql::testing::mariadb::{MariaDb, PASSWORD as MARIA_PASSWORD};
use oxplane_providers::sql::testing::{PASSWORD, Postgres};
use support::{Server, within};

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/postgres-database");
const MYSQL_EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/mysql-database");

fn file(name: &str) -> String {
    std::fs::read_to_string(format!("{EXAMPLE}/{name}")).unwrap()
}

fn mysql_file(name: &str) -> String {
    std::fs::read_to_string(format!("{MYSQL_EXAMPLE}/{name}")).unwrap()
}

#[test]
fn sql_postgres_database_composition_example_works_as_the_readme_says() {
    let pg = Postgres::shared();
    let server = Server::start();
    server.apply(&file("00-install.yaml"));
    server.kubectl(&["wait", "--for=condition=Healthy", "provider/provider-sql", "function/function-patch-and-transform", "function/function-auto-ready", "--timeout=90s"]);
    server.apply(&file("01-providerconfig.yaml").replace("password: change-me", &format!("password: {PASSWORD}")).replace("port: \"5432\"", &format!("port: \"{}\"", pg.port)));
    server.apply(&file("02-xrd.yaml"));
    server.kubectl(&["wait", "--for=condition=Established", "xrd/xpostgresdatabases.example.org", "--timeout=60s"]);
    server.apply(&(file("03-composition.yaml") + "\n---\n" + &file("04-claim.yaml")));
    server.kubectl(&["wait", "--for=condition=Ready", "postgresdatabase/orders", "-n", "default", "--timeout=180s"]);

    // The claim's Secret logs in to the database it names, as the role that owns it.
    let secret = server.get(&["secret/orders-db", "-n", "default"]).expect("the claim's connection secret");
    let data = oxplane_runtime::managed::connection::decode_data(&secret);
    let value = |key: &str| String::from_utf8(data.get(key).cloned().unwrap_or_else(|| panic!("orders-db has no {key}"))).unwrap();
    let (user, database) = (value("username"), value("database"));
    assert_eq!(value("endpoint"), "127.0.0.1");
    assert_eq!(value("port"), pg.port.to_string());
    assert!(user.starts_with("orders-"), "named after the composite resource: {user}");
    assert_eq!(user, database);
    assert_eq!(pg.psql_as(&user, &value("password"), &database, "SELECT current_user, current_database()").unwrap(), format!("{user}|{database}"));
    assert_eq!(pg.psql("postgres", &format!("SELECT rolconnlimit, rolcanlogin FROM pg_roles WHERE rolname = '{user}'")), "5|t");
    assert_eq!(pg.psql("postgres", &format!("SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = '{database}'")), user);
    assert_eq!(pg.psql("postgres", &format!("SELECT has_database_privilege('{user}', '{database}', 'CONNECT')")), "t");
    let composite = server.get(&["xpostgresdatabases"]).unwrap();
    assert_eq!(composite["items"][0]["status"]["owner"], user.as_str(), "the owner is reported back");

    // Deleting the claim takes the role, the database and the grant out of the server.
    server.kubectl(&["delete", "postgresdatabase/orders", "-n", "default", "--timeout=180s"]);
    within(Duration::from_secs(120), "the composed resources to be gone", || {
        ["roles.postgresql.sql.crossplane.io", "databases.postgresql.sql.crossplane.io", "grants.postgresql.sql.crossplane.io"]
            .iter()
            .all(|kind| server.get(&[kind]).is_none_or(|l| l["items"].as_array().is_none_or(Vec::is_empty)))
    });
    assert_eq!(pg.psql("postgres", &format!("SELECT count(*) FROM pg_database WHERE datname = '{database}'")), "0");
    assert_eq!(pg.psql("postgres", &format!("SELECT count(*) FROM pg_roles WHERE rolname = '{user}'")), "0");
}

#[test]
fn sql_mysql_database_composition_example_works_as_the_readme_says() {
    let db = MariaDb::shared();
    let server = Server::start();
    server.apply(&mysql_file("00-install.yaml"));
    server.kubectl(&["wait", "--for=condition=Healthy", "provider/provider-sql", "function/function-patch-and-transform", "function/function-auto-ready", "--timeout=90s"]);
    let config = mysql_file("01-providerconfig.yaml").replace("password: change-me", &format!("password: {MARIA_PASSWORD}")).replace("port: \"3306\"", &format!("port: \"{}\"", db.port));
    assert_ne!(config, mysql_file("01-providerconfig.yaml"));
    server.apply(&config);
    server.apply(&mysql_file("02-xrd.yaml"));
    server.kubectl(&["wait", "--for=condition=Established", "xrd/xmysqldatabases.example.org", "--timeout=60s"]);
    server.apply(&(mysql_file("03-composition.yaml") + "\n---\n" + &mysql_file("04-claim.yaml")));
    server.kubectl(&["wait", "--for=condition=Ready", "mysqldatabase/inventory", "-n", "default", "--timeout=180s"]);

    // The claim's Secret logs in, and the account may make and use tables in its database.
    let secret = server.get(&["secret/inventory-db", "-n", "default"]).expect("the claim's connection secret");
    let data = oxplane_runtime::managed::connection::decode_data(&secret);
    let value = |key: &str| String::from_utf8(data.get(key).cloned().unwrap_or_else(|| panic!("inventory-db has no {key}"))).unwrap();
    let (user, database, password) = (value("username"), value("database"), value("password"));
    assert_eq!(value("endpoint"), "127.0.0.1");
    assert_eq!(value("port"), db.port.to_string());
    assert!(user.starts_with("inventory-"), "named after the composite resource: {user}");
    assert_eq!(user, database);
    let sql = format!("CREATE TABLE `{database}`.items (id int); INSERT INTO `{database}`.items VALUES (1); SELECT CURRENT_USER(), COUNT(*) FROM `{database}`.items");
    assert_eq!(db.mysql_as(&user, &password, &sql).unwrap(), format!("{user}@%\t1"));
    assert!(db.mysql_as(&user, &password, "CREATE DATABASE elsewhere").is_err(), "the account may use its own database only");
    assert_eq!(db.mysql(&format!("SELECT max_user_connections FROM mysql.user WHERE User = '{user}' AND Host = '%'")), "5");
    assert_eq!(db.mysql(&format!("SELECT DEFAULT_CHARACTER_SET_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '{database}'")), "utf8mb4");
    let composite = server.get(&["xmysqldatabases"]).unwrap();
    assert_eq!(composite["items"][0]["status"]["account"], format!("{user}@%").as_str(), "the account is reported back");

    // Deleting the claim takes the grant, the account and the database out of the server.
    server.kubectl(&["delete", "mysqldatabase/inventory", "-n", "default", "--timeout=180s"]);
    within(Duration::from_secs(120), "the composed resources to be gone", || {
        ["users.mysql.sql.crossplane.io", "databases.mysql.sql.crossplane.io", "grants.mysql.sql.crossplane.io"]
            .iter()
            .all(|kind| server.get(&[kind]).is_none_or(|l| l["items"].as_array().is_none_or(Vec::is_empty)))
    });
    assert_eq!(db.mysql(&format!("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '{database}'")), "0");
    assert_eq!(db.mysql(&format!("SELECT COUNT(*) FROM mysql.user WHERE User = '{user}'")), "0");
}
