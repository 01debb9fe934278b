//! The release binary's weight, and the budget CI holds it to (issue 35): its size on disk
//! (unstripped and stripped) and the idle memory of `hermes gateway run` — with Telegram only,
//! with each adapter alone and with all seven connected at once.
//!
//! It never builds hermes: it measures the binary named by `--binary PATH` (default
//! `$CARGO_TARGET_DIR/release/hermes`, else `target/release/hermes`), so that the figures are the
//! real release build's. Run in the dev profile, so that CI reuses its test build:
//!
//! ```text
//! cargo bench --profile dev --locked --bench weight -- [--check | --profile-idle] [--binary PATH] [--budgets PATH]
//! tests/peers/run.sh cargo bench --profile dev --bench weight    # with Matrix and email
//! ```
//!
//! `--check` measures only the stripped size and the Telegram-only idle RSS, prints them beside
//! their budgets (`benches/weight/budgets.yaml`, or `--budgets PATH`) and exits 1 when one is over.
//!
//! `--profile-idle` measures nothing: it runs only the all-connected gateway, waits until every
//! adapter is up, lets it idle [`PROFILE_IDLE`] and stops it with SIGTERM, waiting for the exit.
//! `scripts/order-hot-code.py` runs it with `HERMES_BENCH_WRAPPER` set to callgrind (which writes
//! its profile at exit) to learn which functions an idle gateway runs; see `gateway.rs`.
//!
//! Linux only (it reads /proc).

mod budgets;
mod gateway;
mod memory;
mod platforms;
mod size;
#[path = "../support.rs"]
#[allow(dead_code)] // percentiles, verdicts and Process are for the latency benches
mod support;

use budgets::{Budgets, Verdict};
use gateway::Gateway;
use hermes_fakes::{FakeLlm, LlmConfig};
use memory::Idle;
use platforms::{Platform, RealPeers, Setup};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

const USAGE: &str = "usage: cargo bench --profile dev --bench weight -- [--check | --profile-idle] [--binary PATH] [--budgets PATH]";
/// How long `--profile-idle` lets the connected gateway idle: a few rounds of every adapter's
/// idle polling and keep-alives, which is what the profile is after.
const PROFILE_IDLE: Duration = Duration::from_secs(10);

/// What a run does.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// Every figure, in a table.
    Full,
    /// The two budgeted figures against their budgets.
    Check,
    /// Only the all-connected gateway, idling, for a profiler.
    ProfileIdle,
}

struct Options {
    mode: Mode,
    binary: PathBuf,
    budgets: PathBuf,
}

fn main() -> ExitCode {
    let options = match parse_args(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("weight: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime for the fakes");
    let outcome = match options.mode {
        Mode::Full => runtime.block_on(full(&options)),
        Mode::Check => runtime.block_on(check(&options)),
        Mode::ProfileIdle => runtime.block_on(profile_idle(&options)),
    };
    match outcome {
        Ok(code) => code,
        Err(message) => {
            eprintln!("weight: {message}");
            ExitCode::from(2)
        }
    }
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut options = Options { mode: Mode::Full, binary: default_binary(manifest), budgets: manifest.join("benches/weight/budgets.yaml") };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--check" => options.mode = only_mode(options.mode, Mode::Check)?,
            "--profile-idle" => options.mode = only_mode(options.mode, Mode::ProfileIdle)?,
            "--binary" => options.binary = args.next().ok_or("--binary needs a path")?.into(),
            "--budgets" => options.budgets = args.next().ok_or("--budgets needs a path")?.into(),
            // `cargo bench` passes it to every bench.
            "--bench" => {}
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if !options.binary.is_file() {
        return Err(format!("no binary at {} (build it with `cargo build --release`, or pass --binary PATH)", options.binary.display()));
    }
    Ok(options)
}

/// `--check` and `--profile-idle` exclude each other.
fn only_mode(current: Mode, wanted: Mode) -> Result<Mode, String> {
    if current == Mode::Full || current == wanted { Ok(wanted) } else { Err("--check and --profile-idle exclude each other".into()) }
}

/// The binary `cargo build --release` made.
fn default_binary(manifest: &Path) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| manifest.join("target"));
    target.join("release/hermes")
}

