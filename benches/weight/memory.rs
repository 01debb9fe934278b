//! Idle memory of a running gateway, as the kernel accounts it: `VmRSS`, `RssAnon` and `RssFile`
//! from `/proc/PID/status` and `Pss` from `/proc/PID/smaps_rollup`, all in kB (KiB, as the
//! kernel writes them). One reading is noisy (a timer may just have run), so the figure is the
//! median of three readings a second apart.

use std::time::Duration;

/// How long the gateway idles after it is up before the first reading: long enough for start-up
/// allocations to be freed and a few idle polls to have gone round.
pub(crate) const SETTLE: Duration = Duration::from_secs(6);
const READINGS: usize = 3;
const BETWEEN_READINGS: Duration = Duration::from_secs(1);

/// One process's memory, in kB.
#[derive(Clone, Copy, Default)]
pub(crate) struct Idle {
    pub vm_rss: u64,
    pub rss_anon: u64,
    pub rss_file: u64,
    pub pss: u64,
}

/// Waits [`SETTLE`], then takes the median of three readings of `pid`.
pub(crate) async fn settle_and_read(pid: u32) -> Result<Idle, String> {
    tokio::time::sleep(SETTLE).await;
    let mut readings = Vec::with_capacity(READINGS);
    for n in 0..READINGS {
        if n > 0 {
            tokio::time::sleep(BETWEEN_READINGS).await;
        }
        readings.push(read(pid)?);
    }
    Ok(median(&readings))
}

fn read(pid: u32) -> Result<Idle, String> {
    let status = proc_file(pid, "status")?;
    let rollup = proc_file(pid, "smaps_rollup")?;
    Ok(Idle {
        vm_rss: field_kb(&status, "VmRSS:", pid)?,
        rss_anon: field_kb(&status, "RssAnon:", pid)?,
        rss_file: field_kb(&status, "RssFile:", pid)?,
        pss: field_kb(&rollup, "Pss:", pid)?,
    })
}

fn proc_file(pid: u32, name: &str) -> Result<String, String> {
    std::fs::read_to_string(format!("/proc/{pid}/{name}"))
        .map_err(|e| format!("cannot read /proc/{pid}/{name} (Linux only; did the gateway exit?): {e}"))
}

/// The kB value of the line starting with `name` ("VmRSS:     8123 kB").
fn field_kb(text: &str, name: &str, pid: u32) -> Result<u64, String> {
    text.lines()
        .find_map(|line| line.strip_prefix(name))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|value| value.parse().ok())
        .ok_or_else(|| format!("no {name} line in /proc/{pid}"))
}

/// Each field's median on its own.
fn median(readings: &[Idle]) -> Idle {
    let pick = |get: fn(&Idle) -> u64| {
        let mut values: Vec<u64> = readings.iter().map(get).collect();
        values.sort_unstable();
        values.get(values.len() / 2).copied().unwrap_or(0)
    };
    Idle { vm_rss: pick(|i| i.vm_rss), rss_anon: pick(|i| i.rss_anon), rss_file: pick(|i| i.rss_file), pss: pick(|i| i.pss) }
}
