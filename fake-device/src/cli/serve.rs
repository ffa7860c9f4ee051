//! `fake-device serve --stdio`: plain ACP on standard input and output, for editors.

use harness::Exit;
use harness::cli::CliError;
use harness::rules::Binds;

use super::args::{AgentArg, ServeArgs, scripts_of};

/// `fake-device serve --stdio`.
pub(super) fn serve(args: ServeArgs) -> Result<Exit, CliError> {
    if !args.stdio {
        return Err(CliError::Usage(
            "say `serve --stdio` (stdin/stdout is the only transport serve has)".into(),
        ));
    }
    if matches!(args.agent, AgentArg::Model) && args.instance.is_none() {
        return Err(CliError::Usage(
            "--agent model asks an instance's model: give --instance URL".into(),
        ));
    }
    let scripts = scripts_of(args.scripts.as_deref())?;
    let mut options = crate::Options::for_instance(args.instance.unwrap_or_default());
    options.token = args.token.value;
    options.agent = args.agent.into();
    options.scripts = scripts;
    options.approval_timeout = args.approval_timeout.map(|d| d.0);
    options.state_dir = args.state_dir;
    options.cell = options.cell.with_spec(args.spec);
    options.misbehave = harness::cli::misbehaviours(&args.misbehave, Binds::Device)?;
    let runtime = harness::cli::runtime(false)?;
    let finished = runtime.block_on(async {
        let connection = harness::transport::stdio::stdio(options.limits);
        crate::serve_stdio(options, connection, harness::cli::shutdown_signal()).await
    });
    // A task still blocked on stdin (the console) or a slow peer must not hold the exit.
    runtime.shutdown_background();
    finished?;
    Ok(Exit::Passed)
}
