#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: nettune contributors
# SPDX-License-Identifier: MIT OR Apache-2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: facts
short_description: Gather nettune's view of a host (doctor and inspect JSON) as facts
description:
  - Runs C(nettune doctor --json) and C(nettune inspect --json) on the host
    (or in a named network namespace) and returns them as the fact
    C(nettune) (C(ansible_facts.nettune)), with the nettune version and
    path. Changes nothing.
  - C(nettune.doctor) is what C(nettune fleet report) reads; the
    C(nettune.tune.collect) playbook writes it, one file per host, into a
    directory on the controller.
  - Doctor finding something (its exit status 1) is not a failure.
version_added: "0.1.0"
author: nettune contributors
options:
  gather:
    description: Which reports to gather. An empty list only checks the version.
    type: list
    elements: str
    choices: [doctor, inspect]
    default: [doctor, inspect]
  netns:
    description: Look inside this named network namespace.
    type: str
  interval:
    description:
      - Seconds doctor samples the counters for, to judge rates (C(0)
        judges totals since boot). Default, nettune's (2).
    type: float
  ignore:
    description: Finding ids doctor leaves out (C(--ignore)).
    type: list
    elements: str
  binary:
    description: The nettune binary on the host. Default, C(nettune) on PATH.
    type: path
notes:
  - Check mode is supported (nothing is changed either way).
  - doctor and inspect read what any user may read; some counters and
    driver settings need root (C(become)).
"""

EXAMPLES = r"""
- name: nettune's view of each host
  nettune.tune.facts:

- name: Findings at warn or above
  ansible.builtin.debug:
    msg: "{{ nettune.doctor.findings | selectattr('severity', 'in', ['warn', 'critical']) | map(attribute='id') | list }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts added.
  returned: always
  type: dict
  contains:
    nettune:
      description: C(version), C(path), and the reports gathered (C(doctor), C(inspect)) as nettune prints them with C(--json).
      type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.nettune.tune.plugins.module_utils.nettune import (
    COMMON_ARGS,
    Nettune,
)


def main():
    argument_spec = dict(
        gather=dict(type="list", elements="str", choices=["doctor", "inspect"], default=["doctor", "inspect"]),
        netns=dict(type="str"),
        interval=dict(type="float"),
        ignore=dict(type="list", elements="str"),
    )
    argument_spec.update(COMMON_ARGS)
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    params = module.params
    nettune = Nettune(module)
    where = ["--netns", params["netns"]] if params["netns"] else []
    facts = dict(version=nettune.version, path=nettune.path)
    nettune.require_version()
    if "doctor" in params["gather"]:
        args = ["doctor", "--json"] + where
        if params["interval"] is not None:
            args += ["--interval", str(params["interval"])]
        if params["ignore"]:
            args += ["--ignore", ",".join(params["ignore"])]
        nettune.require("doctor", [a for a in args[1:] if a.startswith("--")])
        # 1: findings at warn or above, which is what doctor is for.
        _, facts["doctor"], _ = nettune.run_json(args, ok=(0, 1))
    if "inspect" in params["gather"]:
        args = ["inspect", "--json"] + where
        nettune.require("inspect", [a for a in args[1:] if a.startswith("--")])
        _, facts["inspect"], _ = nettune.run_json(args)
    module.exit_json(changed=False, ansible_facts=dict(nettune=facts))


if __name__ == "__main__":
    main()
