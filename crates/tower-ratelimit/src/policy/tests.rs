//! The table's unit tests: keys, routes and entries as the file writes them.

use super::extractor::{Part, PolicyOptions};
use super::key::{KeySpec, PolicyKey};
use super::load::PolicyTable;
use http::request::Parts;
use ratelimit_core::algorithm::StableKey;

/// The key `spec` gives `req`.
fn key(spec: &str, req: &Parts) -> PolicyKey {
    let KeySpec(parts) = spec.parse().unwrap();
    let options = PolicyOptions::default();
    let parts: Vec<Part> = parts
        .iter()
        .map(|p| Part::new(p, &options).unwrap())
        .collect();
    match parts.as_slice() {
        [one] => one.extract(req).unwrap(),
        many => PolicyKey::Composite(many.iter().map(|p| p.extract(req).unwrap()).collect()),
    }
}

#[test]
fn entries_say_what_they_check_and_key() {
    let table = PolicyTable::from_toml(
        "[[limit]]\nname = \"items\"\nalgorithm = \"gcra 2/1m\"\nkey = \"header:x-tenant+route\"\n\
         routes = [\"GET /items\"]\ntier = \"anonymous\"\n",
        None,
    )
    .unwrap();
    let entry = &table.entries()[0];
    let req = |method: &str, auth: bool| {
        let mut b = http::Request::builder()
            .method(method)
            .uri("/items")
            .header("x-tenant", "acme");
        if auth {
            b = b.header("authorization", "Bearer t");
        }
        b.body(()).unwrap().into_parts().0
    };
    let options = PolicyOptions::default();
    assert!(entry.applies_to(&req("GET", false), &options));
    assert!(
        entry.applies_to(&req("HEAD", false), &options),
        "HEAD under GET"
    );
    assert!(!entry.applies_to(&req("POST", false), &options));
    assert!(!entry.applies_to(&req("GET", true), &options), "tier");
    let key = entry.key.extractor(&options).unwrap();
    assert_eq!(
        key(&req("GET", false)).unwrap().to_string(),
        "acme|GET /items"
    );
    let app: KeySpec = "app:user".parse().unwrap();
    let Err(e) = app.extractor(&options) else {
        panic!("app:user is not defined")
    };
    assert!(e.contains("app:user"), "{e}");
}

#[test]
fn credentials_make_secret_keys() {
    let req = http::Request::builder()
        .header("x-api-key", "k-1")
        .header("authorization", "Bearer t")
        .header("x-tenant", "acme")
        .body(())
        .unwrap()
        .into_parts()
        .0;
    for (spec, secret) in [
        ("api-key", true),
        ("bearer", true),
        ("header:x-tenant", false),
        ("secret-header:x-tenant", true),
        ("header:x-api-key", true),
        ("route", false),
        ("route+api-key", true),
        ("route+header:x-tenant", false),
    ] {
        assert_eq!(key(spec, &req).is_secret(), secret, "{spec}");
    }
    assert_eq!(key("secret-header:x-tenant", &req).to_string(), "acme");
    assert!("secret-header:bad name".parse::<KeySpec>().is_err());
}

#[test]
fn a_plan_lists_its_members_in_an_environment_variable() {
    let text = "[[plan]]\nname = \"free\"\nkey = \"api-key\"\nkeys-env = \"FREE_KEYS\"\n";
    let env = |var: &str| (var == "FREE_KEYS").then(|| "free-1, free-2\nfree-3,".to_owned());
    let table = PolicyTable::from_toml_with(text, None, &env).unwrap();
    let router = axum::Router::new().route("/", axum::routing::get(|| async { "" }));
    let (_, handle) = table
        .apply_in_memory(router, &PolicyOptions::default(), None)
        .unwrap();
    assert_eq!(handle.plans().members()[0].listed, 3);
    let req = http::Request::builder()
        .header("x-api-key", "free-2")
        .body(())
        .unwrap()
        .into_parts()
        .0;
    assert_eq!(handle.plans().plan_of(&req), "free");
    let unset = PolicyTable::from_toml_with(text, None, &|_: &str| None).unwrap_err();
    assert!(
        unset.message.contains("keys-env FREE_KEYS is not set"),
        "{unset}"
    );
}
