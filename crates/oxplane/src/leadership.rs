//! Which of the servers on one store runs the controllers: the holder of the
//! `kube-system/oxplane-controllers` Lease, campaigned for with kube-lease-manager and
//! Kubernetes' timing (kube-controller-manager's defaults).
//!
//! kube-lease-manager keeps reporting leadership while its renewals fail (a server cut off from
//! the store cannot renew, yet it would go on leading), which would let two servers run the
//! controllers once another one takes the expired lease. So, as client-go's elector does with
//! its renew deadline, a server counts itself leading only while the Lease names it and it has
//! seen the Lease renewed within the deadline; the deadline ends before the lease does, so its
//! controllers have stopped before another server may take over.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use tokio::sync::watch;

/// The Lease the servers on one store elect their controllers' leader through.
pub const LEASE: &str = "oxplane-controllers";
/// The Lease's namespace.
pub const NAMESPACE: &str = "kube-system";
/// kube-controller-manager's defaults: a lease lasts 15 s and is renewed 5 s before it ends.
const LEASE_SECONDS: u64 = 15;
const LEASE_GRACE_SECONDS: u64 = 5;
/// How long after the last renewal it has seen the holder still counts itself leading: two
/// seconds less than the lease, for the controllers to stop before anyone else may lead.
const RENEW_DEADLINE: Duration = Duration::from_secs(LEASE_SECONDS - 2);
/// How often the holder reads the Lease back.
const CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// Campaigns for the Lease as `identity`, from a task of its own. The receiver says whether
/// this server leads; it closes when the campaign ends (it could not start: logged). Dropping
/// every receiver ends the campaign and releases the Lease.
pub fn campaign(client: kube::Client, identity: String) -> watch::Receiver<bool> {
    let (leading, receiver) = watch::channel(false);
    tokio::spawn(async move {
        let manager = kube_lease_manager::LeaseManagerBuilder::new(client.clone(), LEASE)
            .with_namespace(NAMESPACE)
            .with_identity(identity.clone())
            .with_duration(LEASE_SECONDS)
            .with_grace(LEASE_GRACE_SECONDS)
            .build()
            .await;
        let manager = match manager {
            Ok(manager) => manager,
            Err(error) => {
                tracing::error!(%error, "cannot campaign for the controllers' lease");
                return;
            }
        };
        let (mut elected, _campaign) = manager.watch().await;
        let api: Api<Lease> = Api::namespaced(client, NAMESPACE);
        let mut renewed: Option<SystemTime> = None;
        let mut ticks = tokio::time::interval(CHECK_INTERVAL);
        loop {
            tokio::select! {
                changed = elected.changed() => if changed.is_err() { return },
                _ = ticks.tick() => {}
                () = leading.closed() => return,
            }
            let is_elected = *elected.borrow_and_update();
            if is_elected {
                renewed = last_renewal(&api, &identity, renewed).await;
            } else {
                renewed = None;
            }
            let leads = is_elected && renewed.is_some_and(within_deadline);
            let changed = leading.send_if_modified(|current| std::mem::replace(current, leads) != leads);
            if changed && !leads {
                tracing::warn!(%identity, "no longer leading: the controllers' lease went to another server or was not renewed within {RENEW_DEADLINE:?}");
            }
        }
    });
    receiver
}

/// The Lease's last renewal by `identity` as read now; `None` once it names another holder;
/// `known` when it cannot be read (a failed read alone does not end leadership: the deadline
/// does).
async fn last_renewal(api: &Api<Lease>, identity: &str, known: Option<SystemTime>) -> Option<SystemTime> {
    let Ok(lease) = api.get(LEASE).await else { return known };
    let spec = lease.spec?;
    if spec.holder_identity.as_deref() != Some(identity) {
        return None;
    }
    spec.renew_time.map(|time| time.0.into())
}

/// Whether a renewal at `renewed` is recent enough to go on leading.
fn within_deadline(renewed: SystemTime) -> bool {
    // A renewal stamped in the future (clock skew between servers) counts as recent.
    SystemTime::now().duration_since(renewed).map_or(true, |age| age < RENEW_DEADLINE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deadline_ends_before_the_lease() {
        let now = SystemTime::now();
        assert!(within_deadline(now));
        assert!(within_deadline(now + Duration::from_secs(5)));
        assert!(within_deadline(now - Duration::from_secs(LEASE_SECONDS - LEASE_GRACE_SECONDS)));
        assert!(!within_deadline(now - RENEW_DEADLINE));
        assert!(RENEW_DEADLINE > Duration::from_secs(LEASE_SECONDS - LEASE_GRACE_SECONDS));
        assert!(RENEW_DEADLINE < Duration::from_secs(LEASE_SECONDS));
    }
}
