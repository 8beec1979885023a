//! Algorithms as text: every algorithm built from random settings prints
//! to a spec that parses back to the same algorithm; random words never
//! panic the parser; and, with the `serde` feature, the text and table
//! forms read from TOML and JSON.

use proptest::prelude::*;
use ratelimit_core::algorithm::{Anchor, AnyGcra, AnyLeakyBucket, AnyTokenBucket};
use ratelimit_core::{AnyAlgorithm, FixedWindow, SlidingLog, SlidingWindow};
use std::time::Duration;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Periods from a nanosecond to a year, in round units and not.
fn period() -> impl Strategy<Value = Duration> {
    prop_oneof![
        (1u64..1_000).prop_map(Duration::from_secs),
        (1u64..100).prop_map(|d| Duration::from_secs(d * 86_400)),
        (1u64..10_000_000).prop_map(Duration::from_micros),
        (1u64..u64::MAX / 4).prop_map(Duration::from_nanos),
    ]
}

fn count() -> impl Strategy<Value = u64> {
    prop_oneof![1u64..20, 1u64..100_000, 1u64..u64::MAX / 2]
}

fn algorithm() -> impl Strategy<Value = Option<AnyAlgorithm>> {
    let anchor = prop_oneof![
        Just(Anchor::Aligned),
        Just(Anchor::FirstRequest),
        Just(Anchor::KeyOffset)
    ];
    (0u8..6, count(), count(), period(), anchor, 0u64..30_000).prop_map(
        |(kind, a, b, p, anchor, small)| match kind {
            0 => AnyGcra::with_burst(a, p, b).ok().map(Into::into),
            1 => AnyTokenBucket::new(a, b, p).ok().map(Into::into),
            2 => AnyLeakyBucket::new(a, p, small).ok().map(Into::into),
            3 => FixedWindow::new(a, p)
                .ok()
                .map(|w| w.with_anchor(anchor).unwrap().into()),
            4 => SlidingLog::with_max_entries(small.max(1), p, 30_000)
                .ok()
                .map(Into::into),
            _ => SlidingWindow::new(a, p).ok().map(Into::into),
        },
    )
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn display_parses_back(a in algorithm()) {
        if let Some(a) = a {
            let text = a.to_string();
            let back: AnyAlgorithm = text.parse().map_err(|e| {
                TestCaseError::fail(format!("{text:?}: {e}"))
            })?;
            prop_assert_eq!(back, a, "{}", text);
            prop_assert_eq!(back.to_string(), text);
        }
    }

    #[test]
    fn any_words_parse_or_fail_cleanly(
        words in proptest::collection::vec(
            prop_oneof![
                Just("gcra".to_owned()), Just("token-bucket".to_owned()),
                Just("fixed-window".to_owned()), Just("sliding-log".to_owned()),
                Just("burst".to_owned()), Just("refill".to_owned()),
                Just("anchor".to_owned()), Just("queue".to_owned()),
                Just("max-entries".to_owned()),
                "[0-9]{1,22}(/[0-9]{0,22}(ns|us|ms|s|m|h|d|x)?)?",
                "\\PC{0,8}",
            ],
            0..6,
        )
    ) {
        let text = words.join(" ");
        if let Ok(a) = text.parse::<AnyAlgorithm>() {
            // Whatever parses prints to a spec that parses to the same.
            prop_assert_eq!(a.to_string().parse::<AnyAlgorithm>().unwrap(), a);
        }
    }
}

#[cfg(feature = "serde")]
mod serde_forms {
    use ratelimit_core::AnyAlgorithm;
    use serde::Deserialize;
    use std::collections::BTreeMap;

    #[derive(Deserialize)]
    struct File {
        limits: BTreeMap<String, AnyAlgorithm>,
    }

    #[test]
    fn toml_text_and_tables() {
        let file: File = toml::from_str(
            r#"
            [limits]
            login = "gcra 5/1m burst 2"
            api = { algorithm = "token-bucket", capacity = 500, refill = 100, period = "1s" }
            daily = { algorithm = "fixed-window", limit = 200, period = "1d", anchor = "key-offset" }
            queue = { algorithm = "leaky-bucket", limit = 10, period = "1s", queue = 4 }
            log = { algorithm = "sliding-log", limit = 2, period = "1d" }
            big-log = { algorithm = "sliding-log", limit = 20000, period = "1h", max-entries = 20000 }
            window = { algorithm = "sliding-window", limit = 60, period = "1m" }
            plain = { algorithm = "gcra", limit = 3, period = "1s" }
            monthly = { algorithm = "fixed-window", limit = 1000, period = "month" }
            weekly = "fixed-window 10/week"
            "#,
        )
        .unwrap();
        let text: BTreeMap<&str, String> = file
            .limits
            .iter()
            .map(|(k, v)| (k.as_str(), v.to_string()))
            .collect();
        assert_eq!(text["login"], "gcra 5/1m burst 2");
        assert_eq!(text["api"], "token-bucket 500 refill 100/1s");
        assert_eq!(text["daily"], "fixed-window 200/1d anchor key-offset");
        assert_eq!(text["queue"], "leaky-bucket 10/1s queue 4");
        assert_eq!(text["log"], "sliding-log 2/1d");
        assert_eq!(text["big-log"], "sliding-log 20000/1h max-entries 20000");
        assert_eq!(text["window"], "sliding-window 60/1m");
        assert_eq!(text["plain"], "gcra 3/1s");
        assert_eq!(text["monthly"], "fixed-window 1000/month");
        assert_eq!(text["weekly"], "fixed-window 10/week");
    }

    #[test]
    fn json_round_trip() {
        let a: AnyAlgorithm = "gcra 100/1m burst 20".parse().unwrap();
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(json, r#""gcra 100/1m burst 20""#);
        assert_eq!(serde_json::from_str::<AnyAlgorithm>(&json).unwrap(), a);
        let table: AnyAlgorithm =
            serde_json::from_str(r#"{"algorithm":"gcra","limit":100,"period":"1m","burst":20}"#)
                .unwrap();
        assert_eq!(table, a);
    }

    #[test]
    fn errors_name_the_word_and_the_line() {
        for (doc, wants) in [
            ("[limits]\na = \"gcra 5/1m brust 2\"\n", ["brust", "line 2"]),
            (
                "[limits]\n\nb = { algorithm = \"gcra\", limit = 5, period = \"5 min\" }\n",
                ["5 min", "line 3"],
            ),
            (
                "[limits]\nc = { algorithm = \"gcra\", limit = 5, period = \"1s\", brust = 1 }\n",
                ["brust", "line 2"],
            ),
            (
                "[limits]\nd = { algorithm = \"gcar\", limit = 5, period = \"1s\" }\n",
                ["gcar", "line 2"],
            ),
            (
                "[limits]\ne = { algorithm = \"gcra\", limit = 0, period = \"1s\" }\n",
                ["limit must be at least 1", "line 2"],
            ),
            ("[limits]\nf = 7\n", ["algorithm spec", "line 2"]),
            (
                "[limits]\ng = { algorithm = \"fixed-window\", limit = 5, period = \"1mo\" }\n",
                ["\"1mo\"", "line 2"],
            ),
            (
                "[limits]\nh = { algorithm = \"gcra\", limit = 5, period = \"month\" }\n",
                ["gcra cannot take the calendar period \"month\"", "line 2"],
            ),
        ] {
            let err = toml::from_str::<File>(doc).err().expect(doc).to_string();
            for want in wants {
                assert!(err.contains(want), "{doc:?}: {err}");
            }
        }
    }
}
