//! A plan saved to a file (`nettune plan --json > plan.json`, `nettune
//! experiment search --out plan.json`) and applied later with `apply --plan
//! FILE`.
//!
//! A saved plan records where it was made: the host's identity (machine id
//! and hostname) and the network namespace or tree. Each change records the
//! value it found (`from`). Applying it elsewhere, or after those values
//! changed, would write settings chosen for another state of the host, so
//! both are checked before anything is written, and a mismatch is refused
//! with the reason.

use std::path::Path;

use anyhow::Context as _;

use super::admit::{admit_all, admit_value, Limits, Scope};
use super::change::Plan;
use super::compare::same_value;
use super::profile::PlanOptions;
use super::target::Target;
use crate::base::fsio::{self, FileError};
use crate::base::text::excerpt;

pub use super::made_for::MadeFor;

/// A saved plan as its file holds it: its values are text until
/// [`admit`] types them.
pub type SavedPlan = Plan<String>;

/// The options a saved plan stands for (what the journal records).
pub fn options(plan: &Plan) -> PlanOptions {
    let mut opts = PlanOptions::new(plan.profile);
    opts.ifaces = plan.interfaces.clone();
    opts.cpus = Some(plan.cpus.clone());
    opts
}

/// Read a saved plan: `plan --json` output or `experiment search --out`.
pub fn load(path: &Path) -> anyhow::Result<SavedPlan> {
    let text =
        fsio::read_text_bounded(path, fsio::RECORD_LIMIT, "a saved plan").map_err(|e| match e {
            FileError::Io { source, .. } => {
                anyhow::anyhow!("--plan '{}': cannot read it: {source}", path.display())
            }
            refused => anyhow::anyhow!(
                "--plan {refused}; save one with `nettune plan --json` or \
                 `nettune experiment search --out FILE`"
            ),
        })?;
    let plan: SavedPlan = serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "--plan '{}' is not a nettune plan ({e}); save one with `nettune plan --json` or \
             `nettune experiment search --out FILE`",
            path.display()
        )
    })?;
    if plan.made_for.is_none() {
        anyhow::bail!(
            "--plan '{}' does not say which host it was made for (no \"made_for\"); make it \
             again with this nettune (`nettune plan --json`)",
            path.display()
        );
    }
    Ok(plan)
}

/// The longest free text a saved plan may carry in one field (a reason, a
/// value it found): what nettune writes is a line or two.
const MAX_TEXT_BYTES: usize = 4096;

/// Admit a saved plan before anything is read, journaled or written: every
/// change passes [`admit`](super::admit) in the scope `scope_of` gives its
/// target (its value parsed as its kind within `limits`, its target one a
/// profile could produce, and in a network namespace one the namespace
/// owns); every text it carries is one line of sane length; its host-wide
/// command is made again from its values, never taken from the file.
/// `name` names the plan in errors. The plan comes out with its values
/// typed.
pub fn admit(
    plan: SavedPlan,
    name: &str,
    scope_of: &dyn Fn(&Target) -> Scope,
    limits: &Limits,
) -> anyhow::Result<Plan> {
    let refused = |why: String| {
        anyhow::anyhow!(
            "plan {name} is refused: {why}; a plan file holds what `nettune plan --json` or \
             `nettune experiment search --out` wrote (docs/apply.md); nothing was changed"
        )
    };
    texts(&plan).map_err(refused)?;
    if let Some(cpu) = plan.cpus.iter().find(|&&c| c >= limits.cpus) {
        return Err(refused(format!(
            "its network CPUs name CPU {cpu}, beyond this host's CPUs (0-{})",
            limits.cpus.saturating_sub(1)
        )));
    }
    let changes = admit_all(plan.changes, scope_of, limits).map_err(refused)?;
    let mut host_wide = Vec::new();
    for h in plan.host_wide {
        let value = admit_value(&h.target, &h.to, limits)
            .and_then(|value| super::admit::admit(&h.target, &Scope::Host).map(|()| value))
            .map_err(|r| refused(format!("host-wide value {r}")))?;
        host_wide.push(h.with_value(value));
    }
    // Where a site profile's values came from is about the host the plan
    // was made on: not carried over from a file.
    let changes = changes
        .into_iter()
        .map(|mut c| {
            c.origin = None;
            c
        })
        .collect();
    Ok(Plan {
        profile: plan.profile,
        site: None,
        cpus: plan.cpus,
        interfaces: plan.interfaces,
        changes,
        skipped: plan.skipped,
        irqbalance: plan.irqbalance,
        made_for: plan.made_for,
        host_command: super::render::host_command(&host_wide),
        host_wide,
    })
}

