//! Kubernetes' word on ServiceAccount tokens. A token's signature says only
//! that the API server issued it; a `TokenReview` says whether it still
//! takes it — not once its ServiceAccount is deleted (or deleted and made
//! again under the same name), nor once the pod it was bound to is gone.
//! Each token's verdict is kept briefly, so a pipeline's calls do not
//! each ask; while the API server cannot be asked, a token it accepted
//! lately is still taken (for [`STALE_ACCEPT`]), any other refused.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use sha2::{Digest as _, Sha256};

use super::tokens::TokenError;
use crate::domain::TokenReviews;

/// How long a verdict is taken without asking again.
const FRESH: Duration = Duration::from_secs(30);
/// How long an accepted token is still taken while Kubernetes cannot be
/// asked.
const STALE_ACCEPT: Duration = Duration::from_secs(300);
/// Verdicts kept at most (then the oldest half goes).
const MAX_VERDICTS: usize = 10_000;

/// Asks Kubernetes about ServiceAccount tokens, remembering its answers.
pub struct Reviewer {
    reviews: Arc<dyn TokenReviews>,
    verdicts: Mutex<HashMap<[u8; 32], Verdict>>,
}

#[derive(Debug, Clone, Copy)]
struct Verdict {
    accepted: bool,
    at: Instant,
}

impl Reviewer {
    /// A reviewer asking `reviews`.
    pub fn new(reviews: Arc<dyn TokenReviews>) -> Self {
        Self {
            reviews,
            verdicts: Mutex::default(),
        }
    }

    fn verdicts(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Verdict>> {
        self.verdicts.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether Kubernetes takes `token` (already verified by signature)
    /// for `audience`.
    pub(super) async fn check(&self, token: &str, audience: &str) -> Result<(), TokenError> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let known = self.verdicts().get(&key).copied();
        if let Some(v) = known.filter(|v| v.at.elapsed() < FRESH) {
            return judged(v.accepted);
        }
        match self.reviews.review(token, audience).await {
            Ok(accepted) => {
                let mut verdicts = self.verdicts();
                if verdicts.len() >= MAX_VERDICTS {
                    let mut ages: Vec<Instant> = verdicts.values().map(|v| v.at).collect();
                    ages.sort_unstable();
                    let cut = ages[ages.len() / 2];
                    verdicts.retain(|_, v| v.at > cut);
                }
                verdicts.insert(
                    key,
                    Verdict {
                        accepted,
                        at: Instant::now(),
                    },
                );
                judged(accepted)
            }
            Err(why) => match known {
                Some(v) if v.accepted && v.at.elapsed() < STALE_ACCEPT => {
                    tracing::debug!(error = %why, "TokenReview not answered; a token accepted lately is taken");
                    Ok(())
                }
                _ => {
                    tracing::warn!(error = %why, "TokenReview not answered; the ServiceAccount token is refused");
                    Err(TokenError::Invalid(format!(
                        "Kubernetes could not confirm the ServiceAccount token: {why}"
                    )))
                }
            },
        }
    }
}

fn judged(accepted: bool) -> Result<(), TokenError> {
    if accepted {
        Ok(())
    } else {
        Err(TokenError::Invalid(
            "Kubernetes no longer accepts the token: its ServiceAccount (or pod) is gone or was made anew, or it was revoked"
                .into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Answers as told, counting the questions.
    struct Scripted {
        answer: Mutex<Result<bool, String>>,
        asked: AtomicUsize,
    }

    #[async_trait::async_trait]
    impl TokenReviews for Scripted {
        async fn review(&self, _: &str, _: &str) -> Result<bool, String> {
            self.asked.fetch_add(1, Ordering::SeqCst);
            self.answer.lock().unwrap().clone()
        }
    }

    #[tokio::test]
    async fn kubernetes_is_asked_once_a_while_and_its_no_is_final() {
        let script = Arc::new(Scripted {
            answer: Mutex::new(Ok(true)),
            asked: AtomicUsize::new(0),
        });
        let reviewer = Reviewer::new(script.clone());
        reviewer.check("t1", "krayne").await.unwrap();
        reviewer.check("t1", "krayne").await.unwrap();
        assert_eq!(script.asked.load(Ordering::SeqCst), 1, "kept for a while");
        *script.answer.lock().unwrap() = Err("down".into());
        assert!(reviewer.check("t2", "krayne").await.is_err(), "never accepted: refused");
        *script.answer.lock().unwrap() = Ok(false);
        let refused = reviewer.check("t3", "krayne").await.unwrap_err();
        assert!(refused.to_string().contains("no longer accepts"), "{refused}");
    }
}
