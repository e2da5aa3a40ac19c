//! Unit tests of `auth`.

use super::*;

fn auth(text: &str) -> Auth {
    Auth {
        path: Some(PathBuf::from("test")),
        rules: RwLock::new(Arc::new(Rules::parse(text).expect("rules"))),
        generation: Default::default(),
    }
}

const FILE: &str = r#"
    [roles.jobs]
    lock = ["jobs/"]
    [principals.admin]
    roles = ["admin"]
    [principals.ci]
    roles = ["jobs"]
    tokens = ["sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"]
    [principals.viewer]
    roles = ["read"]
"#;

#[test]
fn each_role_is_allowed_its_own_and_nothing_more() {
    let a = auth(FILE);
    let who = |n: &str| Principal::Client(n.into());
    let lock = Action::Lock("jobs/a".into());
    let other = Action::Lock("db/a".into());
    assert!(a.check(&who("ci"), &lock).is_ok());
    assert!(matches!(
        a.check(&who("ci"), &other),
        Err(Denied::Forbidden(_))
    ));
    assert!(a
        .check(&who("ci"), &Action::ReadKey("jobs/a".into()))
        .is_ok());
    assert!(a.check(&who("ci"), &Action::Read).is_err());
    assert!(a.check(&who("viewer"), &Action::Read).is_ok());
    assert!(a.check(&who("viewer"), &lock).is_err());
    assert!(a.check(&who("viewer"), &Action::Admin).is_err());
    let admin = a.check(&who("admin"), &Action::Admin).expect("admin");
    assert!(admin.admin && admin.principal == "admin");
    assert!(matches!(
        a.check(&Principal::Anonymous, &Action::Read),
        Err(Denied::Unauthenticated(_))
    ));
    assert!(a.check(&who("stranger"), &Action::Any).is_ok());
    let e = a.check(&who("stranger"), &Action::Read).unwrap_err();
    assert!(e.to_string().contains("no roles"), "{e}");
    assert!(a.check(&Principal::Node(2), &Action::Read).is_ok());
    assert!(a.check(&Principal::Node(2), &lock).is_err());
    // Authentication off: everything, and no principal recorded.
    assert_eq!(
        Auth::off().check(&Principal::Anonymous, &Action::Admin),
        Ok(Access::open())
    );
}

#[test]
fn a_token_names_its_principal_and_a_forwarded_one_needs_a_node() {
    let a = auth(FILE);
    assert_eq!(
        a.authenticate(Some("test"), Some("alice".into()), None, None),
        Ok(Principal::Client("ci".into()))
    );
    assert!(matches!(
        a.authenticate(Some("wrong"), Some("alice".into()), None, None),
        Err(Denied::Unauthenticated(_))
    ));
    assert_eq!(
        a.authenticate(None, Some("alice".into()), None, None),
        Ok(Principal::Client("alice".into()))
    );
    assert_eq!(
        a.authenticate(None, None, None, None),
        Ok(Principal::Anonymous)
    );
    assert_eq!(
        a.authenticate(None, Some("node-2.lockd".into()), Some(2), Some("ci")),
        Ok(Principal::Client("ci".into()))
    );
    assert!(matches!(
        a.authenticate(None, Some("alice".into()), None, Some("admin")),
        Err(Denied::Forbidden(_))
    ));
}

#[test]
fn a_holding_is_the_holder_s_or_admin_s() {
    let ci = Access {
        principal: "ci".into(),
        admin: false,
    };
    assert!(ci.owns(Some("ci")));
    assert!(!ci.owns(Some("other")));
    // Nobody recorded the holder (a world-0.1 module after a leader
    // change, or a grant from before authentication was on).
    assert!(ci.owns(None) && ci.owns(Some("")));
    assert!(Access::open().owns(Some("other")));
}