/// Every free text of `plan`: one line (no control character), at most
/// [`MAX_TEXT_BYTES`].
fn texts(plan: &SavedPlan) -> Result<(), String> {
    let mut fields: Vec<(&str, &str)> = Vec::new();
    for c in &plan.changes {
        fields.extend([
            ("from", c.from.as_str()),
            ("reason", &c.reason),
            ("group", &c.group),
        ]);
    }
    for s in &plan.skipped {
        fields.extend([("reason", s.reason.as_str()), ("group", &s.group)]);
    }
    for h in &plan.host_wide {
        fields.push(("reason", &h.reason));
        fields.extend(h.from.as_deref().map(|f| ("from", f)));
    }
    fields.extend(plan.interfaces.iter().map(|i| ("interface", i.as_str())));
    fields.extend(
        plan.irqbalance
            .iter()
            .map(|w| ("irqbalance note", w.note.as_str())),
    );
    if let Some(m) = &plan.made_for {
        let place = [&m.machine_id, &m.hostname, &m.netns, &m.root];
        fields.extend(
            place
                .into_iter()
                .flatten()
                .map(|t| ("made_for", t.as_str())),
        );
    }
    for (field, text) in fields {
        if text.len() > MAX_TEXT_BYTES {
            return Err(format!(
                "a {field} of {} bytes is longer than any nettune writes ({MAX_TEXT_BYTES} at most)",
                text.len()
            ));
        }
        if text.chars().any(char::is_control) {
            return Err(format!(
                "the {field} {} holds a control character (a newline?): nettune writes none",
                excerpt(text)
            ));
        }
    }
    Ok(())
}

