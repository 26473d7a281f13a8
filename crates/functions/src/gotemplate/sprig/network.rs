//! Sprig's `getHostByName`, kept inside the machine.
//!
//! Sprig asks the system resolver, which may send a DNS query anywhere. A composition
//! function runs on every reconcile and must not reach the network, and its output must not
//! depend on a remote answer, so only names that never leave the machine are answered: an IP
//! address is its own answer (as Go's `net.LookupHost` gives it), and `localhost` is answered
//! from the hosts file (`/etc/hosts`, where the system resolver reads it first), or
//! `127.0.0.1` when that file does not name it (RFC 6761: localhost is always loopback).
//! Any other name is refused with an error saying why. Where Sprig picks one of several
//! addresses at random, the first the hosts file lists is given, so a template renders the
//! same on every reconcile.

use std::net::IpAddr;

use serde_json::Value;

use super::s;
use crate::gotemplate::{Func, Funcs, P};

/// The hosts file localhost is read from.
const HOSTS_FILE: &str = "/etc/hosts";

/// Registers `getHostByName`.
pub(super) fn add(f: &mut Funcs) {
    f.insert("getHostByName", Func::pure(&[P::Str], |a| {
        let hosts = std::fs::read_to_string(HOSTS_FILE).unwrap_or_default();
        get_host_by_name(s(a[0]), &hosts).map(Value::String)
    }));
}

/// The address for `name`, given the hosts file's text.
pub(crate) fn get_host_by_name(name: &str, hosts: &str) -> Result<String, String> {
    if let Ok(ip) = name.parse::<IpAddr>() {
        return Ok(ip.to_string());
    }
    let bare = name.strip_suffix('.').unwrap_or(name);
    if !bare.eq_ignore_ascii_case("localhost") {
        return Err(format!(
            "getHostByName {name:?}: oxplane resolves only localhost and IP addresses in templates, \
             so that rendering never sends traffic off the machine"
        ));
    }
    let listed = hosts.lines().find_map(|line| {
        let line = line.split('#').next().unwrap_or_default();
        let mut fields = line.split_whitespace();
        let address = fields.next()?.parse::<IpAddr>().ok()?;
        fields.any(|alias| alias.eq_ignore_ascii_case("localhost")).then_some(address)
    });
    Ok(listed.map_or_else(|| "127.0.0.1".to_string(), |ip| ip.to_string()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn ip_addresses_answer_themselves() {
        assert_eq!(get_host_by_name("10.1.2.3", "").unwrap(), "10.1.2.3");
        assert_eq!(get_host_by_name("::1", "").unwrap(), "::1");
    }

    #[test]
    fn localhost_comes_from_the_hosts_file_first_entry() {
        let hosts = "# comment localhost\n127.0.1.1 box\n::1 ip6-localhost localhost\n127.0.0.1 localhost\n";
        assert_eq!(get_host_by_name("localhost", hosts).unwrap(), "::1");
        assert_eq!(get_host_by_name("LOCALHOST.", hosts).unwrap(), "::1");
        assert_eq!(get_host_by_name("localhost", "127.0.1.1 box\n").unwrap(), "127.0.0.1");
    }

    #[test]
    fn other_names_are_refused_with_the_reason() {
        let error = get_host_by_name("example.com", "93.184.216.34 example.com\n").unwrap_err();
        assert!(error.contains("\"example.com\""), "{error}");
        assert!(error.contains("only localhost and IP addresses"), "{error}");
        assert!(get_host_by_name("db.localhost", "").is_err());
    }
}
