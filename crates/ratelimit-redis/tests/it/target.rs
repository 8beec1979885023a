//! `Target::parse`: every URL form, refused forms naming the bad value,
//! and passwords never shown.

use ratelimit_redis::{RedisBuildError, Target};
use std::path::Path;

fn refused(url: &str, ca: Option<&Path>) -> String {
    match Target::parse(url, ca) {
        Ok(t) => panic!("{url:?} accepted as {t}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn plain_urls_are_clients() {
    let t = Target::parse(" redis://127.0.0.1:6379/2 ", None).unwrap();
    assert!(matches!(t, Target::Client(_)));
    assert_eq!(t.to_string(), "redis://127.0.0.1:6379/2");
}

#[test]
fn bad_urls_are_refused_naming_them() {
    for url in [
        "http://127.0.0.1/",
        "127.0.0.1:6379",
        "redis://127.0.0.1:notaport/",
    ] {
        let e = refused(url, None);
        assert!(e.contains(url), "{e}");
    }
    assert!(refused("", None).contains("empty"));
}

#[test]
fn passwords_are_never_shown() {
    let t = Target::parse("redis://app:s3cret@127.0.0.1:6379/0", None).unwrap();
    assert_eq!(t.to_string(), "redis://app:***@127.0.0.1:6379/0");
    assert!(!format!("{t:?}").contains("s3cret"));
    let t = Target::from("redis://:s3cret@127.0.0.1/");
    assert!(!format!("{t} {t:?}").contains("s3cret"), "{t}");
    for url in [
        "redis://app:s3cret@127.0.0.1:bad/",
        "http://app:s3cret@127.0.0.1/",
        "redis+sentinel://:s3cret@127.0.0.1/",
        "redis+sentinel://:s3cret@127.0.0.1:x/svc",
        "redis://:s3cret@127.0.0.1:1/,http://:s3cret@x/",
    ] {
        let e = refused(url, None);
        assert!(!e.contains("s3cret") && e.contains("***"), "{e}");
    }
}

#[test]
fn a_ca_file_is_checked() {
    let e = Target::parse(
        "rediss://127.0.0.1/",
        Some(Path::new("/nonexistent/ca.pem")),
    )
    .unwrap_err();
    assert!(matches!(e, RedisBuildError::TlsCa(_)), "{e}");
    assert!(e.to_string().contains("/nonexistent/ca.pem"), "{e}");
    let dir = std::env::temp_dir().join(format!("ratelimit-it-ca-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let empty = dir.join("empty.pem");
    std::fs::write(&empty, "not a certificate").unwrap();
    let e = refused("rediss://127.0.0.1/", Some(&empty));
    assert!(
        e.contains("empty.pem") && e.contains("no PEM certificate"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(feature = "tls")]
#[test]
fn a_ca_needs_a_tls_url() {
    let pki = ratelimit_test_support::tls::Pki::new("parse");
    let e = refused("redis://127.0.0.1/", Some(&pki.ca));
    assert!(e.contains("not rediss://"), "{e}");
    let t = Target::parse("rediss://127.0.0.1:6380/", Some(&pki.ca)).unwrap();
    assert_eq!(t.to_string(), "rediss://127.0.0.1:6380/0");
}

#[cfg(not(feature = "tls"))]
#[test]
fn tls_without_the_feature_says_so() {
    let e = refused("rediss://127.0.0.1/", None);
    assert!(e.contains("`tls` feature"), "{e}");
}

#[cfg(feature = "sentinel")]
#[test]
fn sentinel_urls() {
    let t = Target::parse(
        "redis+sentinel://:pa%40ss@127.0.0.1:26379,localhost:26380/mymaster/3",
        None,
    )
    .unwrap();
    assert!(matches!(t, Target::Sentinel(_)));
    assert_eq!(
        t.to_string(),
        "redis+sentinel://:***@127.0.0.1:26379,localhost:26380/mymaster/3"
    );
    for (url, why) in [
        ("redis+sentinel://127.0.0.1:26379", "no /service_name"),
        ("redis+sentinel://127.0.0.1:26379/", "no service name"),
        ("redis+sentinel://127.0.0.1/mymaster", "not host:port"),
        ("redis+sentinel://127.0.0.1:x/mymaster", "no valid port"),
        ("redis+sentinel://127.0.0.1:1/m/x", "not a number"),
    ] {
        let e = refused(url, None);
        assert!(e.contains(why) && e.contains(url), "{e}");
    }
}

#[cfg(not(feature = "sentinel"))]
#[test]
fn sentinel_without_the_feature_says_so() {
    let e = refused("redis+sentinel://127.0.0.1:26379/mymaster", None);
    assert!(e.contains("`sentinel` feature"), "{e}");
}

#[cfg(feature = "cluster")]
#[test]
fn node_lists_are_clusters() {
    let t = Target::parse("redis://127.0.0.1:7000/, redis://127.0.0.1:7001/", None).unwrap();
    assert!(matches!(t, Target::Cluster(_)));
    let e = refused("redis://127.0.0.1:7000/,rediss://127.0.0.1:7001/", None);
    assert!(e.contains("must be a redis:// url"), "{e}");
}

#[cfg(not(feature = "cluster"))]
#[test]
fn clusters_without_the_feature_say_so() {
    let e = refused("redis://127.0.0.1:7000/,redis://127.0.0.1:7001/", None);
    assert!(e.contains("`cluster` feature"), "{e}");
}