/// Check a saved plan against the place it is about to be applied to:
/// refused when made for another place, or when a value it would change no
/// longer holds what it held when the plan was made (a change whose target
/// already holds its new value is kept: applying it changes nothing).
/// `read` reads a target's current value. `name` names the plan in errors.
pub fn check(
    plan: &Plan,
    name: &str,
    here: &MadeFor,
    read: &dyn Fn(&Target) -> anyhow::Result<String>,
) -> anyhow::Result<()> {
    let made_for = plan
        .made_for
        .as_ref()
        .ok_or_else(|| anyhow::anyhow!("plan {name} does not say which host it was made for"))?;
    if let Some(why) = made_for.mismatch(here) {
        anyhow::bail!(
            "plan {name} is refused: {why}; make a plan here (`nettune plan`, `nettune \
             experiment search`); nothing was changed"
        );
    }
    let mut moved = Vec::new();
    for change in &plan.changes {
        let now = read(&change.target)
            .with_context(|| format!("plan {name}: reading {}", change.target))?;
        if same_value(&change.target, &now, &change.from)
            || same_value(&change.target, &now, change.to.as_str())
        {
            continue;
        }
        moved.push(format!(
            "{} is {}, the plan was made when it was {}",
            change.target,
            excerpt(now.trim()),
            excerpt(&change.from)
        ));
    }
    if !moved.is_empty() {
        anyhow::bail!(
            "plan {name} is refused: {} value(s) changed since it was made: {}; make the plan \
             again; nothing was changed",
            moved.len(),
            moved.join("; ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Change, Profile, Typed, Value};

    fn here() -> MadeFor {
        MadeFor {
            machine_id: Some("aaaa".to_string()),
            hostname: Some("web1".to_string()),
            netns: Some("blue".to_string()),
            root: None,
        }
    }

    fn plan() -> Plan {
        let target: Target = "/sys/class/net/veth0/queues/rx-0/rps_cpus"
            .parse()
            .expect("target");
        Plan {
            profile: Profile::Custom,
            cpus: vec![0, 1],
            interfaces: vec!["veth0".to_string()],
            changes: vec![Change {
                target,
                from: "0".to_string(),
                to: Value::cpu_mask(&[1]),
                reason: "test".to_string(),
                group: "veth0".to_string(),
                origin: None,
            }],
            skipped: Vec::new(),
            made_for: Some(here()),
            irqbalance: None,
            host_wide: Vec::new(),
            host_command: None,
            site: None,
        }
    }

    #[test]
    fn a_plan_for_another_host_or_namespace_is_refused() {
        let mut other = here();
        other.machine_id = Some("bbbb".to_string());
        let err =
            check(&plan(), "p.json", &other, &|_| Ok("0\n".to_string())).expect_err("other host");
        assert!(err.to_string().contains("machine id aaaa"), "{err}");
        let mut other = here();
        other.netns = None;
        let err =
            check(&plan(), "p.json", &other, &|_| Ok("0\n".to_string())).expect_err("other ns");
        assert!(err.to_string().contains("network namespace blue"), "{err}");
        assert!(check(
            &plan(),
            "p.json",
            &here(),
            &|_| Ok("00000000\n".to_string())
        )
        .is_ok());
    }

    #[test]
    fn a_plan_whose_from_values_moved_is_refused_unless_already_applied() {
        let err = check(&plan(), "p.json", &here(), &|_| Ok("1\n".to_string())).expect_err("moved");
        let text = err.to_string();
        assert!(
            text.contains("is '1'") && text.contains("when it was '0'"),
            "{text}"
        );
        assert!(check(&plan(), "p.json", &here(), &|_| Ok("2\n".to_string())).is_ok());
    }

    /// A value is kept as the file gave it: a plan written by hand (or by
    /// another version) prints and journals the same text it was read
    /// with, whatever form of its kind the text takes.
    #[test]
    fn values_read_back_as_written() {
        let mut saved = serde_json::to_value(plan()).expect("json");
        saved["changes"] = serde_json::json!([
            ["/proc/irq/74/smp_affinity_list", "1,0"],
            ["/sys/class/net/veth0/queues/rx-0/rps_cpus", "00000003"],
            ["qdisc:veth0:root", "fq maxrate 8000mbit"],
            ["ethtool:veth0:rx-flow-hash.udp4", "nfds"],
            ["/proc/sys/net/core/rmem_max", "0016777216"],
        ]
        .iter()
        .map(|[target, to]| {
            serde_json::json!({
                "target": target, "from": "", "to": to, "reason": "", "group": "veth0"
            })
        })
        .collect::<Vec<_>>());
        let text = serde_json::to_string_pretty(&saved).expect("text");
        let loaded: SavedPlan = serde_json::from_str(&text).expect("load");
        let admitted =
            admit(loaded, "p.json", &|_| Scope::Host, &Limits { cpus: 2 }).expect("admit");
        assert_eq!(
            serde_json::to_string_pretty(&admitted).expect("again"),
            text
        );
        let Typed::Driver(hash) = admitted.changes[3].to.typed() else {
            panic!("{:?}", admitted.changes[3]);
        };
        assert_eq!(hash.value_text(), "sdfn");
    }

    #[test]
    fn a_plan_round_trips_through_json() {
        let text = serde_json::to_string(&plan()).expect("json");
        assert!(text.contains("\"made_for\""), "{text}");
        let back: SavedPlan = serde_json::from_str(&text).expect("back");
        let back = admit(back, "p.json", &|_| Scope::Host, &Limits { cpus: 2 }).expect("admit");
        assert_eq!(back, plan());
    }
}
