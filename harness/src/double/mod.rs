//! What every double's run does the same way, whatever it plays: bind its port and serve, run
//! the scenario's steps or stay up unattended (a console, its own steps) until told to stop,
//! close its links, and end with what it found. Each double's run is its own set-up (its model,
//! its actor, its server) around these calls; nothing here knows what a double plays.

mod closing;
mod course;
mod opening;
mod scripted;
mod serving;
mod unattended;

pub use closing::{RECENT_KEPT, close_links, ended};
pub use course::{Beside, Course, SetUp, needs_as_keyed};
pub use opening::{OpenError, Opened, check_steps};
pub use scripted::Scripted;
pub use serving::{bind, serve, stop};
pub use unattended::Unattended;
