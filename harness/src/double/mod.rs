//! What every double's run does the same way, whatever it plays: bind its port and serve, run
//! the scenario's steps or stay up unattended (a console, its own steps) until told to stop,
//! close its links, and end with what it found. Each double's run is its own set-up (its model,
//! its actor, its server) around these calls; nothing here knows what a double plays.

mod closing;
mod scripted;
mod serving;
mod unattended;

pub use closing::{RECENT_KEPT, close_links, ended};
pub use scripted::Scripted;
pub use serving::{bind, serve, stop};
pub use unattended::Unattended;
