use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use toolgate::cli::{CatalogueFiles, ServeArgs, author, console, engines, fleet, groups, tokens};
use toolgate::database::StoreArgs;

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
    },
    /// Show a tool's permission, hints, per-tier decision (and the rule behind it) and arguments.
    Explain {
        tool: String,
        #[command(flatten)]
        files: CatalogueFiles,
    },
    /// Serve MCP over HTTP (creates the store, an admin and a demo token on first start).
    Serve(Box<ServeArgs>),
    /// Create, list and revoke API tokens.
    Token {
        #[command(flatten)]
        store: StoreArgs,
        #[command(subcommand)]
        command: tokens::TokenCommand,
    },
    /// Add, list and remove principals (the owners of tokens) and their roles.
    Principal {
        #[command(flatten)]
        store: StoreArgs,
        #[command(subcommand)]
        command: PrincipalCommand,
    },
    /// Engine principals: automation's identities, owned by people (docs/identities.md).
    Engine {
        #[command(flatten)]
        store: StoreArgs,
        #[command(subcommand)]
        command: engines::EngineCommand,
    },
    /// Management groups: who sees which part of the fleet (docs/groups.md).
    Group {
        #[command(flatten)]
        store: StoreArgs,
        #[command(subcommand)]
        command: groups::GroupCommand,
    },
    /// The key-encryption keys plugin secrets are sealed under (docs/secrets.md).
    Kek {
        #[command(flatten)]
        store: StoreArgs,
        #[command(subcommand)]
        command: toolgate::cli::kek::KekCommand,
    },
    /// The agent CA's generations: status, rotation, retirement (docs/trust.md).
    Ca {
        #[command(flatten)]
        store: StoreArgs,
        #[command(subcommand)]
        command: toolgate::cli::ca::CaCommand,
    },
    /// Review human approvals from the server's console.
    Approvals {
        #[command(flatten)]
        store: StoreArgs,
        #[command(subcommand)]
        command: ApprovalsCommand,
    },
    /// Mint and list the tokens endpoints enroll with.
    EnrollToken {
        #[command(flatten)]
        store: StoreArgs,
        #[command(subcommand)]
        command: EnrollTokenCommand,
    },
    /// Run the endpoint agent, or list and revoke enrolled agents.
    Agent {
        #[command(subcommand)]
        command: AgentCommand,
    },
    /// Write a consistent copy of the store, also while the server runs (docs/operations.md).
    Backup {
        #[command(flatten)]
        store: StoreArgs,
        /// The file to write; it must not exist yet.
        #[arg(long, value_name = "FILE")]
        to: PathBuf,
    },
    /// Inspect the catalogue as clients see it.
    Tools {
        #[command(subcommand)]
        command: ToolsCommand,
    },
}

#[derive(Subcommand)]
enum PrincipalCommand {
    /// Add a principal (or replace its fleet-wide roles).
    Add {
        name: String,
        /// A fleet-wide role from policy.yaml; repeatable. None: the principal acts only
        /// through roles on management groups (`toolgate group assign`).
        #[arg(long = "role")]
        roles: Vec<String>,
    },
    List,
    /// Remove a principal; its tokens are revoked.
    Remove {
        name: String,
    },
    /// Set the password the principal signs in to the console with; it is read from standard
    /// input (one line), never from the command line.
    SetPassword {
        name: String,
    },
    /// Remove the principal's second factor: their next console sign-in enrolls a new one.
    ResetFactor {
        name: String,
    },
    /// Let a person sign in through the organisation's identity provider as this principal
    /// (needed where the deployment sets `provisioning: pre_provisioned`; docs/sign-in.md).
    Link {
        name: String,
        /// The issuer, exactly as the deployment settings and its tokens' `iss` name it.
        #[arg(long)]
        issuer: String,
        /// The person's subject at that issuer (the `sub` claim of their tokens).
        #[arg(long)]
        subject: String,
    },
    /// Let an IdP subject whose principal was removed sign in again (it is made a new
    /// principal on its next sign-in, where the deployment provisions on first use).
    Readmit {
        #[arg(long)]
        issuer: String,
        #[arg(long)]
        subject: String,
    },
}

#[derive(Subcommand)]
enum ApprovalsCommand {
    /// List approvals, newest first.
    List {
        #[arg(long)]
        status: Option<String>,
    },
    Show {
        id: String,
    },
    /// Approve a pending request; the reviewer must not be its submitter.
    Approve {
        id: String,
        #[arg(long = "as", value_name = "PRINCIPAL")]
        reviewer: String,
        #[arg(long)]
        comment: Option<String>,
    },
    Reject {
        id: String,
        #[arg(long = "as", value_name = "PRINCIPAL")]
        reviewer: String,
        #[arg(long)]
        comment: Option<String>,
    },
}

#[derive(Subcommand)]
enum EnrollTokenCommand {
    /// Mint an enrollment token; its secret is printed once.
    Create {
        /// How long it may be used: 1h, 30m, 7d.
        #[arg(long, default_value = "1h")]
        expires_in: String,
        /// How many agents may enroll with it.
        #[arg(long, default_value_t = 1)]
        uses: i64,
    },
    List,
}

