//! `nettune man DIR` and `nettune completions SHELL`: the man pages and
//! the shell completions, generated at run time from the clap definitions
//! the parser itself uses (as `rg --generate` does), so what a package
//! ships never drifts from the command line.
//!
//! Each page is clap_mangen's (name, synopsis, description, options,
//! subcommands) plus the sections a system tool's page has: EXIT STATUS,
//! ENVIRONMENT and FILES, chosen from what the command takes (a
//! `--state-dir` means journals, `--persist` the files it writes), and SEE
//! ALSO. The caller hands the `clap::Command` in.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap_mangen::roff::{bold, italic, roman, Roff};
use clap_mangen::Man;

use crate::apply::journal::DEFAULT_STATE_DIR;
use crate::apply::persist;

#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Directory to write the pages into (made if missing), e.g.
    /// ~/.local/share/man/man8; files already there of the same name are
    /// replaced.
    pub dir: PathBuf,
}

#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    pub shell: clap_complete::Shell,
}

/// The section: tools for the system administrator.
const SECTION: &str = "8";

/// Print the completion script for `shell` to `out`.
pub fn completions(
    mut cmd: clap::Command,
    shell: clap_complete::Shell,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let name = cmd.get_name().to_string();
    clap_complete::generate(shell, &mut cmd, name, out);
    Ok(())
}

/// Write `nettune.8` and one page per subcommand (`nettune-apply.8`,
/// `nettune-bench-rr.8`) into `dir`; returns the files written.
pub fn write_pages(cmd: clap::Command, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let mut written = Vec::new();
    for (page, text) in pages(&cmd)? {
        let path = dir.join(page);
        fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// Every page: its file name and its roff text, the top command first.
pub fn pages(cmd: &clap::Command) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let mut out = Vec::new();
    collect(cmd, None, &mut out)?;
    Ok(out)
}

fn collect(
    cmd: &clap::Command,
    parent: Option<&str>,
    out: &mut Vec<(String, Vec<u8>)>,
) -> anyhow::Result<()> {
    let name = page_name(cmd);
    let children: Vec<&clap::Command> = cmd
        .get_subcommands()
        .filter(|c| !c.is_hide_set() && c.get_name() != "help")
        .collect();
    out.push((format!("{name}.{SECTION}"), render(cmd, parent, &children)?));
    for child in children {
        collect(child, Some(&name), out)?;
    }
    Ok(())
}

/// `nettune`, `nettune-apply`, `nettune-bench-rr` (clap's display name of
/// a built command).
fn page_name(cmd: &clap::Command) -> String {
    cmd.get_display_name()
        .unwrap_or_else(|| cmd.get_name())
        .to_string()
}

fn render(
    cmd: &clap::Command,
    parent: Option<&str>,
    children: &[&clap::Command],
) -> anyhow::Result<Vec<u8>> {
    let man = Man::new(cmd.clone())
        .section(SECTION)
        .date(env!("NETTUNE_COMMIT_DATE"))
        .source(format!("nettune {}", env!("CARGO_PKG_VERSION")))
        .manual("System Manager's Manual");
    let mut buf = Vec::new();
    man.render_title(&mut buf)?;
    man.render_name_section(&mut buf)?;
    man.render_synopsis_section(&mut buf)?;
    let mut roff = Roff::new();
    description(&mut roff, cmd);
    roff.to_writer(&mut buf)?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(&mut buf)?;
    }
    if !children.is_empty() {
        man.render_subcommands_section(&mut buf)?;
    }
    let name = page_name(cmd);
    let mut roff = Roff::new();
    exit_status(&mut roff, &name, !children.is_empty());
    environment(&mut roff, cmd, parent.is_none());
    files(&mut roff, cmd, &name, parent.is_none());
    see_also(&mut roff, &name, parent, children);
    roff.to_writer(&mut buf)?;
    if parent.is_none() {
        man.render_version_section(&mut buf)?;
    }
    Ok(once_preamble(&buf))
}

