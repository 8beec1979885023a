//! `POST /settle`: a cost known after the response charged (into debt) or given back.

use crate::harness::{Answer, Harness};

const LIMITS: &str = r#"
[[limit]]
name = "tokens"
domain = "llm"
algorithm = "token-bucket 100 refill 100/1h"
descriptors = [{ key = "tenant" }]

[[limit]]
name = "pair"
domain = "llm"
algorithm = "gcra 5/1s"
descriptors = [{ key = "tenant" }, { key = "user" }]
"#;

/// The number after `"name":` in a JSON body.
fn number(a: &Answer, name: &str) -> u64 {
    let after = a
        .body
        .split(&format!("\"{name}\":"))
        .nth(1)
        .unwrap_or_else(|| panic!("no {name} in {}", a.body));
    after[..after.find([',', '}']).unwrap()].parse().unwrap()
}

/// A reservation of `cost` for tenant `t`: its answer.
async fn reserve(h: &Harness, t: &str, cost: u64) -> Answer {
    let body = format!(r#"{{"limit":"tokens","key":"{t}","cost":{cost}}}"#);
    h.http("POST", "/check", &[], &body).await
}

fn settle(t: &str, reserved: u64, actual: u64, at: u64) -> String {
    format!(
        r#"{{"limit":"tokens","key":"{t}","reserved":{reserved},"actual":{actual},"admitted_at":{at}}}"#
    )
}

#[tokio::test]
async fn settling_up_goes_into_debt_and_the_next_check_is_429() {
    let h = Harness::start(LIMITS).await;
    let r = reserve(&h, "t1", 10).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let at = number(&r, "at");
    // 10 reserved, 150 used: 50 of debt past the 100.
    let a = h
        .http("POST", "/settle", &[], &settle("t1", 10, 150, at))
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(a.body.contains("\"allowed\":false"), "{}", a.body);
    assert_eq!(number(&a, "remaining"), 0);
    let retry: u64 = a.headers["retry-after"].to_str().unwrap().parse().unwrap();
    // 51 tokens at 100 an hour: about 31 minutes.
    assert!((1800..=1900).contains(&retry), "{retry}");
    let next = reserve(&h, "t1", 1).await;
    assert_eq!(next.status, 429, "{}", next.body);
    // Another tenant is untouched.
    assert_eq!(reserve(&h, "t2", 1).await.status, 200);
    h.running.stop().await;
}

#[tokio::test]
async fn settling_down_gives_back_and_equal_changes_nothing() {
    let h = Harness::start(LIMITS).await;
    let r = reserve(&h, "t3", 80).await;
    let at = number(&r, "at");
    assert_eq!(number(&r, "remaining"), 20);
    let a = h
        .http("POST", "/settle", &[], &settle("t3", 80, 30, at))
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(a.body.contains("\"allowed\":true"), "{}", a.body);
    assert_eq!(number(&a, "remaining"), 70);
    let a = h
        .http("POST", "/settle", &[], &settle("t3", 5, 5, at))
        .await;
    assert_eq!(number(&a, "remaining"), 70);
    // The given back 50 can be taken again: 70 now, not 20.
    assert_eq!(reserve(&h, "t3", 70).await.status, 200);
    assert_eq!(reserve(&h, "t3", 1).await.status, 429);
    h.running.stop().await;
}

#[tokio::test]
async fn settle_by_descriptor_and_bad_bodies() {
    let h = Harness::start(LIMITS).await;
    let r = reserve(&h, "t4", 10).await;
    let at = number(&r, "at");
    let by_descriptor = format!(
        r#"{{"domain":"llm","descriptor":[{{"key":"tenant","value":"t4"}}],"reserved":10,"actual":0,"admitted_at":{at}}}"#
    );
    let a = h.http("POST", "/settle", &[], &by_descriptor).await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(number(&a, "remaining"), 100);
    let future = at + 3_600_000_000_000;
    for (body, status, says) in [
        ("{".to_owned(), 400, ""),
        (
            r#"{"limit":"tokens","key":"t4","reserved":1,"actual":2}"#.to_owned(),
            400,
            "admitted_at",
        ),
        (settle("t4", 1, 2, future), 400, "in the future"),
        (
            r#"{"limit":"pair","key":"k","reserved":1,"actual":2,"admitted_at":1}"#.to_owned(),
            400,
            "domain and descriptors",
        ),
        (
            r#"{"limit":"nope","key":"k","reserved":1,"actual":2,"admitted_at":1}"#.to_owned(),
            404,
            "no limit named",
        ),
        (
            r#"{"limit":"tokens","domain":"llm","reserved":1,"actual":2,"admitted_at":1}"#
                .to_owned(),
            400,
            "either limit and key",
        ),
    ] {
        let a = h.http("POST", "/settle", &[], &body).await;
        assert_eq!(a.status, status, "{body}: {}", a.body);
        assert!(a.body.contains(says), "{body}: {}", a.body);
    }
    h.running.stop().await;
}
