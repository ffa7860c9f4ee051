//! What both doubles' embedding handles do the same way, written once as a macro each handle
//! expands: where its control API is, its cell, its verdict, and letting it go without one.

/// The methods both doubles' handles have, expanded inside a handle's `impl`: the handle has
/// `running` (a [`crate::embed::Running`]) and `control` (the control API's URL and token,
/// when asked for). `double` is what the handle plays, for its docs.
#[macro_export]
macro_rules! double_handle_methods {
    (double: $double:literal $(,)?) => {
        /// The control API's URL and token, when the builder asked for it.
        pub fn control(&self) -> Option<(&str, &str)> {
            self.control
                .as_ref()
                .map(|(url, token)| (url.as_str(), token.as_str()))
        }

        /// The protocol and spec of the run.
        pub fn cell(&self) -> &$crate::engine::Cell {
            self.running.cell()
        }

        /// The verdict: with a scenario, once it has ended (within the builder's
        /// `verdict_within`); without one, what the monitors found until now.
        #[doc = concat!("The ", $double, " shuts down either way.")]
        pub async fn verdict(self) -> $crate::report::RunReport {
            self.running.verdict().await
        }

        /// Stops the double without taking its verdict: for a test that failed before the run
        /// could end (its own error is then the one it reports).
        pub fn dismiss(self) {
            self.running.dismiss();
        }
    };
}
