# -*- coding: utf-8 -*-
# Copyright: nettune contributors
# SPDX-License-Identifier: MIT OR Apache-2.0
"""What the nettune.tune modules share: finding nettune on the host,
checking that it is new enough for what a task asks of it, running it and
turning its JSON and its one-line errors into task results."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

# The oldest nettune these modules work with: the first release with
# `apply --guard`, `plan --check`, `rollback --json` and the host block
# of doctor's JSON.
MIN_VERSION = "0.1.0"

COMMON_ARGS = dict(
    binary=dict(type="path"),
)

_VERSION = re.compile(r"^nettune (\d+)\.(\d+)\.(\d+)\S*")


def version_tuple(text):
    """`0.1.0` -> (0, 1, 0); None when it is not a version."""
    match = re.match(r"^(\d+)\.(\d+)\.(\d+)", text or "")
    if not match:
        return None
    return tuple(int(part) for part in match.groups())


class Nettune(object):
    """One nettune binary on the managed host."""

    def __init__(self, module):
        self.module = module
        given = module.params.get("binary")
        if given:
            self.path = given
        else:
            self.path = module.get_bin_path(
                "nettune", required=False, opt_dirs=["/usr/local/bin", "/usr/bin"]
            )
        if not self.path:
            module.fail_json(
                msg="nettune is not installed on this host (not on PATH): install it "
                "(the nettune.tune.install role takes a .deb or a binary) or give "
                "binary=PATH"
            )
        if not os.access(self.path, os.X_OK) or os.path.isdir(self.path):
            module.fail_json(
                msg="binary '%s' is not an executable file on this host: install nettune "
                "there (the nettune.tune.install role) or give the right path" % self.path
            )
        rc, out, err = module.run_command([self.path, "--version"])
        first = (out or "").strip().splitlines()[0] if (out or "").strip() else ""
        match = _VERSION.match(first)
        if rc != 0 or not match:
            module.fail_json(
                msg="'%s' does not answer as nettune (--version said '%s'%s): give the "
                "path of a nettune binary as binary=PATH"
                % (self.path, first or err.strip(), ", exit %d" % rc if rc else "")
            )
        self.version = "%s.%s.%s" % match.groups()
        self.version_line = first
        self._help = {}

    def require_version(self):
        """Fail unless this nettune is at least MIN_VERSION."""
        if version_tuple(self.version) < version_tuple(MIN_VERSION):
            self.module.fail_json(
                msg="nettune %s at %s is older than this collection expects: it needs "
                "nettune %s or later; install a newer nettune (the nettune.tune.install "
                "role takes a .deb or a binary)" % (self.version, self.path, MIN_VERSION),
                nettune_version=self.version,
                nettune_path=self.path,
                min_version=MIN_VERSION,
            )

    def require(self, command, flags):
        """Fail, naming the version found, what is missing and the version
        needed, unless `nettune COMMAND --help` lists every flag in `flags`
        and the version is at least MIN_VERSION. A build of the right
        version number made before a flag was added is caught too."""
        if command not in self._help:
            rc, out, err = self.module.run_command([self.path] + command.split() + ["--help"])
            self._help[command] = out if rc == 0 else None
        text = self._help[command]
        if text is None:
            missing = ["`nettune %s`" % command]
        else:
            # An option's own line (`      --guard <DURATION>`), not a
            # mention of it in another option's text.
            missing = [
                "`nettune %s %s`" % (command, flag)
                for flag in flags
                if not re.search(r"^\s+(-\w, )?%s(?![\w-])" % re.escape(flag), text, re.M)
            ]
        if missing:
            self.module.fail_json(
                msg="nettune %s at %s lacks %s, which this task needs: this collection "
                "expects nettune %s or later; install a newer nettune (the "
                "nettune.tune.install role takes a .deb or a binary)"
                % (self.version, self.path, ", ".join(missing), MIN_VERSION),
                nettune_version=self.version,
                nettune_path=self.path,
                min_version=MIN_VERSION,
                missing=missing,
            )
        self.require_version()

    def run(self, args, ok=(0,)):
        """Run nettune with `args`: (rc, stdout, stderr). An exit status not
        in `ok` fails the task with nettune's own message."""
        rc, out, err = self.module.run_command([self.path] + list(args))
        if rc not in ok:
            self.fail(rc, out, err, args)
        return rc, out, err

    def fail(self, rc, out, err, args, **extra):
        """Fail the task with nettune's error line(s) as the message."""
        message = nettune_message(err) or (out or "").strip() or "exit status %d" % rc
        self.module.fail_json(
            msg=message,
            rc=rc,
            cmd=[self.path] + list(args),
            stdout=out,
            stderr=err,
            nettune_version=self.version,
            **extra
        )

    def run_json(self, args, ok=(0,)):
        """Run nettune and parse its JSON: (rc, value, stderr)."""
        rc, out, err = self.run(args, ok)
        return rc, self.parse(out, err, rc, args), err

    def parse(self, out, err, rc, args):
        try:
            return json.loads(out)
        except ValueError as exc:
            self.module.fail_json(
                msg="nettune printed no JSON (%s): %s" % (exc, nettune_message(err) or out[:200]),
                rc=rc,
                cmd=[self.path] + list(args),
                stdout=out,
                stderr=err,
            )


def nettune_message(err):
    """nettune's error, without its `nettune: ` prefix; the progress lines
    of a guard (stderr too) are left out."""
    lines = [line for line in (err or "").splitlines() if line.strip()]
    errors = [line[len("nettune: "):] for line in lines if line.startswith("nettune: ")]
    if errors:
        return " ".join(errors)
    return lines[-1].strip() if lines else ""


def place_args(params):
    """--netns and --state-dir, as given."""
    args = []
    if params.get("netns"):
        args += ["--netns", params["netns"]]
    if params.get("state_dir"):
        args += ["--state-dir", params["state_dir"]]
    return args


def strip_newline(value):
    if value is None:
        return ""
    return value[:-1] if value.endswith("\n") else value


def diff_of(changes, before_key, after_key, before_header, after_header):
    """An Ansible diff: one `target = value` line per change, before and
    after (`--diff` shows it as a unified diff)."""
    before = []
    after = []
    for change in changes:
        target = change.get("target", "?")
        before.append("%s = %s\n" % (target, strip_newline(change.get(before_key))))
        after.append("%s = %s\n" % (target, strip_newline(change.get(after_key))))
    return dict(
        before="".join(before),
        after="".join(after),
        before_header=before_header,
        after_header=after_header,
    )