/// The page with the preamble each piece rendered (the `Aq` string) kept
/// only at its top.
fn once_preamble(page: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(page);
    let mut lines = text.lines();
    let preamble: Vec<&str> = lines
        .by_ref()
        .take_while(|l| !l.starts_with(".TH "))
        .collect();
    let mut out = preamble.join("\n");
    out.push('\n');
    let rest: Vec<&str> = text
        .lines()
        .skip(preamble.len())
        .filter(|l| !preamble.contains(l))
        .collect();
    out.push_str(&rest.join("\n"));
    out.push('\n');
    out.into_bytes()
}

/// The command's long help as paragraphs; its indented lines (examples)
/// as they are, not filled; `code` in bold.
fn description(roff: &mut Roff, cmd: &clap::Command) {
    roff.control("SH", ["DESCRIPTION"]);
    let Some(text) = cmd.get_long_about().or_else(|| cmd.get_about()) else {
        return;
    };
    let mut verbatim = false;
    for line in text.to_string().lines() {
        let indented = line.starts_with(' ');
        if verbatim && !indented {
            roff.control("fi", []);
            roff.control("RE", []);
            verbatim = false;
        }
        if line.trim().is_empty() {
            roff.control("PP", []);
            continue;
        }
        if indented && !verbatim {
            roff.control("RS", []);
            roff.control("nf", []);
            verbatim = true;
        }
        let line = if verbatim {
            line.strip_prefix("  ").unwrap_or(line)
        } else {
            line
        };
        roff.text(code_in_bold(line));
    }
    if verbatim {
        roff.control("fi", []);
        roff.control("RE", []);
    }
}

/// A help line with its `code` spans in bold (the backquotes dropped).
fn code_in_bold(line: &str) -> Vec<clap_mangen::roff::Inline> {
    if line.matches('`').count() % 2 == 1 {
        return vec![roman(line)];
    }
    line.split('`')
        .enumerate()
        .filter(|(_, part)| !part.is_empty())
        .map(|(i, part)| if i % 2 == 1 { bold(part) } else { roman(part) })
        .collect()
}

/// A tagged paragraph: `tag` in bold, then `text`.
fn item(roff: &mut Roff, tag: &str, text: &str) {
    roff.control("TP", []);
    roff.text([bold(tag)]);
    roff.text([roman(text)]);
}

const GENERIC_EXIT: [(&str, &str); 3] = [
    ("0", "Success, nothing to report."),
    (
        "1",
        "The command ran and found something: a finding, a failed check.",
    ),
    (
        "2",
        "nettune could not do its job: bad input, missing permission, an unsupported kernel. \
         The error is one line on standard error naming the file, interface or value.",
    ),
];

/// What exit status 1 means for the commands where it has a meaning of
/// their own (the rest: nothing to report is 0).
fn exit_one(page: &str) -> Option<&'static str> {
    Some(match page {
        "nettune-plan" => {
            "With --check: changes are pending (the host does not match the profile yet). \
             Inside a network namespace only what the namespace can change counts."
        }
        "nettune-doctor" => {
            "At least one finding at warn or crit (findings ignored with --ignore do not count)."
        }
        "nettune-monitor" => {
            "A bounded run (--once, --count, a replay) in which an interval showed a finding at \
             warn or above. A run ended by Ctrl-C or SIGTERM exits 0."
        }
        "nettune-bench-udp-sink" => {
            "It measured nothing: no packet arrived (the report is still printed)."
        }
        "nettune-bench-udp-flood" => {
            "Nothing could be sent, or the destination refused packets (the report is still \
             printed)."
        }
        "nettune-bench-rr" => {
            "No transaction completed, or TCP connections were closed during the run (the report \
             is still printed)."
        }
        "nettune-bench-rr-server" | "nettune-bench-http-server" | "nettune-bench-http" => {
            "It measured nothing (the report is still printed, the reason is on standard error)."
        }
        "nettune-bench-stream" | "nettune-bench-stream-server" => {
            "Nothing moved, the server sent no results, or the receiver's count differs from what \
             was sent (the report is still printed)."
        }
        "nettune-experiment-run" => {
            "Stopped early by Ctrl-C or SIGTERM: the report holds the runs made."
        }
        "nettune-experiment-search" => {
            "No candidate was better than the host as found: no plan is written."
        }
        _ => return None,
    })
}