#[derive(Subcommand)]
enum AgentCommand {
    /// Run the agent on this machine: enroll (first run), connect, report, stay connected.
    Run(toolgate_agent::cli::RunArgs),
    /// List enrolled agents (from the store; list_agents over MCP also says who is online).
    List {
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Revoke an agent: it is disconnected and cannot come back without a new enrollment.
    Revoke {
        agent_id: String,
        #[command(flatten)]
        store: StoreArgs,
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

/// A password from standard input: typed without echo at a terminal, else its first line.
fn read_password(name: &str) -> anyhow::Result<String> {
    read_secret(&format!("console password for {name}: "))
}

/// A secret from standard input: typed without echo at a terminal (after `prompt`), else its
/// first line.
fn read_secret(prompt: &str) -> anyhow::Result<String> {
    use std::io::IsTerminal;
    if std::io::stdin().is_terminal() {
        return Ok(rpassword::prompt_password(prompt)?);
    }
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    Ok(line.trim_end_matches(['\r', '\n']).to_string())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = run(cli.command);
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(command: Command) -> anyhow::Result<ExitCode> {
    // The store is async: the console commands run on a small runtime of their own.
    let runtime = || tokio::runtime::Builder::new_current_thread().enable_all().build();
    match command {
        Command::Serve(args) => {
            toolgate::logging::init(args.log_format);
            tokio::runtime::Runtime::new()?.block_on(toolgate::http::serve(args.into_config()?))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Principal { store, command } => runtime()?.block_on(async {
            let store = console::open(&store).await?;
            let text = match command {
                PrincipalCommand::Add { name, roles } => console::principal_add(&store, &name, &roles).await,
                PrincipalCommand::List => console::principal_list(&store).await,
                PrincipalCommand::Remove { name } => console::principal_remove(&store, &name).await,
                PrincipalCommand::SetPassword { name } => {
                    let password = read_password(&name)?;
                    console::principal_set_password(&store, &name, &password).await
                }
                PrincipalCommand::ResetFactor { name } => console::principal_reset_factor(&store, &name).await,
                PrincipalCommand::Link { name, issuer, subject } => {
                    console::principal_link(&store, &name, &issuer, &subject).await
                }
                PrincipalCommand::Readmit { issuer, subject } => {
                    console::principal_readmit(&store, &issuer, &subject).await
                }
            }?;
            Ok(print_out(&text))
        }),
        Command::Engine { store, command } => runtime()?.block_on(async {
            let secret = || read_secret("the successor's secret: ");
            Ok(print_out(&engines::run(&console::open(&store).await?, command, secret).await?))
        }),
        Command::Kek { store, command } => runtime()?.block_on(async {
            let opened = match &command {
                toolgate::cli::kek::KekCommand::Generate { .. } => None,
                toolgate::cli::kek::KekCommand::Check { .. } => Some(console::open(&store).await?),
            };
            Ok(print_out(&toolgate::cli::kek::run(opened.as_ref(), command).await?))
        }),
        Command::Ca { store, command } => runtime()?.block_on(async {
            // An import comes before the first start with a KEK, perhaps before any start: it
            // may make the store (the first start then adds the administrator as ever).
            let opened = match &command {
                toolgate::cli::ca::CaCommand::Import { .. } => {
                    std::fs::create_dir_all(&store.data_dir)
                        .map_err(|e| anyhow::anyhow!("cannot create data dir {}: {e}", store.data_dir.display()))?;
                    store.database()?.open(true, "cli").await?
                }
                _ => console::open(&store).await?,
            };
            Ok(print_out(&toolgate::cli::ca::run(&opened, command).await?))
        }),
        Command::Group { store, command } => {
            runtime()?.block_on(async { Ok(print_out(&groups::run(&console::open(&store).await?, command).await?)) })
        }
        Command::Approvals { store, command } => runtime()?.block_on(async {
            let store = console::open(&store).await?;
            let text = match command {
                ApprovalsCommand::List { status } => console::approvals_list(&store, status.as_deref()).await,
                ApprovalsCommand::Show { id } => console::approvals_show(&store, &id).await,
                ApprovalsCommand::Approve { id, reviewer, comment } => {
                    console::approvals_decide(&store, &id, &reviewer, true, comment.as_deref()).await
                }
                ApprovalsCommand::Reject { id, reviewer, comment } => {
                    console::approvals_decide(&store, &id, &reviewer, false, comment.as_deref()).await
                }
            }?;
            Ok(print_out(&text))
        }),
        Command::Token { store, command } => {
            runtime()?.block_on(async { Ok(print_out(&tokens::run(&console::open(&store).await?, command).await?)) })
        }
        Command::EnrollToken { store, command } => runtime()?.block_on(async {
            let store = console::open(&store).await?;
            let text = match command {
                EnrollTokenCommand::Create { expires_in, uses } => {
                    fleet::enroll_token_create(&store, &expires_in, uses).await
                }
                EnrollTokenCommand::List => fleet::enroll_token_list(&store).await,
            }?;
            Ok(print_out(&text))
        }),
        Command::Agent { command: AgentCommand::Run(args) } => {
            Ok(toolgate_agent::cli::run(args, |format| toolgate::logging::init(format.into())))
        }
        Command::Agent { command: AgentCommand::List { store } } => {
            runtime()?.block_on(async { Ok(print_out(&fleet::agent_list(&console::open(&store).await?).await?)) })
        }
        Command::Agent { command: AgentCommand::Revoke { agent_id, store } } => runtime()?
            .block_on(async { Ok(print_out(&fleet::agent_revoke(&console::open(&store).await?, &agent_id).await?)) }),
        Command::Backup { store, to } => {
            runtime()?.block_on(async { Ok(print_out(&console::backup(&store, &to).await?)) })
        }
        Command::Check { tools, policy } => {
            let ok = author::check(&tools, &policy)?;
            Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        Command::Explain { tool, files } => Ok(print_out(&author::explain(&tool, &files)?)),
        Command::Tools { command: ToolsCommand::List { tier, files } } => {
            Ok(print_out(&format!("{}\n", author::tools_list(tier.as_deref(), &files)?)))
        }
    }
}
