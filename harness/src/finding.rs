//! Findings: a rule the peer broke, with the evidence.

use serde::Serialize;

/// One violation of a protocol rule by the peer, found by a scenario step or a monitor.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// The rule's stable id from the catalogue (`device.hello.protocol`).
    pub rule: String,
    /// One sentence: what the peer did wrong.
    pub summary: String,
    /// What was expected and what came, when there is more to say (a diff, the raw text).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The link it happened on, counting from 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<u32>,
}

/// The rules of `found`, in order: what a test of a check compares.
pub fn rules_of(found: &[Finding]) -> Vec<&str> {
    found.iter().map(|f| f.rule.as_str()).collect()
}

impl Finding {
    /// A finding without detail.
    pub fn new(rule: impl Into<String>, summary: impl Into<String>) -> Self {
        Self {
            rule: rule.into(),
            summary: summary.into(),
            detail: None,
            link: None,
        }
    }

    /// Adds the detail.
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// Adds the link number.
    pub fn on_link(mut self, link: u32) -> Self {
        self.link = Some(link);
        self
    }
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{}] {}", self.rule, self.summary)?;
        if let Some(link) = self.link {
            write!(f, " (link {link})")?;
        }
        Ok(())
    }
}

/// How many findings a run keeps.
pub const FINDINGS_KEPT: usize = 1000;

/// Told of each finding as it is made.
pub type FindingObserver = std::sync::Arc<dyn Fn(&Finding) + Send + Sync>;

/// The findings of one run, shared by every task that checks the peer.
#[derive(Default)]
pub struct Findings {
    items: std::sync::Mutex<Vec<Finding>>,
    observer: std::sync::Mutex<Option<FindingObserver>>,
    /// Told of each finding too, beside the observer ([`Findings::tally_into`]).
    tally: std::sync::Mutex<Option<FindingObserver>>,
}

impl std::fmt::Debug for Findings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Findings")
            .field("items", &self.items)
            .finish_non_exhaustive()
    }
}

impl Findings {
    /// Tells `observer` of every finding from now on (one observer: a later one replaces it).
    pub fn observe(&self, observer: FindingObserver) {
        if let Ok(mut slot) = self.observer.lock() {
            *slot = Some(observer);
        }
    }

    /// Also tells `tally` of every finding from now on, whatever observer a run's hub sets: a
    /// load run counts its devices' findings as they come.
    pub fn tally_into(&self, tally: FindingObserver) {
        if let Ok(mut slot) = self.tally.lock() {
            *slot = Some(tally);
        }
    }

    /// Records a finding and logs it, so a person watching stderr sees it as it happens.
    pub fn push(&self, finding: Finding) {
        tracing::warn!(rule = %finding.rule, "{}", finding.summary);
        let observer = self.observer.lock().ok().and_then(|o| o.clone());
        if let Some(observer) = observer {
            observer(&finding);
        }
        if let Some(tally) = self.tally.lock().ok().and_then(|t| t.clone()) {
            tally(&finding);
        }
        if let Ok(mut items) = self.items.lock() {
            // A peer that keeps sending garbage must not grow memory without bound; the first
            // findings say what is wrong.
            if items.len() < FINDINGS_KEPT {
                items.push(finding);
            } else if items.len() == FINDINGS_KEPT {
                tracing::warn!(
                    "more than {FINDINGS_KEPT} findings: later ones are logged, not kept"
                );
            }
        }
    }

    /// Everything found so far.
    pub fn all(&self) -> Vec<Finding> {
        self.items.lock().map(|i| i.clone()).unwrap_or_default()
    }

    /// Whether a finding under `rule` has been recorded.
    pub fn has(&self, rule: &str) -> bool {
        self.items
            .lock()
            .map(|i| i.iter().any(|f| f.rule == rule))
            .unwrap_or(false)
    }
}