fn exit_status(roff: &mut Roff, page: &str, has_children: bool) {
    roff.control("SH", ["EXIT STATUS"]);
    if page == "nettune" {
        for (code, text) in GENERIC_EXIT {
            item(roff, code, text);
        }
        return;
    }
    if has_children {
        roff.text([roman("That of the subcommand run; see its page.")]);
        return;
    }
    let (_, two) = GENERIC_EXIT[2];
    match exit_one(page) {
        Some(one) => {
            item(roff, "0", "Success.");
            item(roff, "1", one);
        }
        // Commands with nothing to find: done, or not done.
        None => item(roff, "0", "Success."),
    }
    item(roff, "2", two);
}

/// Whether the command (or, for the top page, any command) takes `id`.
fn takes(cmd: &clap::Command, id: &str, recursive: bool) -> bool {
    cmd.get_arguments().any(|a| a.get_id() == id)
        || (recursive && cmd.get_subcommands().any(|c| takes(c, id, true)))
}

fn environment(roff: &mut Roff, cmd: &clap::Command, top: bool) {
    let state = takes(cmd, "state_dir", top);
    let view = cmd.get_name() == "monitor" || top;
    let profiles = takes(cmd, "profile", top) || cmd.get_name() == "profiles";
    if !state && !view && !profiles {
        return;
    }
    roff.control("SH", ["ENVIRONMENT"]);
    if profiles {
        item(
            roff,
            crate::plan::site::PATH_ENV,
            &format!(
                "The directories site profiles are looked up in, separated by ':', the first \
                 holding a name winning (default {}).",
                crate::plan::site::DEFAULT_DIRS.join(":")
            ),
        );
    }
    if state {
        item(
            roff,
            crate::cli::apply::STATE_DIR_ENV,
            &format!(
                "The state directory when --state-dir is not given (default {DEFAULT_STATE_DIR})."
            ),
        );
    }
    if view {
        item(
            roff,
            "NO_COLOR",
            "Set to a non-empty value: monitor's terminal view uses no colour.",
        );
    }
}

fn files(roff: &mut Roff, cmd: &clap::Command, page: &str, top: bool) {
    let mut entries: Vec<(String, String)> = Vec::new();
    if takes(cmd, "profile", top) || cmd.get_name() == "profiles" {
        let [site, vendor] = crate::plan::site::DEFAULT_DIRS;
        entries.push((
            format!("{site}/NAME.toml"),
            "Site profiles: a built-in profile included and single values overridden or left \
             alone (docs/profiles.md). One here hides a profile of the same name below."
                .to_string(),
        ));
        entries.push((
            format!("{vendor}/NAME.toml"),
            "Profiles shipped with a package, in the same format.".to_string(),
        ));
    }
    if takes(cmd, "state_dir", top) {
        entries.push((
            format!("{DEFAULT_STATE_DIR}/"),
            "The journal of every applied state (state-NNNN.json, synced to disk before the first \
             change) and its lock: what rollback restores from. Removing or purging the package \
             leaves it."
                .to_string(),
        ));
    }
    if takes(cmd, "persist", top) {
        entries.push((
            persist::SYSCTL_FILE.to_string(),
            "The sysctls of states applied with --persist.".to_string(),
        ));
        entries.push((
            persist::SCRIPT.to_string(),
            "Their per-device settings as shell commands; with an interface name as its argument \
             it sets only that interface's."
                .to_string(),
        ));
        entries.push((
            persist::UNIT.to_string(),
            "Runs that script at boot.".to_string(),
        ));
        entries.push((
            persist::HOTPLUG_UNIT.to_string(),
            "Runs it for one interface when the interface appears (hot-plug, driver reload)."
                .to_string(),
        ));
        entries.push((
            persist::UDEV_RULE.to_string(),
            "Starts that unit for every network interface that appears.".to_string(),
        ));
    }
    let monitor = page == "nettune-monitor" || top;
    let serve = page == "nettune-serve" || top;
    if monitor {
        entries.push((
            "/usr/lib/systemd/system/nettune-monitor.service".to_string(),
            "The Prometheus exporter as a service; its arguments in /etc/nettune/monitor.env."
                .to_string(),
        ));
    }
    if serve {
        entries.push((
            "/usr/lib/systemd/system/nettune-serve.service".to_string(),
            "serve as a service; its arguments in /etc/nettune/serve.env.".to_string(),
        ));
        entries.push((
            "/etc/nettune/serve.token".to_string(),
            "The token the service loads (make it with mode 0600; see nettune-serve(8))."
                .to_string(),
        ));
    }
    if entries.is_empty() {
        return;
    }
    roff.control("SH", ["FILES"]);
    for (path, text) in entries {
        item(roff, &path, &text);
    }
}

