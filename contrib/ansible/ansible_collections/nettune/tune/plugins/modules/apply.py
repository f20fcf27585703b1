#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: nettune contributors
# SPDX-License-Identifier: MIT OR Apache-2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: apply
short_description: Tune a host's network path to a nettune profile, optionally guarded
description:
  - Applies a nettune profile (C(nettune apply)) with a journal that
    C(nettune.tune.rollback) undoes exactly.
  - Reports C(changed) only when nettune changed a value; a host that
    already has the profile is C(ok), and no state is journaled for it.
  - In check mode runs C(nettune plan --check), which changes nothing, and
    reports C(changed) when changes are pending. With C(--diff) the plan's
    changes are shown as a diff (current value to profile value); in a
    normal run the diff is what was changed.
  - With C(guard), nettune measures the receive path before the change,
    watches it for C(guard) after, and rolls the change back by itself
    when it got worse (C(apply --guard)). A guard that fires fails the task
    with what fired and the numbers; with C(serial) and
    a C(max_fail_percentage) of 0 the rollout stops at that host.
  - Fails, naming the version found and what is needed, when the host's
    nettune lacks an option the task uses.
version_added: "0.1.0"
author: nettune contributors
options:
  profile:
    description:
      - A built-in profile (C(pps), C(latency), C(throughput), C(http),
        C(baseline)) or a site profile of the host (C(nettune profiles)).
      - An unknown profile fails with nettune's own message.
    type: str
  profile_file:
    description: A site profile file (TOML) on the host, instead of C(profile).
    type: path
  plan:
    description:
      - A plan saved on the host (C(nettune plan --json > FILE)) instead of a
        profile. Refused by nettune when it was made for another host or
        namespace, or when a value it changes moved since.
    type: path
  iface:
    description: Interfaces to tune. Default, nettune's (every physical interface that is up; in a namespace every interface but lo).
    type: list
    elements: str
  cpus:
    description: The CPUs network work may use (C(0-7,16-23)).
    type: str
  bandwidth:
    description: throughput profile, the path's bandwidth (C(10gbit)).
    type: str
  rtt:
    description: throughput profile, the path's round-trip time (C(100ms)).
    type: str
  pace:
    description: throughput profile, fq's per-flow pacing cap (C(2gbit)).
    type: str
  streams:
    description: throughput profile, parallel streams sharing the path.
    type: int
  netns:
    description: Apply inside this named network namespace (C(ip netns) names it).
    type: str
  state_dir:
    description:
      - Where nettune keeps its journals (C(--state-dir)). Give the same to
        C(nettune.tune.rollback). Default, nettune's (C(/var/lib/nettune)).
    type: path
  guard:
    description:
      - Watch the receive path for this long after the change (C(30s),
        C(5m)) and roll it back when it got worse (C(apply --guard)).
      - Empty or unset, the change is not guarded.
    type: str
  guard_baseline:
    description: How long to measure before the change. Default, C(guard).
    type: str
  guard_metric:
    description: Watch only these conditions. Default, all that the place can attribute.
    type: list
    elements: str
    choices: [drops, softnet, udp-rcvbuf, findings]
  interval:
    description: Seconds between the guard's samples (C(1), C(0.5)).
    type: str
  allow_irqbalance:
    description: Set IRQ affinity even though irqbalance runs.
    type: bool
    default: false
  persist:
    description: Also make the settings survive a reboot (not with C(netns)).
    type: bool
    default: false
  binary:
    description: The nettune binary on the host. Default, C(nettune) on PATH.
    type: path
notes:
  - Needs root on the host (C(become)) to change it.
  - Check mode and diff mode are supported.
"""

EXAMPLES = r"""
- name: Tune with the pps profile, one host at a time, guarded for 5 minutes
  nettune.tune.apply:
    profile: pps
    guard: 5m

- name: A namespace, with its own state directory
  nettune.tune.apply:
    profile: latency
    netns: blue
    state_dir: /var/lib/nettune-blue
    guard: 1m
    guard_baseline: 30s
"""

RETURN = r"""
state_id:
  description: The journal's id (undo with C(nettune rollback ID)); null when nothing was changed.
  returned: success, and a guard that fired
  type: int
