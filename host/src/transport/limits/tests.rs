//! The budgets, on their own: caps, moves between budgets, expiry, and
//! the per-prefix keys.

use super::*;

fn ip(s: &str) -> IpAddr {
    s.parse().expect("ip")
}

fn gate() -> Gate {
    Gate::new(ConnLimits {
        max_connections: 3,
        max_connections_per_ip: 2,
        max_handshakes: 4,
        max_handshakes_per_ip: 2,
        max_unauthenticated: 3,
        max_unauthenticated_per_ip: 1,
        ..ConnLimits::default()
    })
}

fn client(g: &Gate, from: &str, authenticated: bool) -> Result<Slot, String> {
    let slot = g.open(ip(from))?;
    slot.settle(authenticated)?;
    Ok(slot)
}

#[test]
fn caps_hold_in_all_and_per_address_and_places_come_back() {
    let g = gate();
    let a1 = client(&g, "10.0.0.1", true).expect("first");
    let _a2 = client(&g, "10.0.0.1", true).expect("second");
    let why = client(&g, "10.0.0.1", true).err().expect("third from a");
    assert!(why.contains("--max-connections-per-ip"), "{why}");
    let _b1 = client(&g, "10.0.0.2", true).expect("b");
    let why = client(&g, "10.0.0.2", true).err().expect("fourth in all");
    assert!(why.contains("(--max-connections)"), "{why}");
    drop(a1);
    assert_eq!(g.counts(ip("10.0.0.1"))[2], (2, 1));
    client(&g, "10.0.0.2", true).expect("room again");
    // Refused ones hold no place once dropped.
    assert_eq!(g.counts(ip("10.0.0.1"))[0], (0, 0));
}

#[test]
fn the_opening_phase_is_bounded_per_address_and_in_all() {
    let g = gate();
    let _o = [g.open(ip("10.0.0.1")), g.open(ip("10.0.0.1"))];
    let why = g.open(ip("10.0.0.1")).err().expect("a third opening");
    assert!(why.contains("--max-handshakes-per-ip"), "{why}");
    let _p = [g.open(ip("10.0.0.2")), g.open(ip("10.0.0.3"))];
    let why = g.open(ip("10.0.0.4")).err().expect("a fifth opening");
    assert!(why.contains("(--max-handshakes)"), "{why}");
    // A peer gives its opening place back and takes no other; so does
    // a connection still opening at its deadline, once.
    let g = gate();
    let p = g.open(ip("10.0.0.1")).expect("open");
    p.peer();
    assert_eq!(g.counts(ip("10.0.0.1")), [(0, 0); 3]);
    let late = g.open(ip("10.0.0.1")).expect("open");
    assert!(late.expire_opening());
    assert!(!late.expire_opening());
    assert!(late.settle(true).is_err(), "expired: no place to move");
    assert_eq!(g.counts(ip("10.0.0.1")), [(0, 0); 3]);
    let settled = client(&g, "10.0.0.1", true).expect("client");
    assert!(!settled.expire_opening(), "past its opening phase");
}

#[test]
fn the_unauthenticated_budget_is_apart_and_authenticating_moves_a_place() {
    let g = gate();
    let u = client(&g, "10.0.0.1", false).expect("unauthenticated");
    let why = client(&g, "10.0.0.1", false).err().expect("second from a");
    assert!(why.contains("--max-unauthenticated-per-ip"), "{why}");
    // Authenticated clients from the same address still get in.
    let _a = client(&g, "10.0.0.1", true).expect("authenticated");
    assert!(!u.is_authenticated());
    u.settle(true).expect("moves");
    assert!(u.is_authenticated());
    assert_eq!(g.counts(ip("10.0.0.1"))[1..], [(0, 0), (2, 2)]);
    // The clients' budget is full for this address now: a second
    // unauthenticated connection stays unauthenticated.
    let v = client(&g, "10.0.0.1", false).expect("room again");
    v.settle(true).expect("stays, without an error");
    assert!(!v.is_authenticated());
    assert_eq!(g.counts(ip("10.0.0.1"))[1], (1, 1));
}

#[test]
fn ipv6_is_counted_per_64_and_mapped_ipv4_as_ipv4() {
    assert_eq!(prefix(ip("2001:db8:1:2:aaaa::1")), ip("2001:db8:1:2::"));
    assert_eq!(prefix(ip("::ffff:10.0.0.1")), ip("10.0.0.1"));
    let g = gate();
    let _a = client(&g, "2001:db8:1:2::1", false).expect("first of the /64");
    let why = client(&g, "2001:db8:1:2:ffff::9", false)
        .err()
        .expect("same /64");
    assert!(why.contains("2001:db8:1:2::"), "{why}");
    client(&g, "2001:db8:1:3::1", false).expect("another /64");
}
