//! `trace -w`: redraws the tree in place whenever the traced object changes (a watch on it)
//! and every two seconds (for its children), until the object is deleted or the user presses
//! q, Esc or Ctrl-C. On a terminal the previous frame is overwritten; piped, each new frame is
//! written after the last.

use std::io::{IsTerminal, Read, Write};
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::core::ApiResource;
use kube::runtime::watcher;

use super::{Target, TraceArgs, load_one, printer};
use crate::commands::kube::Kube;
use crate::commands::trace::tree::Node;

/// Puts the terminal in non-canonical, no-echo mode while it lives, so single key presses
/// arrive at once; restores the previous mode when dropped. Done with `stty` on the inherited
/// terminal: the crate forbids unsafe code, and this is all raw input needs.
struct RawInput {
    saved: String,
}

impl RawInput {
    fn enable() -> Option<RawInput> {
        if !std::io::stdin().is_terminal() {
            return None;
        }
        let saved = std::process::Command::new("stty").arg("-g").stdin(std::process::Stdio::inherit()).output().ok()?;
        if !saved.status.success() {
            return None;
        }
        let saved = String::from_utf8_lossy(&saved.stdout).trim().to_string();
        let set = std::process::Command::new("stty").args(["-icanon", "-echo", "min", "1"]).stdin(std::process::Stdio::inherit()).status().ok()?;
        set.success().then_some(RawInput { saved })
    }
}

impl Drop for RawInput {
    fn drop(&mut self) {
        let _ = std::process::Command::new("stty").arg(&self.saved).stdin(std::process::Stdio::inherit()).status();
    }
}

/// Writes frames: on a terminal each replaces the previous one.
struct Screen {
    terminal: bool,
    last: String,
}

impl Screen {
    fn show(&mut self, frame: String) -> std::io::Result<()> {
        if frame == self.last {
            return Ok(());
        }
        let mut out = std::io::stdout().lock();
        if self.terminal && !self.last.is_empty() {
            let lines = self.last.matches('\n').count();
            write!(out, "\r\x1b[{lines}A\x1b[J")?;
        }
        out.write_all(frame.as_bytes())?;
        out.flush()?;
        self.last = frame;
        Ok(())
    }
}

pub(super) async fn run(kube: &Kube, target: &Target, args: &TraceArgs, first: Node) -> anyhow::Result<()> {
    let raw = RawInput::enable();
    let keyboard = raw.is_some();
    let (keys_tx, mut keys) = tokio::sync::mpsc::unbounded_channel::<u8>();
    if keyboard {
        std::thread::spawn(move || {
            let mut stdin = std::io::stdin();
            let mut byte = [0u8; 1];
            while let Ok(1) = stdin.read(&mut byte) {
                if keys_tx.send(byte[0]).is_err() {
                    break;
                }
            }
        });
    }
    let mut screen = Screen { terminal: std::io::stdout().is_terminal(), last: String::new() };
    screen.show(printer::print(args.output, &first))?;

    let r = &target.resource;
    let api_resource = ApiResource {
        group: r.group.clone(),
        version: r.version.clone(),
        api_version: r.api_version(),
        kind: r.kind.clone(),
        plural: r.plural.clone(),
    };
    let api: Api<DynamicObject> = if r.namespaced {
        Api::namespaced_with(kube.client.clone(), &target.namespace, &api_resource)
    } else {
        Api::all_with(kube.client.clone(), &api_resource)
    };
    let config = watcher::Config::default().fields(&format!("metadata.name={}", target.name));
    let mut events = watcher(api, config).boxed();
    let mut ticker = tokio::time::interval(Duration::from_secs(2));
    loop {
        tokio::select! {
            key = keys.recv(), if keyboard => match key {
                Some(b'q' | 0x1b | 0x03) | None => return Ok(()),
                _ => continue,
            },
            _ = tokio::signal::ctrl_c() => return Ok(()),
            event = events.next() => match event {
                Some(Ok(watcher::Event::Delete(_))) | None => return Ok(()),
                Some(_) => {}
            },
            _ = ticker.tick() => {}
        }
        match load_one(kube, target, args).await {
            Ok(tree) => screen.show(printer::print(args.output, &tree))?,
            Err(error) if format!("{error:#}").contains("not found") => return Ok(()),
            Err(error) => return Err(error.context("cannot get requested resource")),
        }
    }
}
