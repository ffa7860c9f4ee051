//! The start of every double's run: the journal and the findings it keeps, a temporary
//! directory of its own (the `{tmp}` of its steps), its steps' actions read as the double's own
//! vocabulary (the double names the type; nothing here knows its words), and its hub.

use std::path::Path;
use std::sync::Arc;

use crate::embed::Ended;
use crate::engine::{Behaviour, Hub, RunOutcome};
use crate::finding::Findings;
use crate::journal::Journal;
use crate::pattern::Vars;
use crate::scenario::{LoadError, Scenario, Spanned, Step, check_actions};

/// What a run keeps from its start to its end.
#[derive(Debug)]
pub struct Opened {
    /// Every message, for reports and `--journal`.
    pub journal: Arc<Journal>,
    /// What the monitors found.
    pub findings: Arc<Findings>,
    /// A directory of the run's own, removed when it ends.
    pub tmp: tempfile::TempDir,
}

/// Why a run could not open.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The journal file could not be created.
    #[error("cannot write the journal: {0}")]
    Journal(std::io::Error),
    /// The run's own directory could not be made.
    #[error("cannot make a temporary directory: {0}")]
    Scratch(std::io::Error),
}

impl Opened {
    /// Opens the journal (written to `journal` when given; keeping no entry in memory when
    /// `lean`, for a run nothing reads them from) and makes the run's directory.
    pub fn open(journal: Option<&Path>, lean: bool) -> Result<Opened, OpenError> {
        Self::open_tapped(journal, lean, None)
    }

    /// [`Opened::open`], its journal showing every entry to `tap` when given (a fleet's
    /// figures).
    pub fn open_tapped(
        journal: Option<&Path>,
        lean: bool,
        tap: Option<Arc<dyn crate::journal::Tap>>,
    ) -> Result<Opened, OpenError> {
        let mut journal = Journal::open(journal).map_err(OpenError::Journal)?;
        if lean {
            journal = journal.keeping_nothing();
        }
        if let Some(tap) = tap {
            journal = journal.with_tap(tap);
        }
        let tmp = crate::random::temp_dir().map_err(OpenError::Scratch)?;
        Ok(Opened {
            journal: Arc::new(journal),
            findings: Arc::new(Findings::default()),
            tmp,
        })
    }

    /// The run's hub: `behaviour` answering its links, with the scenario's handlers and vars
    /// (beside `vars`), recording into this run's journal and findings.
    pub fn hub(
        &self,
        behaviour: Arc<dyn Behaviour>,
        scenario: Option<&Scenario>,
        vars: Vars,
    ) -> Result<Arc<Hub>, crate::engine::HubError> {
        Hub::for_scenario(
            behaviour,
            scenario,
            vars,
            self.journal.clone(),
            self.findings.clone(),
        )
    }

    /// What the run ended with (see [`super::ended`]).
    pub fn ended(&self, outcome: Option<RunOutcome>) -> Ended {
        super::closing::ended(outcome, &self.journal, &self.findings)
    }
}

/// Reads the actions of a scenario's steps and of the double's own steps (`own`, whose they
/// are in `own_of`) as `A`, the double's actions: a step it cannot do is a load error before
/// anything starts.
pub fn check_steps<A: serde::de::DeserializeOwned>(
    scenario: Option<&Scenario>,
    own: &[Spanned<Step>],
    own_of: &str,
) -> Result<(), LoadError> {
    if let Some(scenario) = scenario {
        check_actions::<A>(&scenario.steps, "steps", &scenario.source)?;
    }
    check_actions::<A>(own, "peer.steps", own_of)
}