changes:
  description: Values changed (0 when the host already had the profile).
  returned: success
  type: int
refused:
  description: Planned changes the kernel refused (left as they were).
  returned: success
  type: int
state:
  description: The journal (C(nettune apply --json)'s C(state)).
  returned: when a state was journaled
  type: dict
guard:
  description: The guard's report (C(nettune apply --guard --json)'s C(guard)).
  returned: with C(guard), when there was something to change
  type: dict
host_wide:
  description: In a namespace, the host-wide values the profile wants, not applied (C(target), C(from), C(to), C(reason)).
  returned: success
  type: list
  elements: dict
host_command:
  description: The command that sets C(host_wide) on the host.
  returned: success, in a namespace
  type: str
plan:
  description: In check mode, the plan (C(nettune plan --check --json)).
  returned: check mode
  type: dict
nettune_version:
  description: The host's nettune version.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.nettune.tune.plugins.module_utils.nettune import (
    COMMON_ARGS,
    Nettune,
    diff_of,
    nettune_message,
    place_args,
)


def selection_args(params):
    """What to apply and where: the options plan and apply share."""
    args = []
    for name, flag in (("profile", "--profile"), ("profile_file", "--profile-file"), ("plan", "--plan")):
        if params[name]:
            args += [flag, params[name]]
    for iface in params["iface"] or []:
        args += ["--iface", iface]
    for name in ("cpus", "bandwidth", "rtt", "pace"):
        if params[name]:
            args += ["--" + name, params[name]]
    if params["streams"] is not None:
        args += ["--streams", str(params["streams"])]
    if params["netns"]:
        args += ["--netns", params["netns"]]
    return args


def guard_args(params):
    if not params["guard"]:
        return []
    args = ["--guard", params["guard"]]
    if params["guard_baseline"]:
        args += ["--guard-baseline", params["guard_baseline"]]
    for metric in params["guard_metric"] or []:
        args += ["--guard-metric", metric]
    if params["interval"]:
        args += ["--interval", params["interval"]]
    return args


def flags_of(args):
    return sorted(set(a for a in args if a.startswith("--")))


def guard_message(guard, state_id):
    """What fired, with the numbers, as nettune's text report says it."""
    parts = []
    for fired in guard.get("fired") or []:
        what = fired.get("what", fired.get("metric", "?"))
        if fired.get("now_per_sec") is not None:
            parts.append(
                "%s %s/s (baseline %s/s, limit %s/s)"
                % (
                    what,
                    number(fired.get("now_per_sec")),
                    number(fired.get("baseline_per_sec")),
                    number(fired.get("limit_per_sec")),
                )
            )
        else:
            parts.append(
                "%s at %s (not in the baseline)%s"
                % (
                    what if what.startswith("finding ") else "finding %s" % what,
                    fired.get("severity", "warn"),
                    ": %s" % fired["evidence"] if fired.get("evidence") else "",
                )
            )
    after = guard.get("fired_after_secs")
    result = guard.get("result")
    if result == "rolled_back":
        outcome = "rolled back state %s: every setting restored" % state_id
    elif result == "rollback_failed":
        outcome = "rolling back state %s failed: %s" % (state_id, guard.get("rollback_error"))
    else:
        outcome = "result %s" % result
    return "guard fired%s, watching %s: %s; %s" % (
        " %.1f s after the change" % after if after is not None else "",
        ", ".join(guard.get("metrics") or []),
        "; ".join(parts) or "no condition named",
        outcome,
    )


def number(value):
    """A rate as nettune's report writes it: whole above 10 (`9,870`),
    one decimal below (`2.5`)."""
    if value is None:
        return "?"
    value = float(value)
    if value >= 10 or value == int(value):
        return "{:,}".format(int(round(value)))
    return "{:.1f}".format(value)


