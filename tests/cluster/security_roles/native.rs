//! Every native request, refused to the unknown and the unentitled.

use super::*;

#[test]
fn every_native_request_refuses_the_unknown_and_the_unentitled() {
    let c = Cluster::start_secure(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    let rt = rt();
    let lease = Duration::from_secs(30);
    // (right, wrong role, wrong prefix) for each request, on `jobs/` keys
    // (alice's) and `db/` keys (nobody's but worker's and admin's).
    let outcomes = |who: Who| {
        let cl = client(&c, who);
        rt.block_on(async {
            let key = format!("jobs/native-{who:?}");
            let acquired = cl.acquire(&key, lease, Duration::ZERO).await;
            let token = acquired.as_ref().map(|g| g.token()).unwrap_or(1);
            let with = cl
                .acquire_with(&format!("{key}-2"), AcquireOptions::exclusive(lease))
                .await;
            vec![
                ("acquire", refusal(acquired)),
                ("acquire_with", refusal(with)),
                ("keepalive", refusal(cl.keepalive(&key, token).await)),
                ("get", refusal(cl.get(&key).await)),
                ("holders", refusal(cl.holders(&key).await)),
                ("list", refusal(cl.list("jobs/", None, 10).await)),
                ("release", refusal(cl.release(&key, token).await)),
                (
                    "acquire db/",
                    refusal(cl.acquire("db/n", lease, Duration::ZERO).await),
                ),
                ("list db/", refusal(cl.list("db/", None, 10).await)),
                ("status", refusal(cl.status_of(c.addr(leader)).await)),
            ]
        })
    };
    let expect = |who: Who, want: &[(&str, &str)]| {
        let got = outcomes(who);
        for (what, outcome) in want {
            let seen = got.iter().find(|(w, _)| w == what).map(|x| x.1);
            assert_eq!(seen, Some(*outcome), "{what} as {who:?}: {got:?}");
        }
    };
    // No credentials, or a token nobody knows.
    for who in [Who::Nobody, Who::BadToken] {
        let all: Vec<(&str, &str)> = [
            "acquire",
            "acquire_with",
            "keepalive",
            "get",
            "holders",
            "list",
            "release",
            "status",
        ]
        .iter()
        .map(|w| (*w, "unauthenticated"))
        .collect();
        expect(who, &all);
    }
    // The right role (lock use under jobs/), and the wrong prefix.
    expect(
        ALICE,
        &[
            ("acquire", "ok"),
            ("acquire_with", "ok"),
            ("keepalive", "ok"),
            ("get", "ok"),
            ("holders", "ok"),
            ("list", "ok"),
            ("release", "ok"),
            ("acquire db/", "forbidden"),
            ("list db/", "forbidden"),
            ("status", "forbidden"),
        ],
    );
    // The wrong role: reads only.
    expect(
        READER,
        &[
            ("acquire", "forbidden"),
            ("acquire_with", "forbidden"),
            ("keepalive", "forbidden"),
            ("release", "forbidden"),
            ("get", "ok"),
            ("holders", "ok"),
            ("list", "ok"),
            ("status", "ok"),
        ],
    );
    // A known certificate without roles.
    expect(
        STRANGER,
        &[
            ("acquire", "forbidden"),
            ("get", "forbidden"),
            ("status", "forbidden"),
        ],
    );
}