/// `--check`: the two budgeted figures against their budgets.
async fn check(options: &Options) -> Result<ExitCode, String> {
    let budgets: Budgets = budgets::load(&options.budgets)?;
    println!("binary: {}\nbudgets: {}", options.binary.display(), options.budgets.display());
    let sizes = size::measure(&options.binary)?;
    let llm = fake_llm().await?;
    let telegram = measure_idle(&options.binary, &[Platform::Telegram], &RealPeers::from_env(), &llm.base_url()).await?;
    llm.shutdown();
    if let Some(first_poll) = telegram.first_get_updates {
        println!("spawn → first getUpdates: {:.0} ms", ms(first_poll));
    }
    // The split says where to look when VmRSS is over: RssFile is code paged in (the hot-code
    // order), RssAnon is heap and stacks.
    let idle = &telegram.idle;
    println!("idle: RssAnon {} kB, RssFile {} kB, Pss {} kB", idle.rss_anon, idle.rss_file, idle.pss);
    let verdicts = [
        Verdict {
            key: budgets::STRIPPED_KEY,
            what: "the stripped binary",
            unit: "bytes",
            measured: sizes.stripped,
            budget: budgets.stripped_binary_bytes,
        },
        Verdict {
            key: budgets::IDLE_RSS_KEY,
            what: "the Telegram-only idle VmRSS",
            unit: "kB",
            measured: telegram.idle.vm_rss,
            budget: budgets.idle_rss_telegram_only_kb,
        },
    ];
    println!("\n| figure | measured | budget | |\n|---|---:|---:|---|");
    for v in &verdicts {
        println!("| {} | {} {unit} | {} {unit} | {} |", v.what, v.measured, v.budget, if v.over() { "OVER" } else { "ok" }, unit = v.unit);
    }
    let over: Vec<&Verdict> = verdicts.iter().filter(|v| v.over()).collect();
    for v in &over {
        eprintln!("\nweight: {}", v.complaint(&options.budgets));
    }
    Ok(if over.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// No `--check`: every figure, in a table.
async fn full(options: &Options) -> Result<ExitCode, String> {
    println!("binary: {}", options.binary.display());
    let sizes = size::measure(&options.binary)?;
    let peers = RealPeers::from_env();
    let mut rows = vec![
        ("binary size, unstripped".to_string(), bytes(sizes.unstripped)),
        ("binary size, stripped".to_string(), bytes(sizes.stripped)),
    ];
    let llm = fake_llm().await?;
    for platform in Platform::ALL {
        if !peers.has(platform) {
            println!("skipping {} alone: no test peer (run through tests/peers/run.sh for Matrix and email)", platform.name());
            continue;
        }
        let run = measure_idle(&options.binary, &[platform], &peers, &llm.base_url()).await?;
        rows.extend(run.rows(&format!("{} alone", platform.name())));
    }
    let (connected, label) = all_connected(&peers);
    let run = measure_idle(&options.binary, &connected, &peers, &llm.base_url()).await?;
    rows.extend(run.rows(&label));
    llm.shutdown();
    println!("\n| figure | value |\n|---|---:|");
    for (figure, value) in rows {
        println!("| {figure} | {value} |");
    }
    Ok(ExitCode::SUCCESS)
}

/// Every platform that has what it talks to, and a label for them; says which are left out.
fn all_connected(peers: &RealPeers) -> (Vec<Platform>, String) {
    let connected: Vec<Platform> = Platform::ALL.into_iter().filter(|p| peers.has(*p)).collect();
    let missing: Vec<&str> = Platform::ALL.into_iter().filter(|p| !peers.has(*p)).map(Platform::name).collect();
    if missing.is_empty() {
        return (connected, "all seven connected".to_string());
    }
    println!("all connected: without {} (no test peer), {} of 7", missing.join(", "), connected.len());
    let label = format!("{} of 7 connected (no {})", connected.len(), missing.join(", "));
    (connected, label)
}

/// `--profile-idle`: the all-connected gateway up, idle for [`PROFILE_IDLE`], stopped with
/// SIGTERM; an error if it had to be killed (a profiler then writes nothing).
async fn profile_idle(options: &Options) -> Result<ExitCode, String> {
    let wrapper = support::wrapper();
    println!("profiling idle: {} gateway run", gateway::describe(&wrapper, &options.binary));
    let peers = RealPeers::from_env();
    let (connected, label) = all_connected(&peers);
    let llm = fake_llm().await?;
    let setup = Setup::start(&connected, &peers, &llm.base_url()).await?;
    let mut gateway = Gateway::spawn(&options.binary, &setup.env, &setup.config)?;
    println!("{label}: waiting until every adapter is up");
    let up = setup.wait_up(&mut gateway).await?;
    if let Some(first_poll) = up.first_get_updates {
        println!("spawn → first getUpdates: {:.1} s", first_poll.as_secs_f64());
    }
    println!("spawn → all up: {:.1} s; idling {} s", up.all_up.as_secs_f64(), PROFILE_IDLE.as_secs());
    tokio::time::sleep(PROFILE_IDLE).await;
    println!("stopping it with SIGTERM");
    let (status, took) = gateway.stop().await?;
    llm.shutdown();
    println!("the gateway exited ({status}) {:.1} s after SIGTERM", took.as_secs_f64());
    Ok(ExitCode::SUCCESS)
}

async fn fake_llm() -> Result<FakeLlm, String> {
    FakeLlm::start_with(LlmConfig { record: false, ..LlmConfig::default() }).await.map_err(|e| format!("fake LLM: {e}"))
}

/// One gateway's idle figures.
struct Run {
    first_get_updates: Option<Duration>,
    all_up: Duration,
    idle: Idle,
}

/// Spawns the gateway with `platforms`, waits until all are up, lets it idle, reads its memory
/// and stops it.
async fn measure_idle(binary: &Path, platforms: &[Platform], peers: &RealPeers, llm_base_url: &str) -> Result<Run, String> {
    let setup = Setup::start(platforms, peers, llm_base_url).await?;
    let mut gateway = Gateway::spawn(binary, &setup.env, &setup.config)?;
    let up = setup.wait_up(&mut gateway).await?;
    let idle = memory::settle_and_read(gateway.pid()).await;
    if let Err(message) = gateway.stop().await {
        eprintln!("weight: {message}");
    }
    Ok(Run { first_get_updates: up.first_get_updates, all_up: up.all_up, idle: idle? })
}

impl Run {
    fn rows(&self, label: &str) -> Vec<(String, String)> {
        let mut rows = Vec::new();
        if let Some(first_poll) = self.first_get_updates {
            rows.push((format!("{label}: spawn → first getUpdates"), format!("{:.0} ms", ms(first_poll))));
        }
        rows.push((format!("{label}: spawn → all up"), format!("{:.0} ms", ms(self.all_up))));
        for (name, kb) in
            [("VmRSS", self.idle.vm_rss), ("RssAnon", self.idle.rss_anon), ("RssFile", self.idle.rss_file), ("Pss", self.idle.pss)]
        {
            rows.push((format!("{label}: idle {name}"), kilobytes(kb)));
        }
        rows
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Bytes in MB (10^6) and MiB.
fn bytes(n: u64) -> String {
    format!("{n} bytes ({:.2} MB, {:.2} MiB)", n as f64 / 1e6, n as f64 / (1024.0 * 1024.0))
}

/// The kernel's kB (1024 bytes) in MB (10^6 bytes).
fn kilobytes(kb: u64) -> String {
    format!("{kb} kB ({:.2} MB)", kb as f64 * 1024.0 / 1e6)
}