def main():
    argument_spec = dict(
        profile=dict(type="str"),
        profile_file=dict(type="path"),
        plan=dict(type="path"),
        iface=dict(type="list", elements="str"),
        cpus=dict(type="str"),
        bandwidth=dict(type="str"),
        rtt=dict(type="str"),
        pace=dict(type="str"),
        streams=dict(type="int"),
        netns=dict(type="str"),
        state_dir=dict(type="path"),
        guard=dict(type="str"),
        guard_baseline=dict(type="str"),
        guard_metric=dict(type="list", elements="str", choices=["drops", "softnet", "udp-rcvbuf", "findings"]),
        interval=dict(type="str"),
        allow_irqbalance=dict(type="bool", default=False),
        persist=dict(type="bool", default=False),
    )
    argument_spec.update(COMMON_ARGS)
    module = AnsibleModule(
        argument_spec=argument_spec,
        mutually_exclusive=[("profile", "profile_file", "plan")],
        required_one_of=[("profile", "profile_file", "plan")],
        supports_check_mode=True,
    )
    params = module.params
    for name in ("guard_baseline", "guard_metric", "interval"):
        if params[name] and not params["guard"]:
            module.fail_json(msg="%s is for a guarded apply: give guard too" % name)

    nettune = Nettune(module)
    selection = selection_args(params)
    apply_args = ["apply"] + selection + place_args(dict(state_dir=params["state_dir"])) + guard_args(params)
    if params["allow_irqbalance"]:
        apply_args.append("--allow-irqbalance")
    if params["persist"]:
        apply_args.append("--persist")
    apply_args.append("--json")
    # Checked in check mode too: a dry run that passes on a nettune the
    # real run would fail on is no check.
    nettune.require("apply", flags_of(apply_args[1:]))
    result = dict(changed=False, nettune_version=nettune.version)

    if module.check_mode:
        plan_args = ["plan"] + selection + ["--check", "--json"]
        nettune.require("plan", flags_of(plan_args[1:]))
        rc, plan, _ = nettune.run_json(plan_args, ok=(0, 1))
        pending = plan.get("changes") or []
        result.update(
            changed=rc == 1,
            plan=plan,
            host_wide=plan.get("host_wide") or [],
            msg="%d change(s) pending" % len(pending) if rc == 1 else "the host already has the profile",
        )
        if module._diff and rc == 1:
            result["diff"] = diff_of(pending, "from", "to", "now", "profile")
        module.exit_json(**result)

    rc, out, err = nettune.run(apply_args, ok=(0, 1, 2))
    if rc == 2 and not out.strip():
        nettune.fail(rc, out, err, apply_args)
    report = nettune.parse(out, err, rc, apply_args)
    state = report.get("state")
    guard = report.get("guard")
    result.update(
        state_id=report.get("state_id"),
        changes=report.get("changed", 0),
        refused=report.get("refused", 0),
        host_wide=report.get("host_wide") or [],
        host_command=report.get("host_command"),
    )
    if state is not None:
        result["state"] = state
    if guard is not None:
        result["guard"] = guard
    if rc == 1:
        # The guard fired and rolled the change back.
        module.fail_json(msg=guard_message(guard or {}, report.get("state_id")), rc=rc, **result)
    if rc == 2:
        # The guard was stopped, or its rollback failed: nettune says what
        # to do; the state is kept for a rollback.
        message = nettune_message(err) or "exit status 2"
        if guard and guard.get("fired"):
            message = "%s (%s)" % (message, guard_message(guard, report.get("state_id")))
        module.fail_json(msg=message, rc=rc, stderr=err, **result)
    if result["host_wide"] and result["host_command"]:
        names = [str(h.get("target", h)) if isinstance(h, dict) else str(h) for h in result["host_wide"]]
        module.warn(
            "not applied, host-wide (%s): set on the host with %s" % (", ".join(names), result["host_command"])
        )
    changed = bool(report.get("applied")) and report.get("changed", 0) > 0
    result["changed"] = changed
    if report.get("reason"):
        result["msg"] = report["reason"]
    elif changed:
        result["msg"] = "changed %d value(s); state %s" % (report.get("changed", 0), report.get("state_id"))
        if guard and guard.get("result") == "passed":
            result["msg"] += "; guard passed: nothing got worse in %s s" % number(guard.get("watched_secs") or 0)
    if module._diff and changed and state:
        done = [c for c in state.get("changes") or [] if c.get("outcome") == "changed"]
        result["diff"] = diff_of(done, "original", "to", "original", "applied")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
