use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use toolgate::cli::{self, CatalogueFiles};

/// toolgate: an MCP server whose tools are compiled from tools.yaml and policy.yaml.
#[derive(Parser)]
#[command(name = "toolgate", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check tools.yaml and policy.yaml with the build's own rules, without compiling.
    Check {
        #[arg(long, value_name = "FILE", default_value = "tools.yaml")]
        tools: PathBuf,
        #[arg(long, value_name = "FILE", default_value = "policy.yaml")]
        policy: PathBuf,
        /// Where the Rust handlers live [default: src/handlers next to the tools file]
        #[arg(long, value_name = "DIR")]
        handlers: Option<PathBuf>,
    },
    /// Show a tool's permission, hints, per-tier decision (and the rule behind it) and arguments.
    Explain {
        tool: String,
        #[command(flatten)]
        files: CatalogueFiles,
    },
    /// Inspect the catalogue as clients see it.
    Tools {
        #[command(subcommand)]
        command: ToolsCommand,
    },
}

#[derive(Subcommand)]
enum ToolsCommand {
    /// Print the tools/list result a client of TIER gets (the full catalogue without --tier).
    List {
        #[arg(long)]
        tier: Option<String>,
        #[command(flatten)]
        files: CatalogueFiles,
    },
}

/// Prints to stdout; a closed pipe (`| head`) is not an error worth a panic.
fn print_out(text: &str) -> ExitCode {
    use std::io::Write;
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Check { tools, policy, handlers } => {
            cli::check(&tools, &policy, handlers).map(|ok| if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        Command::Explain { tool, files } => cli::explain(&tool, &files).map(|text| print_out(&text)),
        Command::Tools { command: ToolsCommand::List { tier, files } } => {
            cli::tools_list(tier.as_deref(), &files).map(|text| print_out(&format!("{text}\n")))
        }
    };
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
