//! The API keys (`API_KEYS`): parsed without ever showing a key, and only
//! listed keys are keys (an unknown one steps aside for the per-key
//! limits and gets 401; a malformed one is 400).

use axum_example::ApiKeys;

fn req(key: Option<&[u8]>) -> axum::http::request::Parts {
    let mut b = axum::http::Request::builder();
    if let Some(k) = key {
        b = b.header("x-api-key", axum::http::HeaderValue::from_bytes(k).unwrap());
    }
    b.body(()).unwrap().into_parts().0
}

#[test]
fn parsing() {
    let keys = ApiKeys::parse(" demo-key-1, ,demo-key-2,,").unwrap();
    assert_eq!(keys.len(), 2);
    let known = |keys: &ApiKeys, key: &str| keys.known(&req(Some(key.as_bytes()))).is_ok();
    assert!(known(&keys, "demo-key-1") && known(&keys, "demo-key-2"));
    assert!(!known(&keys, "demo-key-3"));
    assert!(ApiKeys::parse("").unwrap().is_empty());
    assert!(ApiKeys::default().is_empty());
    for bad in ["ok,a b", "ok,caf\u{e9}", &"k".repeat(257)] {
        let e = ApiKeys::parse(bad).unwrap_err();
        assert_eq!(e.variable, "API_KEYS");
        assert_eq!(e.value, None, "keys are secrets");
        assert!(!e.to_string().contains("a b"), "{e}");
    }
    assert!(ApiKeys::parse(&"k".repeat(256)).is_ok());
    assert_eq!(format!("{keys:?}"), "ApiKeys(2 keys)");
}

#[test]
fn only_listed_keys_are_keys() {
    let keys = ApiKeys::parse("demo-key-1").unwrap();
    let listed = req(Some(b"demo-key-1"));
    assert_eq!(keys.known(&listed).unwrap().stored(), "demo-key-1");
    assert!(!keys.is_unknown(&listed));
    // Unknown: no key for the per-key limit (no state), but a 401.
    let made_up = req(Some(b"demo-key-3"));
    assert!(keys.known(&made_up).unwrap_err().is_missing());
    assert!(keys.is_unknown(&made_up));
    // Absent or blank: anonymous, not unknown.
    for anonymous in [req(None), req(Some(b"  "))] {
        assert!(keys.known(&anonymous).unwrap_err().is_missing());
        assert!(!keys.is_unknown(&anonymous));
    }
    // A listed key over 64 bytes, which the limit names by its hash.
    let long = "k".repeat(ApiKeys::MAX_LEN);
    let keys = ApiKeys::parse(&format!("demo-key-1,{long}")).unwrap();
    let sent = req(Some(format!(" {long} ").as_bytes()));
    assert!(keys.known(&sent).unwrap().is_hashed());
    assert!(!keys.is_unknown(&sent));
    assert!(keys.is_unknown(&req(Some("k".repeat(200).as_bytes()))));
    // Malformed: 400 from the per-key limit.
    let e = keys.known(&req(Some(b"a b"))).unwrap_err();
    assert!(!e.is_missing());
    assert_eq!(e.status(), 400);
}
