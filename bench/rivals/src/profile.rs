//! Where the time goes: `perf` on the whole machine while lockd's leader
//! serves 64 clients, turned into a flamegraph of the leader (inferno) and
//! two tables (CPU by process, leader CPU by binary/kernel).

use std::path::Path;
use std::process::Command;

pub struct Profile {
    /// `perf report` text: CPU share by command name, whole machine.
    pub by_process: String,
    /// `perf report` text: the leader's CPU by DSO (kernel, lockd, libc).
    pub leader_by_dso: String,
    /// `perf report` text: the leader's hottest symbols (self time).
    pub leader_symbols: String,
    /// The flamegraph file name, when it was drawn.
    pub flamegraph: Option<String>,
}

fn perf_report(data: &Path, args: &[&str], lines: usize) -> String {
    let out = Command::new("perf")
        .arg("report")
        .arg("-i")
        .arg(data)
        .args([
            "--stdio",
            "--no-children",
            "-g",
            "none",
            "--percent-limit",
            "0.5",
        ])
        .args(args)
        .output();
    match out {
        Ok(o) => String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| l.contains('%') && !l.starts_with('#'))
            .take(lines)
            .map(|l| l.trim_end_matches([' ', '-']).to_string())
            .collect::<Vec<_>>()
            .join("\n"),
        Err(e) => format!("perf report failed: {e}"),
    }
}

/// Record `seconds` of the whole machine (call graphs), while the caller
/// keeps the load running; `leader` is the leader's pid.
pub fn record(out_dir: &Path, leader: u32, seconds: u64) -> Result<Profile, String> {
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let data = tmp.path().join("perf.data");
    let status = Command::new("perf")
        .args(["record", "-a", "-g", "-F", "499", "-o"])
        .arg(&data)
        .args(["--", "sleep", &seconds.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map_err(|e| format!("cannot run perf: {e}"))?;
    if !status.success() {
        return Err(format!("perf record failed ({status})"));
    }
    let pid = leader.to_string();
    let by_process = perf_report(&data, &["--sort", "comm"], 12);
    let leader_by_dso = perf_report(
        &data,
        &["--pid", &pid, "--percentage", "relative", "--sort", "dso"],
        8,
    );
    let leader_symbols = perf_report(
        &data,
        &[
            "--pid",
            &pid,
            "--percentage",
            "relative",
            "--sort",
            "dso,symbol",
        ],
        20,
    );
    let script = Command::new("perf")
        .arg("script")
        .arg("-i")
        .arg(&data)
        .args(["--pid", &pid])
        .output()
        .map_err(|e| format!("perf script: {e}"))?;
    let mut folded = Vec::new();
    let flamegraph = (|| {
        use inferno::collapse::Collapse;
        inferno::collapse::perf::Folder::default()
            .collapse(&script.stdout[..], &mut folded)
            .ok()?;
        let mut opts = inferno::flamegraph::Options::default();
        opts.title = "lockd leader, 64 clients on their own keys".into();
        let name = "leader-profile.svg";
        let file = std::fs::File::create(out_dir.join(name)).ok()?;
        inferno::flamegraph::from_reader(&mut opts, &folded[..], std::io::BufWriter::new(file))
            .ok()?;
        Some(name.to_string())
    })();
    Ok(Profile {
        by_process,
        leader_by_dso,
        leader_symbols,
        flamegraph,
    })
}
