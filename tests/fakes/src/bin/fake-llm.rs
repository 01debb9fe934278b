//! Standalone fake LLM for benchmarks and manual tries.
//!
//! `fake-llm [--port N] [--reply-delay-ms N]` answers every chat completion
//! with the deterministic echo, prints `FAKE_LLM_URL=<base_url>` as the first
//! stdout line (so a parent process can read the port), then runs until
//! killed or interrupted.

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

use hermes_fakes::{FakeLlm, LlmConfig, Reply};

const USAGE: &str = "usage: fake-llm [--port N] [--reply-delay-ms N]";

struct Args {
    port: u16,
    reply_delay: Option<Duration>,
}

/// Hand-rolled on purpose: two flags do not justify a clap dependency in a
/// test-support crate.
fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut parsed = Args { port: 0, reply_delay: None };
    while let Some(arg) = args.next() {
        // Accept both `--flag value` and `--flag=value`.
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) => (f.to_owned(), Some(v.to_owned())),
            None => (arg, None),
        };
        let mut value = |name: &str| inline.clone().or_else(|| args.next()).ok_or_else(|| format!("{name} needs a value"));
        match flag.as_str() {
            "--port" => {
                let v = value("--port")?;
                parsed.port = v.parse().map_err(|_| format!("invalid --port {v:?}"))?;
            }
            "--reply-delay-ms" => {
                let v = value("--reply-delay-ms")?;
                let ms: u64 = v.parse().map_err(|_| format!("invalid --reply-delay-ms {v:?}"))?;
                parsed.reply_delay = (ms > 0).then(|| Duration::from_millis(ms));
            }
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    Ok(parsed)
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(msg) => {
            eprintln!("{msg}");
            return ExitCode::from(2);
        }
    };

    let config = LlmConfig {
        addr: SocketAddr::from((Ipv4Addr::LOCALHOST, args.port)),
        // Nobody can read the records of a standalone process; keeping them
        // would only grow memory during long benchmark runs.
        record: false,
    };
    let llm = match FakeLlm::start_with(config).await {
        Ok(llm) => llm,
        Err(err) => {
            eprintln!("fake-llm: cannot listen on 127.0.0.1:{}: {err}", args.port);
            return ExitCode::FAILURE;
        }
    };
    if let Some(delay) = args.reply_delay {
        llm.set_default(Reply::Echo.delayed(delay));
    }

    // The parent blocks on this line to learn the port, so flush explicitly:
    // stdout is block-buffered when it is a pipe.
    let mut stdout = std::io::stdout().lock();
    if writeln!(stdout, "FAKE_LLM_URL={}", llm.base_url()).and_then(|()| stdout.flush()).is_err() {
        return ExitCode::FAILURE;
    }
    drop(stdout);

    if let Err(err) = tokio::signal::ctrl_c().await {
        eprintln!("fake-llm: cannot wait for Ctrl-C ({err}); exiting");
        return ExitCode::FAILURE;
    }
    llm.shutdown();
    ExitCode::SUCCESS
}
