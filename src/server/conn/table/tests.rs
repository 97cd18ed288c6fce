use super::*;

fn ip(last: u8) -> IpAddr {
    IpAddr::from([10, 0, 0, last])
}

/// A connection last active at `ms`, with `busy` requests in flight.
fn conn(ms: u64, busy: u32) -> Arc<Live> {
    let live = Live::new(ms);
    for _ in 0..busy {
        live.start_request();
    }
    Arc::new(live)
}

fn admit(table: &mut Table, peer: IpAddr, live: &Arc<Live>) -> (Slot, Option<Arc<Live>>) {
    match table.admit(peer, live.clone()) {
        Admission::Admitted { slot, evicted } => (slot, evicted),
        Admission::Full => panic!("refused a connection from {peer}"),
    }
}

#[test]
fn under_the_cap_nobody_is_evicted() {
    let mut table = Table::new(3);
    for ms in 0..3 {
        let (_, evicted) = admit(&mut table, ip(1), &conn(ms, 0));
        assert!(evicted.is_none());
    }
    assert_eq!(table.len(), 3);
}

#[test]
fn a_full_table_evicts_the_connection_silent_longest() {
    let mut table = Table::new(3);
    let (a, b, c) = (conn(30, 0), conn(10, 0), conn(20, 0));
    for live in [&a, &b, &c] {
        admit(&mut table, ip(1), live);
    }
    let (_, evicted) = admit(&mut table, ip(1), &conn(40, 0));
    assert!(Arc::ptr_eq(&evicted.unwrap(), &b), "b was silent longest");
    assert!(b.evicted().is_cancelled(), "the evicted connection is told");
    assert!(!a.evicted().is_cancelled() && !c.evicted().is_cancelled());
    assert_eq!(table.len(), 3);
    // Activity counts: once b's successor is the most recent, `c` is next.
    a.touch(50);
    let (_, evicted) = admit(&mut table, ip(1), &conn(60, 0));
    assert!(Arc::ptr_eq(&evicted.unwrap(), &c));
}

#[test]
fn busy_connections_are_never_evicted() {
    let mut table = Table::new(2);
    let (old_busy, idle) = (conn(0, 1), conn(5, 0));
    admit(&mut table, ip(1), &old_busy);
    admit(&mut table, ip(1), &idle);
    let (_, evicted) = admit(&mut table, ip(2), &conn(9, 0));
    assert!(Arc::ptr_eq(&evicted.unwrap(), &idle), "the idle one goes, though younger");
    assert!(!old_busy.evicted().is_cancelled());

    let mut table = Table::new(2);
    let (x, y) = (conn(0, 1), conn(1, 2));
    admit(&mut table, ip(1), &x);
    admit(&mut table, ip(2), &y);
    assert!(matches!(table.admit(ip(3), conn(2, 0)), Admission::Full), "every slot busy: refused");
    // A request ends: that connection is idle and can go.
    x.end_request();
    let (_, evicted) = admit(&mut table, ip(3), &conn(3, 0));
    assert!(Arc::ptr_eq(&evicted.unwrap(), &x));
}

#[test]
fn a_flooder_competes_with_itself_not_with_the_api_server() {
    let api_server = ip(1);
    let flooder = ip(66);
    let mut table = Table::new(10);
    // The API server's connection is the oldest and idle, the flooder's are newer.
    let kept = conn(0, 0);
    admit(&mut table, api_server, &kept);
    for ms in 1..10 {
        admit(&mut table, flooder, &conn(ms, 0));
    }
    // More from the flooder: each evicts the flooder's own oldest.
    for ms in 10..30 {
        let (_, evicted) = admit(&mut table, flooder, &conn(ms, 0));
        assert!(evicted.is_some());
        assert!(!kept.evicted().is_cancelled(), "the API server keeps its slot");
    }
    // The API server opens more connections under load: they take the flooder's slots, up to
    // the point where it holds the most itself.
    let mut api = vec![kept.clone()];
    for ms in 30..34 {
        let live = conn(ms, 0);
        let (_, evicted) = admit(&mut table, api_server, &live);
        assert!(evicted.is_some_and(|gone| !api.iter().any(|a| Arc::ptr_eq(a, &gone))), "a flooder's slot");
        api.push(live);
    }
    assert_eq!(table.per_peer[&api_server], 5);
    assert_eq!(table.per_peer[&flooder], 5);
    // Half each: another connection of the API server's would make it the larger holder, so it
    // competes with its own.
    let (_, evicted) = admit(&mut table, api_server, &conn(40, 0));
    assert!(Arc::ptr_eq(&evicted.unwrap(), &kept), "its own connection silent longest");
}

#[test]
fn among_peers_holding_as_many_the_silent_longest_goes() {
    let mut table = Table::new(4);
    let (a1, a2, b1, b2) = (conn(5, 0), conn(6, 0), conn(1, 0), conn(7, 0));
    admit(&mut table, ip(1), &a1);
    admit(&mut table, ip(1), &a2);
    admit(&mut table, ip(2), &b1);
    admit(&mut table, ip(2), &b2);
    let (_, evicted) = admit(&mut table, ip(3), &conn(8, 0));
    assert!(Arc::ptr_eq(&evicted.unwrap(), &b1));
}

#[test]
fn removing_gives_the_slot_back_once() {
    let mut table = Table::new(1);
    let live = conn(0, 1);
    let (slot, _) = admit(&mut table, ip(1), &live);
    assert!(matches!(table.admit(ip(2), conn(1, 0)), Admission::Full));
    assert!(table.remove(slot).is_some());
    assert!(table.remove(slot).is_none(), "an evicted or ended slot is gone once");
    assert!(table.per_peer.is_empty());
    let (_, evicted) = admit(&mut table, ip(2), &conn(2, 0));
    assert!(evicted.is_none());
}
