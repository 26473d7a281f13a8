//! `oxplane logs [provider/|function/]NAME [-f]`: what the process of a pulled Provider or
//! Function package wrote, as `kubectl logs` shows a package's pod in Crossplane. `oxplane up`
//! keeps each revision's output in `DATA_DIR/runtimes/{providers,functions}/logs/<revision>.log`;
//! the package's `status.currentRevision`, read from the API server, says which is active.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use serde_json::Value;

use super::kube::{Kube, KubeArgs};

/// Flags of `oxplane logs`.
#[derive(Debug, Args)]
pub struct LogsArgs {
    /// The package: `provider/NAME`, `function/NAME`, or a NAME of either kind.
    #[arg(value_name = "[provider/|function/]NAME")]
    pub package: String,
    /// Keep printing what the process writes, until interrupted.
    #[arg(short, long)]
    pub follow: bool,
    /// The data directory of the `oxplane up` running the package
    /// [default: $OXPLANE_HOME, else ~/.oxplane].
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Which kubeconfig and context [default: the data directory's kubeconfig].
    #[command(flatten)]
    pub kube: KubeArgs,
}

/// The package kinds with processes: (what users type, plural: also their runtime folder).
const KINDS: [(&str, &str); 2] = [("provider", "providers"), ("function", "functions")];

/// Which kinds `NAME`, `provider/NAME`, `providers/NAME`, `provider.pkg.crossplane.io/NAME`
/// may be, and the name.
fn parse(package: &str) -> anyhow::Result<(Vec<(&'static str, &'static str)>, String)> {
    let Some((kind, name)) = package.split_once('/') else {
        anyhow::ensure!(!package.is_empty(), "name a package: provider/NAME, function/NAME or NAME");
        return Ok((KINDS.to_vec(), package.to_string()));
    };
    let kind = kind.strip_suffix(".pkg.crossplane.io").unwrap_or(kind).to_ascii_lowercase();
    let found: Vec<_> = KINDS.iter().copied().filter(|(singular, plural)| kind == *singular || kind == *plural).collect();
    anyhow::ensure!(!found.is_empty(), "{package:?}: only providers and functions run processes (provider/NAME or function/NAME)");
    anyhow::ensure!(!name.is_empty() && !name.contains('/'), "{package:?} names no package");
    Ok((found, name.to_string()))
}

/// Runs `oxplane logs`; `data_dir` resolves the data directory flag.
pub fn run(args: LogsArgs, data_dir: impl Fn(Option<PathBuf>) -> anyhow::Result<PathBuf>) -> anyhow::Result<()> {
    let dir = data_dir(args.data_dir)?;
    let (kinds, name) = parse(&args.package)?;
    let mut kube_args = args.kube.clone();
    if kube_args.kubeconfig.is_none() {
        kube_args.kubeconfig = Some(dir.join("kubeconfig"));
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let (kind, folder, revision) = runtime.block_on(async {
        let kube = Kube::connect(&kube_args).await?;
        let mut found = None;
        for (kind, plural) in &kinds {
            match kube.get(&format!("/apis/pkg.crossplane.io/v1/{plural}/{name}")).await {
                Ok(package) => {
                    found = Some((*kind, *plural, package));
                    break;
                }
                Err(error) if error.is_not_found() => {}
                Err(error) => anyhow::bail!("cannot get {kind} {name:?}: {error}"),
            }
        }
        let Some((kind, folder, package)) = found else {
            let what: Vec<&str> = kinds.iter().map(|(k, _)| *k).collect();
            anyhow::bail!("no {} named {name:?}", what.join(" or "));
        };
        let revision = package.pointer("/status/currentRevision").and_then(Value::as_str).filter(|r| !r.is_empty()).map(str::to_string);
        let revision = revision.with_context(|| format!("{kind} {name:?} has no revision yet: nothing of it has run"))?;
        anyhow::Ok((kind, folder, revision))
    })?;
    let log = dir.join("runtimes").join(folder).join("logs").join(format!("{revision}.log"));
    if !log.exists() {
        anyhow::bail!(
            "{kind} {name:?} has no process logs: its revision {revision} runs no process of its own (a built-in {kind} runs inside oxplane, whose own log has its lines)"
        );
    }
    copy_log(&log, args.follow)
}

/// Prints the log, then with `follow` what is appended to it (from the start again if it is
/// cut short), until interrupted.
fn copy_log(path: &Path, follow: bool) -> anyhow::Result<()> {
    let mut file = std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut out = std::io::stdout().lock();
    let mut position = std::io::copy(&mut file, &mut out)?;
    out.flush()?;
    while follow {
        std::thread::sleep(Duration::from_millis(200));
        let length = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        if length < position {
            position = 0;
        }
        if length == position {
            continue;
        }
        file.seek(SeekFrom::Start(position))?;
        let mut chunk = Vec::new();
        position += (&mut file).take(length - position).read_to_end(&mut chunk)? as u64;
        out.write_all(&chunk)?;
        out.flush()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn packages_are_named_as_kubectl_names_them() {
        let (kinds, name) = parse("provider/provider-things").unwrap();
        assert_eq!((kinds.len(), kinds[0].0, name.as_str()), (1, "provider", "provider-things"));
        assert_eq!(parse("functions/f").unwrap().0[0].0, "function");
        assert_eq!(parse("provider.pkg.crossplane.io/p").unwrap().0[0].0, "provider");
        assert_eq!(parse("p").unwrap().0.len(), 2, "a bare name may be either");
        assert!(parse("configuration/c").unwrap_err().to_string().contains("only providers and functions"));
        assert!(parse("provider/").is_err());
    }
}
