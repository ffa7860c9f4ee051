//! The instance under test, as a device's run sees it: started for the run (`--exec`) on a free
//! port and waited for until it listens, or given by URL; and what hooks are told of it.

use std::sync::Arc;

use harness::engine::Cell;
use harness::process::{Placeholders, Sut, SutSpec};

use super::options::Options;

/// What hooks are told of an instance this run did not start: its URL, the device's token,
/// root and a `{tmp}`, and the cell.
pub(crate) fn instance_placeholders(options: &Options, tmp: &std::path::Path) -> Placeholders {
    harness::under_test::placeholders(
        &options.instance,
        None,
        &options.token,
        tmp,
        options.roots.first().map_or("", String::as_str),
        &options.cell,
    )
}

/// Starts the instance under test (`--exec`) for a device whose root is `root`: `{port}` is a
/// free port for it to listen on, and `{url}` the instance's address, `instance` when given,
/// else `http://127.0.0.1:{port}`; `{tmp}` is a directory of its own. An lvmh daemon is also
/// told `{gitlab_url}`, the fake GitLab its GitLab routes are to ask
/// ([`harness::lvmh::gitlab`]). Gives it and its URL.
pub async fn start_instance(
    spec: SutSpec,
    instance: Option<&str>,
    token: &str,
    cell: &Cell,
    root: &std::path::Path,
    family: harness::family::Family,
) -> Result<(Arc<Sut>, String), crate::instance_start::InstanceStartError> {
    let port =
        harness::free_port::free_port().map_err(crate::instance_start::InstanceStartError::Port)?;
    let url = instance
        .map(|u| u.trim_end_matches('/').to_string())
        .unwrap_or_else(|| format!("http://127.0.0.1:{port}"));
    let scratch =
        harness::random::temp_dir().map_err(crate::instance_start::InstanceStartError::Scratch)?;
    let mut placeholders = harness::under_test::placeholders(
        &url,
        Some(port),
        token,
        scratch.path(),
        &root.display().to_string(),
        cell,
    );
    if family == harness::family::Family::Lvmh {
        placeholders.set("gitlab_url", harness::lvmh::gitlab::url()?);
    }
    // A server started here is up once it listens on its port: the run's first step waits for
    // that, and so does each restart.
    let spec = SutSpec {
        listens_on: instance.is_none().then_some(port),
        ..spec
    };
    let sut = Sut::start(spec, placeholders, Some(scratch)).await?;
    Ok((sut, url))
}
