//! Where each setting's value comes from: default < file < environment <
//! flag.
//!
//! Every setting declares its environment variable (`env = "LOCKD_…"` in
//! [`super::settings`]); `--config FILE` (or `LOCKD_CONFIG`) names a TOML
//! file. [`parse`] reads the command line with clap, then checks every
//! value of the environment and the file against the setting's own value
//! parser (so a bad one is refused naming its variable or key), and hands
//! them to clap as the settings' defaults, the environment's over the
//! file's: clap's own precedence (a flag beats a default) then does the
//! rest, and one parse yields the typed settings. [`Origins`] records
//! where each value came from, for the errors found later.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

use clap::builder::ValueParser;
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command};

use super::ConfigError;

/// Where a value came from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Source {
    #[default]
    Default,
    File {
        path: PathBuf,
        key: String,
    },
    Env(String),
    Flag(String),
}

impl Source {
    /// Its place in the precedence: a higher one wins.
    pub fn rank(&self) -> u8 {
        match self {
            Source::Default => 0,
            Source::File { .. } => 1,
            Source::Env(_) => 2,
            Source::Flag(_) => 3,
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => write!(f, "the default"),
            Source::File { path, key } => {
                write!(f, "`{key}` in the config file {}", path.display())
            }
            Source::Env(var) => write!(f, "the environment variable {var}"),
            Source::Flag(flag) => write!(f, "the flag {flag}"),
        }
    }
}

/// Where each setting of a parsed command came from (by clap id: the
/// field's name, which is also its TOML key).
#[derive(Clone, Debug, Default)]
pub struct Origins {
    by_id: BTreeMap<String, Source>,
}

impl Origins {
    /// Where setting `id` came from ([`Source::Default`] when not given).
    pub fn of(&self, id: &str) -> Source {
        self.by_id.get(id).cloned().unwrap_or_default()
    }
}

/// `cmd` with no environment variable read by clap itself (they are read
/// here, and checked, before clap sees them), its subcommands too.
pub(crate) fn without_env(cmd: Command) -> Command {
    cmd.mut_args(|a| a.env(None::<&str>))
        .mut_subcommands(without_env)
}

/// The environment variable each setting of `cmd` declares, by id.
fn env_names(cmd: &Command) -> Vec<(String, String)> {
    cmd.get_arguments()
        .filter_map(|a| {
            let var = a.get_env()?.to_str()?.to_string();
            Some((a.get_id().to_string(), var))
        })
        .collect()
}

/// Parse `argv` with `cmd`, its settings' values from `env` (the process's
/// environment: `|v| std::env::var_os(v)`) and from the config file its
/// `config` setting names, in that precedence under the command line.
///
/// Layers apply to the root's settings and to those of the subcommand
/// chosen (one level down, as `lockd serve`).
pub fn parse<I, T>(
    cmd: Command,
    argv: I,
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<(ArgMatches, Origins), ConfigError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let argv: Vec<OsString> = argv.into_iter().map(Into::into).collect();
    let shown = cmd;
    let bare = without_env(shown.clone());
    let first = match bare.clone().try_get_matches_from(&argv) {
        Ok(m) => m,
        // Help and version from the command as declared: it names the
        // variables.
        Err(e) if is_display(e.kind()) => {
            return Err(shown.try_get_matches_from(&argv).err().unwrap_or(e).into())
        }
        Err(e) => return Err(e.into()),
    };
    let sub = first.subcommand_name().map(str::to_string);
    let leaf = match &sub {
        Some(name) => shown.find_subcommand(name).expect("matched").clone(),
        None => shown.clone(),
    };
    let leaf_matches = match &sub {
        Some(name) => first.subcommand_matches(name).expect("matched"),
        None => &first,
    };

    // The lower layers' values, each checked; the environment's first, so
    // that the file's never replaces one.
    let mut given: BTreeMap<String, (String, Source)> = BTreeMap::new();
    let root_env = if sub.is_some() {
        env_names(&shown)
    } else {
        Vec::new()
    };
    for (cmd, vars) in [(&shown, root_env), (&leaf, env_names(&leaf))] {
        for (id, var) in vars {
            let Some(value) = env(&var) else { continue };
            let value = value.into_string().map_err(|v| ConfigError::BadValue {
                flag: flag_of(cmd, &id),
                origin: Source::Env(var.clone()),
                value: v.to_string_lossy().into_owned(),
                reason: "not UTF-8".into(),
            })?;
            check(cmd, &id, &value, || Source::Env(var.clone()))?;
            given.insert(id, (value, Source::Env(var)));
        }
    }
    let config = match leaf_matches.value_source("config") {
        Some(ValueSource::CommandLine) => leaf_matches.get_one::<PathBuf>("config").cloned(),
        _ => given.get("config").map(|(v, _)| PathBuf::from(v)),
    };
    if let Some(path) = config {
        for (key, value) in read_file(&leaf, &path)? {
            given.entry(key.clone()).or_insert((
                value,
                Source::File {
                    path: path.clone(),
                    key,
                },
            ));
        }
    }

    let mut layered = bare;
    for (id, (value, _)) in &given {
        let set = |a: Arg| a.default_value(value.clone());
        layered = if shown.get_arguments().any(|a| a.get_id() == id) {
            layered.mut_arg(id, set)
        } else {
            let name = sub.as_deref().expect("a subcommand's setting");
            layered.mut_subcommand(name, |s| s.mut_arg(id, set))
        };
    }
    let matches = layered.try_get_matches_from(&argv)?;

    let leaf_matches = match &sub {
        Some(name) => matches.subcommand_matches(name).expect("matched"),
        None => &matches,
    };
    let mut origins = Origins::default();
    for arg in leaf.get_arguments() {
        let id = arg.get_id().as_str();
        let source = match leaf_matches.value_source(id) {
            Some(ValueSource::CommandLine) => Source::Flag(flag_of(&leaf, id)),
            Some(ValueSource::DefaultValue) => match given.get(id) {
                Some((_, source)) => source.clone(),
                None => Source::Default,
            },
            _ => continue,
        };
        origins.by_id.insert(id.to_string(), source);
    }
    Ok((matches, origins))
}

