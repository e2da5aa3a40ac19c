//! docs/configuration.md against the settings: its `lockd serve` tables
//! are rendered from [`ServeSettings`] (`LOCKD_BLESS=1` writes them), and
//! every default its Limits table gives for a flag must be that flag's.

use std::path::PathBuf;

use clap::{Arg, Args, Command};

use super::settings::ServeSettings;

const BEGIN: &str = "<!-- settings: generated from host/src/config/settings.rs; LOCKD_BLESS=1 cargo test -p lockd config::docs rewrites it -->\n";
const END: &str = "<!-- settings: end -->\n";

fn doc_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/configuration.md")
}

fn serve() -> Command {
    ServeSettings::augment_args(Command::new("serve"))
}

/// A number as the docs write it: `10 000`, `64 MiB`, `1.25 GiB`.
fn human(id: &str, value: &str) -> String {
    let Ok(n) = value.parse::<u64>() else {
        return format!("`{value}`");
    };
    const MIB: u64 = 1 << 20;
    if id.ends_with("_bytes") && n >= MIB && n % (MIB / 4) == 0 {
        let (unit, size) = if n >= 1 << 30 {
            ("GiB", 1u64 << 30)
        } else {
            ("MiB", MIB)
        };
        return format!("{} {unit}", n as f64 / size as f64);
    }
    let digits = n.to_string();
    if digits.len() <= 3 {
        return digits;
    }
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

fn default_of(arg: &Arg) -> String {
    // A switch's default is set when clap builds the command: off.
    if matches!(arg.get_action(), clap::ArgAction::SetTrue) {
        return "off".into();
    }
    match arg.get_default_values() {
        [] => "none".into(),
        [v] => human(arg.get_id().as_str(), &v.to_string_lossy()),
        many => many
            .iter()
            .map(|v| v.to_string_lossy())
            .collect::<Vec<_>>()
            .join(", "),
    }
}

fn help_of(arg: &Arg) -> String {
    let help = arg
        .get_long_help()
        .or(arg.get_help())
        .map(|h| h.to_string())
        .unwrap_or_default();
    help.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// The tables: one per area, in the order of `lockd serve --help`.
fn render(cmd: &Command) -> String {
    let mut out = String::new();
    let mut heading = None;
    for arg in cmd.get_arguments().filter(|a| a.get_env().is_some()) {
        if heading != Some(arg.get_help_heading()) {
            heading = Some(arg.get_help_heading());
            out.push_str(&format!(
                "\n#### {}\n\n| flag / TOML key | environment | default | what it sets |\n|---|---|---|---|\n",
                arg.get_help_heading().unwrap_or("The config file")
            ));
        }
        let id = arg.get_id().as_str();
        let names = if id == "config" {
            "`--config FILE`".to_string()
        } else {
            format!("`--{}` / `{id}`", arg.get_long().unwrap_or(id))
        };
        out.push_str(&format!(
            "| {names} | `{}` | {} | {} |\n",
            arg.get_env().unwrap_or_default().to_string_lossy(),
            default_of(arg),
            help_of(arg)
        ));
    }
    out.push('\n');
    out
}

/// `doc` with what is between the markers replaced by `generated`.
fn splice(doc: &str, generated: &str) -> Option<String> {
    let start = doc.find(BEGIN)? + BEGIN.len();
    let end = start + doc[start..].find(END)?;
    Some(format!("{}{generated}{}", &doc[..start], &doc[end..]))
}

/// A quantity as the docs write it (`1 024`, `5 000 ms`, `4 MiB`,
/// `1.25 GiB`), as a number.
fn quantity(text: &str) -> Option<u64> {
    let t = text.trim().trim_end_matches("ms").trim();
    let (number, scale) = match t.rsplit_once(' ') {
        Some((n, "KiB")) => (n, 1u64 << 10),
        Some((n, "MiB")) => (n, 1 << 20),
        Some((n, "GiB")) => (n, 1 << 30),
        _ => (t, 1),
    };
    let number: String = number.chars().filter(|c| !c.is_whitespace()).collect();
    let n: f64 = number.parse().ok()?;
    Some((n * scale as f64) as u64)
}

/// Every row of the Limits table in `doc` that names a flag and a default
/// other than `cmd`'s: what is wrong with each.
fn check_limits(doc: &str, cmd: &Command) -> Vec<String> {
    let Some(start) = doc.find("\n## Limits\n") else {
        return vec!["no \"## Limits\" section".into()];
    };
    let section = &doc[start + 1..];
    let section = &section[..section[1..].find("\n## ").map_or(section.len(), |i| i + 1)];
    let mut wrong = Vec::new();
    for line in section.lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (Some(flag), Some(default)) = (cells.get(2), cells.get(3)) else {
            continue;
        };
        let Some(long) = flag.strip_prefix("`--").and_then(|f| f.split('`').next()) else {
            continue;
        };
        let Some(arg) = cmd.get_arguments().find(|a| a.get_long() == Some(long)) else {
            wrong.push(format!("--{long}: no such setting"));
            continue;
        };
        let actual = arg
            .get_default_values()
            .first()
            .and_then(|v| v.to_str()?.parse::<u64>().ok());
        if actual.is_none() || quantity(default) != actual {
            wrong.push(format!(
                "--{long}: the docs say {default}, its default is {}",
                default_of(arg)
            ));
        }
    }
    wrong
}

#[test]
fn the_settings_tables_are_the_settings() {
    let path = doc_path();
    let doc = std::fs::read_to_string(&path).unwrap();
    let want = splice(&doc, &render(&serve())).expect("the markers in docs/configuration.md");
    if std::env::var_os("LOCKD_BLESS").is_some() {
        std::fs::write(&path, &want).unwrap();
    } else {
        assert!(
            doc == want,
            "docs/configuration.md's settings tables are not the settings': run this test with LOCKD_BLESS=1"
        );
    }
}

#[test]
fn the_limits_table_gives_the_flags_defaults() {
    let doc = std::fs::read_to_string(doc_path()).unwrap();
    let wrong = check_limits(&doc, &serve());
    assert!(
        wrong.is_empty(),
        "docs/configuration.md, Limits: {wrong:#?}"
    );
}

/// The negative control: the checker catches a wrong default, a flag that
/// is not a setting, and not a right one.
#[test]
fn the_limits_check_catches_a_wrong_row() {
    let sample = "\n## Limits\n\n| what | flag | default | past it |\n|---|---|---:|---|\n\
        | key length | (fixed) | 1 024 bytes | 400 |\n\
        | waiters per key | `--max-waiters-per-key` | 1 024 | 429 |\n\
        | snapshot | `--max-snapshot-bytes` | 1.25 GiB | refused |\n\
        | module | `--max-module-bytes` (at most 32 MiB) | 4 MiB | 413 |\n\
        | hello | `--hello-timeout-ms` | 5 000 ms | closed |\n\n## Next\n| x | `--nope` | 1 | |\n";
    assert_eq!(check_limits(sample, &serve()), Vec::<String>::new());
    let broken = sample.replace("| 1 024 | 429", "| 2 048 | 429");
    let wrong = check_limits(&broken, &serve());
    assert_eq!(wrong.len(), 1, "{wrong:?}");
    assert!(
        wrong[0].contains("--max-waiters-per-key") && wrong[0].contains("2 048"),
        "{wrong:?}"
    );
    let unknown = sample.replace("`--hello-timeout-ms`", "`--hello-timeout`");
    assert_eq!(check_limits(&unknown, &serve()).len(), 1);
    // And the tables' renderer: a changed default is a changed table.
    assert_eq!(human("max_snapshot_bytes", "1342177280"), "1.25 GiB");
    assert_eq!(human("max_waiters", "65536"), "65 536");
    assert_eq!(quantity("50 000 000 000"), Some(50_000_000_000));
}
