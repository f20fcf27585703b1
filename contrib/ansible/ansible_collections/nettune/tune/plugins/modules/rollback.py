#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: nettune contributors
# SPDX-License-Identifier: MIT OR Apache-2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: rollback
short_description: Undo what nettune applied, exactly
description:
  - Restores the values a nettune state changed (C(nettune rollback)),
    byte for byte, in the place it was applied (the host, or a named
    network namespace).
  - Picks the newest state still applied in that place (C(netns), or the
    host's own without it); C(all) undoes every one, newest first;
    C(state_id) names one.
  - Reports C(changed) only when a state was rolled back; nothing left to
    undo is C(ok).
  - In check mode lists what would be rolled back (with C(--diff), each
    value from what nettune set back to the original) and changes nothing.
version_added: "0.1.0"
author: nettune contributors
options:
  state_id:
    description: The state to restore (C(nettune history) lists them).
    type: int
  all:
    description: Undo every state still applied in the place, newest first.
    type: bool
    default: false
  netns:
    description: The named network namespace whose states to undo. Without it, the host's.
    type: str
  state_dir:
    description: Where nettune keeps its journals; the same as given to C(nettune.tune.apply).
    type: path
  binary:
    description: The nettune binary on the host. Default, C(nettune) on PATH.
    type: path
notes:
  - Needs root on the host (C(become)).
  - Check mode and diff mode are supported.
"""

EXAMPLES = r"""
- name: Undo the profile applied on each host
  nettune.tune.rollback:

- name: Undo everything applied in a namespace
  nettune.tune.rollback:
    netns: blue
    state_dir: /var/lib/nettune-blue
    all: true
"""

RETURN = r"""
rolled_back:
  description: The ids of the states rolled back (or that would be, in check mode).
  returned: always
  type: list
  elements: int
restored:
  description: Values restored (values already back at their original are not counted).
  returned: success
  type: int
states:
  description: The journals as left by the rollback (C(nettune rollback --json)'s C(state)).
  returned: when something was rolled back
  type: list
  elements: dict
nettune_version:
  description: The host's nettune version.
  returned: always
  type: str
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.nettune.tune.plugins.module_utils.nettune import (
    COMMON_ARGS,
    Nettune,
    diff_of,
)

DEFAULT_STATE_DIR = "/var/lib/nettune"


def in_place(row, netns):
    """A state of the place asked for: the namespace named, or the host."""
    if row.get("root"):
        return False
    if netns:
        return row.get("netns") == netns
    return row.get("netns") is None and row.get("netns_inode") is None


def journal(state_dir, state_id):
    """A journal as nettune wrote it (docs/apply.md), for check mode's diff."""
    path = os.path.join(state_dir, "state-%04d.json" % state_id)
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, IOError, ValueError):
        return None


def main():
    argument_spec = dict(
        state_id=dict(type="int"),
        all=dict(type="bool", default=False),
        netns=dict(type="str"),
        state_dir=dict(type="path"),
    )
    argument_spec.update(COMMON_ARGS)
    module = AnsibleModule(
        argument_spec=argument_spec,
        mutually_exclusive=[("state_id", "all")],
        supports_check_mode=True,
    )
    params = module.params
    nettune = Nettune(module)
    dir_args = ["--state-dir", params["state_dir"]] if params["state_dir"] else []
    nettune.require("rollback", ["--json"] + (["--state-dir"] if dir_args else []))
    nettune.require("history", ["--json"] + (["--state-dir"] if dir_args else []))
    result = dict(changed=False, rolled_back=[], restored=0, nettune_version=nettune.version)

    state_dir = params["state_dir"] or os.environ.get("NETTUNE_STATE_DIR") or DEFAULT_STATE_DIR
    if not os.path.isdir(state_dir):
        result["msg"] = "nothing to roll back: %s does not exist" % state_dir
        module.exit_json(**result)
    _, rows, _ = nettune.run_json(["history", "--json"] + dir_args)
    active = [
        row
        for row in rows
        if row.get("status") in ("applying", "complete") and in_place(row, params["netns"])
    ]
    if params["state_id"] is not None:
        chosen = [row for row in rows if row.get("id") == params["state_id"]]
        if not chosen:
            module.fail_json(msg="no state %d in %s" % (params["state_id"], state_dir), **result)
        if chosen[0].get("status") not in ("applying", "complete"):
            result["msg"] = "state %d is %s already" % (params["state_id"], chosen[0].get("status"))
            module.exit_json(**result)
    elif params["all"]:
        chosen = sorted(active, key=lambda row: row["id"], reverse=True)
    else:
        chosen = sorted(active, key=lambda row: row["id"], reverse=True)[:1]
    if not chosen:
        result["msg"] = "nothing to roll back in %s" % state_dir
        module.exit_json(**result)

    ids = [row["id"] for row in chosen]
    if module.check_mode:
        result.update(changed=True, rolled_back=ids, msg="would roll back state(s) %s" % ids)
        if module._diff:
            changes = []
            for state_id in ids:
                found = journal(state_dir, state_id) or {}
                changes += [c for c in found.get("changes") or [] if c.get("outcome") == "changed"]
            result["diff"] = diff_of(changes, "to", "original", "applied", "original")
        module.exit_json(**result)

    states = []
    for state_id in ids:
        args = ["rollback", str(state_id), "--json"] + dir_args
        rc, out, err = nettune.run(args, ok=(0, 2))
        if rc != 0:
            nettune.fail(rc, out, err, args, rolled_back=result["rolled_back"], states=states)
        report = nettune.parse(out, err, rc, args)
        if report.get("rolled_back"):
            result["rolled_back"].append(state_id)
            result["restored"] += report.get("changed", 0)
        if report.get("state"):
            states.append(report["state"])
    result["states"] = states
    result["changed"] = bool(result["rolled_back"])
    result["msg"] = "rolled back state(s) %s: %d value(s) restored" % (result["rolled_back"], result["restored"])
    if module._diff and result["changed"]:
        changes = []
        for state in states:
            changes += [c for c in state.get("changes") or [] if c.get("outcome") == "changed"]
        result["diff"] = diff_of(changes, "to", "original", "applied", "original")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
