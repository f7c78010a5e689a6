//! The `capot` binary: parse the command line, set up logging, run, and turn errors into one
//! line on stderr and a non-zero exit code.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    init_logging(&cli.global);
    match cli::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging(global: &cli::GlobalArgs) {
    let filter = tracing_subscriber::EnvFilter::try_new(&global.log)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match global.log_format {
        cli::LogFormat::Json => builder.json().init(),
        cli::LogFormat::Text => builder.init(),
    }
}