/// The document that explains a command at length, under
/// /usr/share/doc/nettune/docs.
fn doc_of(page: &str) -> Option<&'static str> {
    let rest = page.strip_prefix("nettune-")?;
    Some(match rest {
        "inspect" | "capture" => "inspect.md",
        "doctor" => "doctor.md",
        "monitor" => "monitor.md",
        "plan" | "profiles" => "profiles.md",
        "apply" | "rollback" | "history" => "apply.md",
        "steer" => "bypass.md",
        "serve" => "serve.md",
        "man" | "completions" => "install.md",
        r if r.starts_with("experiment") || r.starts_with("testbed") => "experiment.md",
        r if r.starts_with("bench-udp") => "bench-udp.md",
        r if r.starts_with("bench-rr") => "bench-rr.md",
        r if r.starts_with("bench-http") => "bench-http.md",
        r if r.starts_with("bench-stream") => "bench-stream.md",
        _ => return None,
    })
}

fn see_also(roff: &mut Roff, page: &str, parent: Option<&str>, children: &[&clap::Command]) {
    roff.control("SH", ["SEE ALSO"]);
    let mut refs: Vec<String> = Vec::new();
    if let Some(parent) = parent {
        refs.push(parent.to_string());
    }
    for child in children {
        refs.push(page_name(child));
    }
    let mut line = Vec::new();
    for (i, r) in refs.iter().enumerate() {
        let sep = if i + 1 < refs.len() { "), " } else { ")" };
        line.push(bold(r.as_str()));
        line.push(roman(format!("({SECTION}{sep}")));
    }
    if !line.is_empty() {
        roff.text(line);
    }
    let doc = match doc_of(page) {
        Some(doc) => format!("/usr/share/doc/nettune/docs/{doc}"),
        None => "/usr/share/doc/nettune/README.md".to_string(),
    };
    roff.control("PP", []);
    roff.text([
        roman("The documentation at length: "),
        italic(doc),
        roman(" (from the package; docs/ in the source)."),
    ]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roff_of(line: &str) -> String {
        let mut roff = Roff::new();
        roff.text(code_in_bold(line));
        // The last line: what follows roff's own preamble.
        let text = roff.render();
        format!("{}\n", text.lines().last().unwrap_or_default())
    }

    #[test]
    fn code_spans_are_bold_and_a_lone_backquote_is_kept() {
        assert_eq!(
            roff_of("Undo with `nettune rollback`."),
            "Undo with \\fBnettune rollback\\fR.\n"
        );
        assert_eq!(roff_of("a ` alone"), "a ` alone\n");
    }

    #[test]
    fn the_preamble_is_kept_once_at_the_top() {
        let page = ".ie a\n.el b\n.TH x 8\n.SH NAME\n.ie a\n.el b\n.SH FILES\n";
        assert_eq!(
            String::from_utf8_lossy(&once_preamble(page.as_bytes())),
            ".ie a\n.el b\n.TH x 8\n.SH NAME\n.SH FILES\n"
        );
    }
}
