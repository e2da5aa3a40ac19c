//! A guard tells its holder when the lock is lost: with keepalive on, a
//! lock force-released by an admin is noticed at the next renewal, and
//! `LockGuard::lost()` resolves long before the lease would have ended.

use std::time::Duration;

use lockd_client::Client;
use lockd_tests::cluster::Cluster;

#[test]
fn lost_resolves_when_a_renewal_is_refused() {
    let c = Cluster::start(1, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let client = Client::new(c.endpoints());
        // Renewed every 10 s; the lease alone would last 30 s.
        let lease = Duration::from_secs(30);
        let mut g = client
            .acquire("lost/k", lease, Duration::ZERO)
            .await
            .expect("acquire");
        g.keep_alive();
        let path = format!("/v1/locks/lost/k/holders/{}", g.token());
        let r = c.delete(leader, &path).expect("force release");
        assert!(r.ok(), "{r:?}");
        // The refused renewal (within 10 s) ends it, not the deadline.
        tokio::time::timeout(Duration::from_secs(20), g.lost())
            .await
            .expect("lost() resolved at the refused renewal");
        assert!(!g.is_valid());
    });
}
