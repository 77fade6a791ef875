//! One soak cycle's divergence check, and what it comes to when the control plane itself does
//! not answer: the check is not a divergence then, as nothing could be compared.
//!
//! Decision: when the apiserver's list (the truth) still fails at the check's deadline, the
//! soak prints "control plane unavailable at T: why" (why: the list's error, and what etcd's
//! `/health` and kube-apiserver's `/readyz` say), waits (bounded) until both answer again, and
//! runs the check once more; if the control plane is still unavailable then, the check is
//! skipped. Either way soak.json records when and why; only a check that compared and found a
//! difference counts as a divergence. Kubernetes' own e2e suites treat an unreachable control
//! plane the same way: an infrastructure failure, not a failure of the component under test.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::{faults::until, truth::Disagreement};

/// What a check came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Everything agreed, after this long.
    Agreed(Duration),
    /// What still differed at the deadline.
    Diverged(Vec<String>),
    /// Nothing compared: the control plane did not answer, before the check or after it was
    /// retried.
    Skipped,
}

/// One cycle's divergence check.
#[derive(Debug, Clone)]
pub struct Check {
    /// When it ended, in seconds since the soak started.
    pub seconds: f64,
    pub fault: String,
    pub outcome: Outcome,
    /// When (seconds since the start) and why the control plane was found unavailable during
    /// this check, if it was.
    pub unavailable: Option<(f64, String)>,
}

impl Check {
    /// Agreed (`Some(true)`), diverged (`Some(false)`), or skipped (`None`).
    pub fn agreed(&self) -> Option<bool> {
        match self.outcome {
            Outcome::Agreed(_) => Some(true),
            Outcome::Diverged(_) => Some(false),
            Outcome::Skipped => None,
        }
    }

    /// The line the soak prints.
    pub fn line(&self) -> String {
        let outcome = match &self.outcome {
            Outcome::Agreed(t) => format!("agreed after {:.1} s", t.as_secs_f64()),
            Outcome::Diverged(d) => format!("DIVERGED: {d:?}"),
            Outcome::Skipped => "check skipped: the control plane stayed unavailable".into(),
        };
        match &self.unavailable {
            Some((at, why)) => format!("{outcome} (control plane unavailable at {at:.0} s: {why})"),
            None => outcome,
        }
    }

    /// Its entry in soak.json.
    pub fn json(&self) -> Value {
        let (outcome, reconverge, differences) = match &self.outcome {
            Outcome::Agreed(t) => ("agreed", json!(t.as_secs_f64()), json!([])),
            Outcome::Diverged(d) => ("diverged", Value::Null, json!(d)),
            Outcome::Skipped => ("skipped", Value::Null, json!([])),
        };
        json!({
            "seconds": self.seconds, "fault": self.fault, "outcome": outcome,
            "agreed": self.agreed() == Some(true), "reconverge_seconds": reconverge,
            "differences": differences,
            "control_plane_unavailable": self.unavailable.as_ref().map(|(at, why)| json!({
                "at_seconds": at, "reason": why,
            })),
        })
    }
}

/// Runs `converge`; if the control plane was unavailable, waits up to `recover` until
/// `available` says it answers again and runs `converge` once more. `started` is the soak's
/// start, for the times recorded.
pub async fn check(
    fault: String,
    started: Instant,
    recover: Duration,
    converge: impl AsyncFn() -> Result<Duration, Disagreement>,
    available: impl AsyncFn() -> Result<(), String>,
) -> Check {
    let (outcome, unavailable) = match converge().await {
        Ok(t) => (Outcome::Agreed(t), None),
        Err(Disagreement::Diverged(d)) => (Outcome::Diverged(d), None),
        Err(Disagreement::Unavailable { reason, since }) => {
            let at = since.saturating_duration_since(started).as_secs_f64();
            eprintln!(
                "{fault}: control plane unavailable at {at:.0} s: {reason}; the check waits up to {} s for it and runs again",
                recover.as_secs()
            );
            let back = until("the control plane answers", recover.as_secs(), async || {
                available().await.map(|()| true).or(Ok(false))
            })
            .await;
            let outcome = match back {
                Err(_) => Outcome::Skipped,
                Ok(()) => match converge().await {
                    Ok(t) => Outcome::Agreed(t),
                    Err(Disagreement::Diverged(d)) => Outcome::Diverged(d),
                    Err(Disagreement::Unavailable { .. }) => Outcome::Skipped,
                },
            };
            (outcome, Some((at, reason)))
        }
    };
    Check {
        seconds: started.elapsed().as_secs_f64(),
        fault,
        outcome,
        unavailable,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// `check` with converge answering `answers` in turn and the control plane available after
    /// `down` probes (never with `None`); returns the check and how often converge ran.
    async fn run(answers: Vec<Disagreement>, down: Option<usize>) -> (Check, usize) {
        let answers = Mutex::new(answers.into_iter());
        let calls = Mutex::new(0);
        let probes = Mutex::new(0);
        let check = check(
            "CutAll".into(),
            Instant::now(),
            Duration::from_secs(1),
            async || {
                *calls.lock().unwrap() += 1;
                let next = answers.lock().unwrap().next();
                next.map_or(Ok(Duration::from_secs(2)), Err)
            },
            async || {
                let mut n = probes.lock().unwrap();
                *n += 1;
                match down {
                    Some(d) if *n > d => Ok(()),
                    _ => Err("etcd unready: connection refused".into()),
                }
            },
        )
        .await;
        let calls = *calls.lock().unwrap();
        (check, calls)
    }

    fn unavailable() -> Disagreement {
        Disagreement::Unavailable {
            reason: "the apiserver's list failed: connection refused".into(),
            since: Instant::now(),
        }
    }

    #[tokio::test]
    async fn an_unavailable_control_plane_is_waited_for_and_the_check_retried() {
        let (check, calls) = run(vec![unavailable()], Some(2)).await;
        assert_eq!(
            calls, 2,
            "converge runs again once the control plane answers"
        );
        assert_eq!(check.outcome, Outcome::Agreed(Duration::from_secs(2)));
        let (_, why) = check
            .unavailable
            .clone()
            .expect("the unavailability is recorded");
        assert!(why.contains("connection refused"), "{why}");
        let json = check.json();
        assert_eq!(json["outcome"], "agreed");
        assert!(json["control_plane_unavailable"]["reason"]
            .as_str()
            .unwrap()
            .contains("the apiserver's list failed"));
    }

    #[tokio::test]
    async fn a_control_plane_that_stays_unavailable_skips_the_check_without_a_divergence() {
        let (check, calls) = run(vec![unavailable()], None).await;
        assert_eq!(calls, 1, "no second check while it does not answer");
        assert_eq!(check.outcome, Outcome::Skipped);
        assert_eq!(check.agreed(), None);
        let json = check.json();
        assert_eq!(json["outcome"], "skipped");
        assert_eq!(json["agreed"], false);
        assert_eq!(json["differences"], json!([]));
        assert!(check.line().contains("control plane unavailable at 0 s"));
    }

    #[tokio::test]
    async fn a_divergence_is_one_whether_or_not_the_control_plane_was_down_before() {
        let diverged = || Disagreement::Diverged(vec!["informerd List: 1 vs 2 objects".into()]);
        let (check, _) = run(vec![diverged()], Some(0)).await;
        assert_eq!(check.agreed(), Some(false));
        assert!(check.unavailable.is_none());
        let (check, calls) = run(vec![unavailable(), diverged()], Some(0)).await;
        assert_eq!(calls, 2);
        assert_eq!(check.agreed(), Some(false));
        assert!(check.unavailable.is_some());
    }
}
