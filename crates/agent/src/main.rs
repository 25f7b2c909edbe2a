//! `toolgate-agent`: the endpoint agent alone, built from this crate without the server
//! (`toolgate agent run` calls the same code). See docs/agents.md.

use clap::Parser;

/// toolgate's endpoint agent: enrolls (first run), keeps one outbound connection to the
/// server, reports this host and runs what it is sent.
#[derive(Parser)]
#[command(name = "toolgate-agent", version)]
struct Command {
    #[command(flatten)]
    args: toolgate_agent::cli::RunArgs,
}

fn main() -> std::process::ExitCode {
    toolgate_agent::cli::run(Command::parse().args, toolgate_agent::cli::init_logging)
}
