//! The `warren` command. This is a stub: the real `main.rs` (tracker, run, bench, example) is
//! owned elsewhere and adds `Recordio(cmd_recordio::RecordioArgs)` to its command enum.

mod cmd_recordio;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "warren", about = "Warren: fault-tolerant collectives")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// RecordIO files: write, cat, index, check.
    Recordio(cmd_recordio::RecordioArgs),
}

fn main() {
    let result = match Cli::parse().command {
        Command::Recordio(args) => cmd_recordio::run(args),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("warren: {e}");
            std::process::exit(1);
        }
    }
}