fn is_display(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    )
}

fn flag_of(cmd: &Command, id: &str) -> String {
    cmd.get_arguments()
        .find(|a| a.get_id() == id)
        .and_then(Arg::get_long)
        .map_or_else(|| id.to_string(), |l| format!("--{l}"))
}

/// Refuse `value` unless setting `id` of `cmd` would take it, with the
/// reason its value parser gives.
fn check(
    cmd: &Command,
    id: &str,
    value: &str,
    origin: impl Fn() -> Source,
) -> Result<(), ConfigError> {
    let arg = cmd
        .get_arguments()
        .find(|a| a.get_id() == id)
        .expect("a setting of cmd");
    let bad = |reason: String| ConfigError::BadValue {
        flag: arg.get_long().unwrap_or(id).to_string(),
        origin: origin(),
        value: value.to_string(),
        reason,
    };
    // A switch (`--join`) takes no value on the command line; elsewhere it
    // is true or false.
    if matches!(arg.get_action(), ArgAction::SetTrue) {
        return match value {
            "true" | "false" => Ok(()),
            _ => Err(bad("expected true or false".into())),
        };
    }
    let long = arg.get_long().expect("every layered setting has a flag");
    let probe = Command::new("probe")
        .no_binary_name(true)
        .arg(arg.clone().env(None::<&str>).required(false));
    match probe.try_get_matches_from([format!("--{long}={value}")]) {
        Ok(_) => Ok(()),
        Err(e) => Err(bad(reason(&e))),
    }
}

/// Why clap refused a value, without its usage text.
fn reason(e: &clap::Error) -> String {
    if let Some(cause) = std::error::Error::source(e) {
        return cause.to_string();
    }
    if let Some(ContextValue::Strings(valid)) = e.get(ContextKind::ValidValue) {
        return format!("expected one of {}", valid.join(", "));
    }
    let text = e.to_string();
    let first = text.lines().next().unwrap_or_default();
    first.trim_start_matches("error: ").to_string()
}

/// The settings in the TOML file at `path`, each checked against `cmd`'s:
/// a known key, of its type, with a value its flag would take.
fn read_file(cmd: &Command, path: &Path) -> Result<Vec<(String, String)>, ConfigError> {
    let file_err = |reason: String| ConfigError::File {
        path: path.display().to_string(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| file_err(e.to_string()))?;
    let table: toml::Table = toml::from_str(&text).map_err(|e| file_err(e.to_string()))?;
    let mut out = Vec::new();
    for (key, value) in table {
        // The file's keys are the settings (those with a variable), not
        // `config` itself.
        let arg = cmd
            .get_arguments()
            .find(|a| a.get_id() == key.as_str() && a.get_env().is_some() && key != "config")
            .ok_or_else(|| ConfigError::UnknownKey {
                path: path.display().to_string(),
                key: key.clone(),
            })?;
        let origin = || Source::File {
            path: path.to_path_buf(),
            key: key.clone(),
        };
        let text = toml_text(arg, &value).map_err(|reason| ConfigError::BadValue {
            flag: arg.get_long().unwrap_or(&key).to_string(),
            origin: origin(),
            value: value.to_string(),
            reason,
        })?;
        check(cmd, &key, &text, origin)?;
        out.push((key, text));
    }
    Ok(out)
}

/// A TOML value as its flag's text, when it is of the setting's type:
/// a string for a string or path, a boolean for a switch, an integer or a
/// string for a duration (the `*_ms` settings: `40` or `"1m30s"`), else an
/// integer.
fn toml_text(arg: &clap::Arg, value: &toml::Value) -> Result<String, String> {
    let parser = arg.get_value_parser();
    let is = |p: ValueParser| parser.type_id() == p.type_id();
    let (want, text) = if arg.get_id().as_str().ends_with("_ms") {
        let text = match value {
            toml::Value::Integer(i) => Some(i.to_string()),
            toml::Value::String(s) => Some(s.clone()),
            _ => None,
        };
        ("a duration (\"1m30s\") or an integer of milliseconds", text)
    } else if is(ValueParser::string()) || is(ValueParser::path_buf()) {
        ("a string", value.as_str().map(str::to_string))
    } else if is(ValueParser::bool()) {
        ("true or false", value.as_bool().map(|b| b.to_string()))
    } else {
        ("an integer", value.as_integer().map(|i| i.to_string()))
    };
    text.ok_or_else(|| format!("expected {want}"))
}

#[cfg(test)]
mod tests;
