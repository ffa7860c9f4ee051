//! `_lembas/terminal/*`: the web UI's terminal (open, type, resize, hang up), each only when the
//! device listed `terminal` (the terminal's messages themselves are [`crate::web_terminal`]'s).

use std::time::Duration;

use crate::actions::{Acted, InstanceActor, OpenTerminal, ResizeTerminal, TerminalInput};

impl InstanceActor {
    /// Opens a terminal sized within the spec's bounds.
    pub(crate) async fn open_terminal(&self, open: OpenTerminal, timeout: Duration) -> Acted {
        let (peer, _) = self.ready_for(timeout, "terminal", "a terminal").await?;
        Ok(crate::web_terminal::open(
            &self.chats,
            &peer,
            open.cwd.as_deref(),
            open.cols,
            open.rows,
        )
        .await?)
    }

    /// Types into a terminal.
    pub(crate) async fn terminal_input(&self, typed: TerminalInput, timeout: Duration) -> Acted {
        let (peer, _) = self.ready_for(timeout, "terminal", "a terminal").await?;
        Ok(crate::web_terminal::input(
            &self.chats,
            &peer,
            &typed.terminal,
            &typed.text,
        ))
    }

    /// Resizes a terminal.
    pub(crate) async fn resize_terminal(&self, size: ResizeTerminal, timeout: Duration) -> Acted {
        let (peer, _) = self.ready_for(timeout, "terminal", "a terminal").await?;
        Ok(crate::web_terminal::resize(
            &peer,
            &size.terminal,
            size.cols,
            size.rows,
        ))
    }

    /// Hangs a terminal up.
    pub(crate) async fn close_terminal(&self, terminal: String, timeout: Duration) -> Acted {
        let (peer, _) = self.ready_for(timeout, "terminal", "a terminal").await?;
        Ok(crate::web_terminal::close(&peer, &terminal))
    }
}
