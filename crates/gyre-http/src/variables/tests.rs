use super::*;

#[test]
fn registry_resolves_and_refuses_unknown() {
    let mut v = Variables::default();
    let a = v.index("uri").unwrap();
    let b = v.index("URI").unwrap();
    assert_eq!(a, b, "names are caseless");
    v.index("http_user_agent").unwrap();
    v.define_user("mine").unwrap();
    v.resolve().unwrap();
    assert_eq!(v.kind(1), &VarKind::Http(b"user-agent".to_vec().into()));
    assert_eq!(v.kind(2), &VarKind::User);
    v.index("nope").unwrap();
    assert_eq!(v.resolve().unwrap_err(), "unknown \"nope\" variable");
}

#[test]
fn args_and_cookies() {
    assert_eq!(arg(b"a=1&B=2&c", b"b"), Some(&b"2"[..]));
    assert_eq!(arg(b"a=1&c", b"c"), Some(&b""[..]));
    assert_eq!(arg(b"a=1", b"z"), None);
}
