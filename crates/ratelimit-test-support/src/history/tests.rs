//! The checker's own tests: planted violations are found.

use super::*;
use crate::model::Spec;

const GCRA: Spec = Spec::Gcra {
    limit: 2,
    period: 10,
    burst: 2,
};

fn check(invoke: u64, ret: u64, cost: u64, allowed: bool, remaining: u64) -> Event<u8> {
    let wait = if allowed { Some(0) } else { Some(5) };
    let answer = Answer {
        allowed,
        remaining,
        wait,
        banned: false,
    };
    let op = Op::Check(cost);
    event(invoke, ret, op, Some(answer))
}

fn event(invoke: u64, ret: u64, op: Op, answer: Option<Answer>) -> Event<u8> {
    Event {
        key: 0,
        op,
        now: 0,
        invoke,
        ret,
        answer,
    }
}

fn banned(invoke: u64, ret: u64) -> Event<u8> {
    let answer = Answer {
        allowed: false,
        remaining: 0,
        wait: Some(100),
        banned: true,
    };
    event(invoke, ret, Op::Check(1), Some(answer))
}

fn verdict(history: &[Event<u8>]) -> Result<Summary, Violation> {
    Checker::new(GCRA).check(history)
}

#[test]
fn overlapping_checks_may_go_in_either_order() {
    let history = [
        check(0, 5, 1, true, 0),
        check(1, 2, 1, true, 1),
        check(3, 4, 1, false, 0),
    ];
    let summary = verdict(&history).unwrap();
    assert_eq!((summary.keys, summary.ops, summary.largest), (1, 3, 3));
    assert_eq!(summary.overlapping, 3);
}

#[test]
fn a_lost_update_is_rejected() {
    let history = [check(0, 3, 1, true, 1), check(1, 2, 1, true, 1)];
    let err = verdict(&history).unwrap_err();
    assert!(matches!(err, Violation::NotLinearizable { .. }), "{err}");
    assert!(err.to_string().contains("longest order"), "{err}");
}

#[test]
fn real_time_order_is_kept() {
    // The second check starts after the first returned, so it cannot
    // have gone first: 0 left then 1 left is impossible.
    let history = [check(0, 1, 1, true, 0), check(2, 3, 1, true, 1)];
    assert!(verdict(&history).is_err());
    let overlapping = [check(0, 2, 1, true, 0), check(1, 3, 1, true, 1)];
    assert!(verdict(&overlapping).is_ok());
}

#[test]
fn a_refund_applied_twice_is_rejected() {
    let refund = Op::Refund {
        cost: 1,
        admitted_at: 0,
    };
    let mut history = vec![
        check(0, 1, 1, true, 1),
        check(2, 3, 1, true, 0),
        event(4, 5, refund, None),
        check(6, 7, 1, true, 0),
    ];
    assert!(verdict(&history).is_ok());
    // Twice given back: 1 left after the check, not 0.
    history[3] = check(6, 7, 1, true, 1);
    assert!(verdict(&history).is_err());
}

#[test]
fn a_denial_kept_past_an_unban_is_rejected() {
    let ban = event(0, 1, Op::Ban(100), None);
    let unban = event(4, 5, Op::Unban, None);
    let stale = [ban.clone(), banned(2, 3), unban.clone(), banned(6, 7)];
    assert!(verdict(&stale).is_err());
    let fresh = [ban.clone(), banned(2, 3), unban, check(6, 7, 1, true, 1)];
    assert!(verdict(&fresh).is_ok());
    // A check overlapping the unban may see either side of it.
    let racing = [ban, event(2, 5, Op::Unban, None), banned(3, 4)];
    assert!(verdict(&racing).is_ok());
}

#[test]
fn a_reset_gives_the_burst_back() {
    let history = [
        check(0, 1, 2, true, 0),
        event(2, 3, Op::Reset, None),
        check(4, 5, 1, true, 1),
    ];
    assert!(verdict(&history).is_ok());
}

#[test]
fn wait_is_compared_unless_ignored() {
    let mut denied = check(2, 3, 1, false, 0);
    let history = [check(0, 1, 2, true, 0), denied.clone()];
    // The model's wait at 0 is one emission interval (5 ns).
    assert!(verdict(&history).is_ok());
    denied.answer.as_mut().unwrap().wait = Some(4);
    let wrong = [history[0].clone(), denied];
    assert!(verdict(&wrong).is_err());
    assert!(Checker::new(GCRA).ignore_wait().check(&wrong).is_ok());
}

#[test]
fn a_search_out_of_steps_says_so() {
    // Eight peeks all overlapping, one of them wrong: refuted only
    // after every subset of the others was tried.
    let mut history: Vec<_> = (0..8).map(|i| check(i, 100 + i, 0, true, 2)).collect();
    history[7] = check(7, 107, 0, true, 1);
    assert!(verdict(&history).is_err());
    let err = Checker::new(GCRA).max_steps(3).check(&history).unwrap_err();
    assert!(matches!(err, Violation::Undecided { ops: 8, .. }), "{err}");
}

#[test]
fn a_refuted_history_of_40_operations_is_decided_in_bounds() {
    // 8 threads of 5 peeks each, overlapping within and across rounds,
    // the last answer impossible: every order of the others is tried.
    let mut history = Vec::new();
    for i in 0..8 {
        for j in 0..5 {
            history.push(check(20 * j + i, 20 * j + 15 + i, 0, true, 2));
        }
    }
    history[39].answer.as_mut().unwrap().remaining = 1;
    let err = verdict(&history).unwrap_err();
    assert!(matches!(err, Violation::NotLinearizable { .. }), "{err}");
}

#[test]
fn a_ban_policy_bans_on_a_denial_with_nothing_left() {
    let ban = Answer {
        allowed: false,
        remaining: 0,
        wait: Some(100),
        banned: true,
    };
    let history = [
        check(0, 1, 2, true, 0),
        event(2, 3, Op::Check(1), Some(ban)),
        event(
            4,
            5,
            Op::Check(1),
            Some(Answer {
                wait: Some(100),
                ..ban
            }),
        ),
    ];
    assert!(Checker::new(GCRA)
        .ban_on_denial(100)
        .check(&history)
        .is_ok());
    assert!(verdict(&history).is_err(), "no ban without the policy");
}

#[test]
fn a_settlement_up_leaves_the_key_in_debt() {
    let settle = Op::Settle {
        reserved: 1,
        actual: 3,
        admitted_at: 0,
    };
    let owed = |wait| Answer {
        allowed: false,
        remaining: 0,
        wait: Some(wait),
        banned: false,
    };
    // Burst 2, T = 5 ns: 2 used, 2 more charged (capped at 2 owed).
    let history = [
        check(0, 1, 2, true, 0),
        event(2, 3, settle, Some(owed(10))),
        event(4, 5, Op::Check(1), Some(owed(15))),
    ];
    assert!(verdict(&history).is_ok());
    let paid = [history[0].clone(), event(2, 3, settle, Some(owed(5)))];
    assert!(verdict(&paid).is_err());
}

#[test]
fn keys_are_checked_apart() {
    let mut other = check(0, 1, 2, true, 0);
    other.key = 1;
    let history = [check(0, 1, 2, true, 0), other];
    assert_eq!(verdict(&history).unwrap().keys, 2);
}
