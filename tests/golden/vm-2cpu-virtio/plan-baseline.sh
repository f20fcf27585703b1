exit 0
#!/bin/sh
# nettune plan --profile baseline: 0 change(s), computed on capture $FIXTURES/vm-2cpu-virtio.
# For review: `nettune apply` makes the same changes with a journal and `nettune rollback`; this script keeps no undo.
set -e
